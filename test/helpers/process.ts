import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project root, and how every test starts the real `tessera` command (built into dist/). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const TESSERA = ['--disable-warning=ExperimentalWarning', path.join(ROOT, 'bin/tessera.js')] as const;

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a parsed document; the assertions check it
  json: any;
}

/** Runs `tessera <args>` to completion. */
export function tessera(env: NodeJS.ProcessEnv, ...args: string[]): Promise<CliResult> {
  const child = spawn(process.execPath, [...TESSERA, ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => {
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

/** Like tessera(), but a non-zero exit is an error that shows stderr. */
export async function tesseraOk(env: NodeJS.ProcessEnv, ...args: string[]): Promise<CliResult> {
  const result = await tessera(env, ...args);
  if (result.code !== 0) throw new Error(`tessera ${args.join(' ')} exited ${result.code}: ${result.stderr}`);
  return result;
}

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  /** Everything the process wrote so far. */
  output(): string;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Polls `check` every `everyMs` until it returns true or `timeoutMs` passes; returns the time it took. */
export async function waitFor(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  everyMs = 25,
): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Starts `tessera serve` and waits until /readyz answers 200. */
export async function startServe(env: NodeJS.ProcessEnv, args: string[] = []): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...TESSERA, 'serve', ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://${env.TESSERA_HOST ?? '127.0.0.1'}:${env.TESSERA_PORT}`;
  const server: ServerProcess = {
    child,
    url,
    output: () => output,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`tessera serve exited ${child.exitCode}: ${output}`);
        try {
          return (await fetch(`${url}/readyz`)).status === 200;
        } catch {
          return false;
        }
      },
      20_000,
      50,
    );
  } catch (error) {
    await server.stop('SIGKILL');
    throw error;
  }
  return server;
}
