/**
 * `tessera serve` with one core (bin/tessera.js): V8 collects garbage on the thread that answers requests
 * (--single-threaded-gc) with a small young generation (--max-semi-space-size=8) and an old generation that grows
 * by 20 % between full collections (--heap-growing-percent=20), and glibc's malloc with two arenas
 * (MALLOC_ARENA_MAX=2), as the same process made again with the flags (execve: its pid does not change). With more
 * cores nothing is added; where node was given its own choice of one (on its command line, in NODE_OPTIONS, or
 * MALLOC_ARENA_MAX in its environment), that one is not added.
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
async function serve(
  oneCore: boolean,
  nodeFlags: string[] = [],
  nodeOptions?: string,
  arenas?: string,
): Promise<number> {
  const port = await freePort();
  const { MALLOC_ARENA_MAX: _inherited, ...inherited } = tesseraEnv({});
  const env = {
    ...inherited,
    ...(arenas === undefined ? {} : { MALLOC_ARENA_MAX: arenas }),
    ...(nodeOptions === undefined ? {} : { NODE_OPTIONS: nodeOptions }),
    TESSERA_DATA_DIR: tempDir(),
    TESSERA_PORT: String(port),
    TESSERA_HOST: '127.0.0.1',
    TESSERA_LOG_LEVEL: 'warn',
  };
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

/** MALLOC_ARENA_MAX in the environment the process runs with now (after any execve). */
const arenasOf = (pid: number): string | undefined =>
  readFileSync(`/proc/${pid}/environ`, 'utf8')
    .split('\0')
    .find((entry) => entry.startsWith('MALLOC_ARENA_MAX='))
    ?.slice('MALLOC_ARENA_MAX='.length);

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
  it('on one core: the same process, made again with --single-threaded-gc, --max-semi-space-size=8 and --heap-growing-percent=20 before the rest of its flags', async () => {
    // taskset execs node in its own process: the pid is node's from the start.
    const pid = await serve(true);
    expect(flagsOf(pid)).toEqual([
      '--single-threaded-gc',
      '--max-semi-space-size=8',
      '--heap-growing-percent=20',
    ]);
    expect(arenasOf(pid)).toBe('2');
  });

  it('on one core, MALLOC_ARENA_MAX given in the environment stands', async () => {
    const pid = await serve(true, [], undefined, '8');
    expect(arenasOf(pid)).toBe('8');
    expect(flagsOf(pid)).toEqual([
      '--single-threaded-gc',
      '--max-semi-space-size=8',
      '--heap-growing-percent=20',
    ]);
  });

  it("on one core, node's own choice stands: --no-single-threaded-gc is kept and only the other two added", async () => {
    expect(flagsOf(await serve(true, ['--no-single-threaded-gc']))).toEqual([
      '--max-semi-space-size=8',
      '--heap-growing-percent=20',
      '--no-single-threaded-gc',
    ]);
  });

  it("on one core, node's own growing percent stands, with V8's spelling (underscores)", async () => {
    expect(flagsOf(await serve(true, ['--heap_growing_percent=50']))).toEqual([
      '--single-threaded-gc',
      '--max-semi-space-size=8',
      '--heap_growing_percent=50',
    ]);
  });

  it("on one core, node's own choice of all three stands: no flag added, only the arenas", async () => {
    const given = ['--no-single-threaded-gc', '--max-semi-space-size=16', '--heap-growing-percent=0'];
    const pid = await serve(true, given);
    expect(flagsOf(pid)).toEqual(given);
    expect(arenasOf(pid)).toBe('2');
  });

  it('on one core, with every choice given, each stands', async () => {
    const given = ['--no-single-threaded-gc', '--max-semi-space-size=16', '--heap-growing-percent=0'];
    const pid = await serve(true, given, undefined, '4');
    expect(flagsOf(pid)).toEqual(given);
    expect(arenasOf(pid)).toBe('4');
  });

  it('on one core, a semi-space size in NODE_OPTIONS stands: only the other two added', async () => {
    expect(flagsOf(await serve(true, [], '--max-semi-space-size=12'))).toEqual([
      '--single-threaded-gc',
      '--heap-growing-percent=20',
    ]);
  });

  it.skipIf(availableParallelism() < 2)('with more cores: nothing added', async () => {
    const pid = await serve(false);
    expect(flagsOf(pid)).toEqual([]);
    expect(arenasOf(pid)).toBeUndefined();
  });
});
