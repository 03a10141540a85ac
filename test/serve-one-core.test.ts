/**
 * `tessera serve` with one core (bin/tessera.js): V8 collects garbage on the thread that answers requests
 * (--single-threaded-gc) with a small young generation (--max-semi-space-size=4), as the same process made again
 * with the flags (execve: its pid does not change). With more cores nothing is added; where node was given its own
 * choice of either (on its command line or in NODE_OPTIONS), that one is not added.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT, tesseraEnv } from './helpers/process.js';
import { freePort, tempDir } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

/** Whether `taskset` runs here (util-linux), and Node can replace the process (process.execve, Node 22.15+). */
const canPin = (() => {
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' });
    return typeof process.execve === 'function';
  } catch {
    return false;
  }
})();

const started: { kill(signal: NodeJS.Signals): boolean; exitCode: number | null }[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

/** Starts `tessera serve` with `nodeFlags`, on CPU 0 alone when `oneCore`; resolves with its pid once it is ready. */
async function serve(oneCore: boolean, nodeFlags: string[] = [], nodeOptions?: string): Promise<number> {
  const port = await freePort();
  const env = tesseraEnv({
    ...(nodeOptions === undefined ? {} : { NODE_OPTIONS: nodeOptions }),
    TESSERA_DATA_DIR: tempDir(),
    TESSERA_PORT: String(port),
    TESSERA_HOST: '127.0.0.1',
    TESSERA_LOG_LEVEL: 'warn',
  });
  const node = [
    ...nodeFlags,
    '--disable-warning=ExperimentalWarning',
    path.join(ROOT, 'bin/tessera.js'),
    'serve',
  ];
  const child = oneCore
    ? spawn('taskset', ['-c', '0', process.execPath, ...node], { env, stdio: 'ignore' })
    : spawn(process.execPath, node, { env, stdio: 'ignore' });
  started.push(child);
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`tessera serve exited ${child.exitCode}`);
      try {
        return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200;
      } catch {
        return false;
      }
    },
    20_000,
    50,
  );
  return child.pid!;
}

/** The command line the process runs now (after any execve). */
const commandLine = (pid: number): string[] =>
  readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);

/** The node flags the process runs with now, before the flag serve() gives and the command. */
function flagsOf(pid: number): string[] {
  const line = commandLine(pid).slice(1);
  expect(line.slice(-3)).toEqual([
    '--disable-warning=ExperimentalWarning',
    path.join(ROOT, 'bin/tessera.js'),
    'serve',
  ]);
  return line.slice(0, -3);
}

describe.skipIf(!canPin)('tessera serve and the cores it has', () => {
  it('on one core: the same process, made again with --single-threaded-gc and --max-semi-space-size=4 before the rest of its flags', async () => {
    // taskset execs node in its own process: the pid is node's from the start.
    expect(flagsOf(await serve(true))).toEqual(['--single-threaded-gc', '--max-semi-space-size=4']);
  });

  it("on one core, node's own choice stands: --no-single-threaded-gc is kept and only the semi-space size added", async () => {
    expect(flagsOf(await serve(true, ['--no-single-threaded-gc']))).toEqual([
      '--max-semi-space-size=4',
      '--no-single-threaded-gc',
    ]);
  });

  it("on one core, node's own choice of both stands: nothing added", async () => {
    const given = ['--no-single-threaded-gc', '--max-semi-space-size=16'];
    expect(flagsOf(await serve(true, given))).toEqual(given);
  });

  it('on one core, a semi-space size in NODE_OPTIONS stands: only --single-threaded-gc added', async () => {
    expect(flagsOf(await serve(true, [], '--max-semi-space-size=8'))).toEqual(['--single-threaded-gc']);
  });

  it.skipIf(availableParallelism() < 2)('with more cores: nothing added', async () => {
    expect(flagsOf(await serve(false))).toEqual([]);
  });
});
