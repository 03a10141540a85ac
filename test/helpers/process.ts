import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep, waitFor } from './wait.js';

/** The project root, and how every test starts the real `tessera` command (built into dist/). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const TESSERA = ['--disable-warning=ExperimentalWarning', path.join(ROOT, 'bin/tessera.js')] as const;

/**
 * The environment of a `tessera` process a test starts: this process's environment without any TESSERA_*
 * setting it may carry, a fresh master key, then `settings` (the data directory at least).
 */
export function tesseraEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('TESSERA_')),
  );
  return { ...inherited, TESSERA_MASTER_KEY: randomBytes(32).toString('base64'), ...settings };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a parsed document; the assertions check it
  json: any;
}

/** Collects the output and exit code of a `tessera` process; one that hangs is killed after 15 s. */
export function collect(child: ChildProcess): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    // Bounded: a CLI that hangs is killed and shows up as a failed run.
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
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

/**
 * Runs `tessera <args>` to completion. A command that ends by itself runs in this process, as bin/tessera.js runs
 * it (the built CLI's main(), with `env` as the environment, its stdout, stderr and exit code collected): a
 * process costs 0.3 s of start-up on this machine, which is most of a command's time. One command at a time, since
 * the environment and the output streams are the process's. `serve` and `healthcheck`, and every command when
 * TESSERA_TEST_SPAWN_CLI=1, run as a process (as do every server, withInput() and cli.test.ts's runTogether()).
 */
export function tessera(env: NodeJS.ProcessEnv, ...args: string[]): Promise<CliResult> {
  if (SPAWN_ALWAYS || args[0] === 'serve' || args[0] === 'healthcheck') return spawnTessera(env, args);
  const run = inProcessQueue.then(() => runInProcess(env, args));
  inProcessQueue = run.catch(() => undefined);
  return run;
}

function spawnTessera(env: NodeJS.ProcessEnv, args: string[]): Promise<CliResult> {
  return collect(
    spawn(process.execPath, [...TESSERA, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] }),
  );
}

const SPAWN_ALWAYS = process.env.TESSERA_TEST_SPAWN_CLI === '1';
let inProcessQueue: Promise<unknown> = Promise.resolve();

type Write = typeof process.stdout.write;

/** Collects what `write` is given, as text; the callback, when there is one, is called as a stream would. */
function collector(into: { text: string }): Write {
  return ((chunk: string | Uint8Array, encoding?: unknown, callback?: unknown) => {
    into.text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    const done = typeof encoding === 'function' ? encoding : callback;
    if (typeof done === 'function') queueMicrotask(() => (done as () => void)());
    return true;
  }) as Write;
}

async function runInProcess(env: NodeJS.ProcessEnv, args: string[]): Promise<CliResult> {
  // node:sqlite's warning, printed once when it is first loaded, is not the command's (bin/tessera.js turns it off).
  await import('node:sqlite');
  const cli = (await import(path.join(ROOT, 'dist/cli/index.js'))) as { main(argv: string[]): Promise<void> };
  const saved = { env: process.env, out: process.stdout.write, err: process.stderr.write };
  const stdout = { text: '' };
  const stderr = { text: '' };
  let code: number;
  process.env = { ...env };
  process.exitCode = undefined;
  process.stdout.write = collector(stdout);
  process.stderr.write = collector(stderr);
  try {
    await cli.main([process.execPath, path.join(ROOT, 'bin/tessera.js'), ...args]);
    code = Number(process.exitCode ?? 0);
  } catch (error) {
    // What Node does with an uncaught error: its stack on stderr, exit 1.
    stderr.text += `${(error as Error)?.stack ?? String(error)}\n`;
    code = 1;
  } finally {
    process.stdout.write = saved.out;
    process.stderr.write = saved.err;
    process.env = saved.env;
    process.exitCode = undefined;
  }
  let json: unknown;
  try {
    json = JSON.parse(stdout.text);
  } catch {
    json = undefined;
  }
  return { code, stdout: stdout.text, stderr: stderr.text, json };
}

/** Like tessera(), but a non-zero exit is an error that shows stderr. */
export async function tesseraOk(env: NodeJS.ProcessEnv, ...args: string[]): Promise<CliResult> {
  const result = await tessera(env, ...args);
  if (result.code !== 0) throw new Error(`tessera ${args.join(' ')} exited ${result.code}: ${result.stderr}`);
  return result;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** A running `tessera serve`: its JSON log lines (stdout, shared by workers), stderr and exit. */
export interface Serve {
  child: ChildProcess;
  pid: number;
  port: number;
  url: string;
  logs: LogLine[];
  stderr(): string;
  exited: Promise<Exit>;
  /** Waits until `count` log lines have this message; throws after `timeoutMs`. */
  waitForLog(msg: string, count?: number, timeoutMs?: number): Promise<LogLine[]>;
  /** Sends the signal unless the process has already exited, and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<Exit>;
}

/** Starts `tessera serve` (port and host from env) without waiting for it to be ready. */
export function spawnServe(env: NodeJS.ProcessEnv, ...args: string[]): Serve {
  const child = spawn(process.execPath, [...TESSERA, 'serve', ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: LogLine[] = [];
  let stderr = '';
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      try {
        logs.push(JSON.parse(line) as LogLine);
      } catch {
        // not a log line
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  // 'exit', not 'close': workers that outlived the primary would keep the pipes open.
  const exited = new Promise<Exit>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const port = Number(env.TESSERA_PORT);
  return {
    child,
    pid: child.pid!,
    port,
    url: `http://${env.TESSERA_HOST ?? '127.0.0.1'}:${port}`,
    logs,
    stderr: () => stderr,
    exited,
    async waitForLog(msg, count = 1, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = logs.filter((line) => line.msg === msg);
        if (found.length >= count) return found;
        if (Date.now() > deadline) {
          throw new Error(`no ${count} × "${msg}" in ${timeoutMs} ms; logs: ${JSON.stringify(logs)}`);
        }
        await sleep(20);
      }
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Resolves with the exit, or undefined when the process has not exited within `ms`. */
export async function exitWithin(serve: Serve, ms: number): Promise<Exit | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  try {
    return await Promise.race([serve.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Starts `tessera serve` and waits until /readyz answers 200. */
export async function startServe(env: NodeJS.ProcessEnv, args: string[] = []): Promise<Serve> {
  const server = spawnServe(env, ...args);
  try {
    await waitFor(
      async () => {
        if (server.child.exitCode !== null) {
          throw new Error(`tessera serve exited ${server.child.exitCode}: ${server.stderr()}`);
        }
        try {
          return (await fetch(`${server.url}/readyz`)).status === 200;
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
