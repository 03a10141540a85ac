#!/usr/bin/env -S node --disable-warning=ExperimentalWarning
// The `tessera` command. Run it through npm or npx so that it runs on the project's Node 22.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 13)) {
  process.stderr.write(
    `tessera: Node ${process.versions.node} is too old (needs >= 22.13, for node:sqlite); ` +
      'run it as "npx tessera" in the project, which uses the Node 22 that npm installed\n',
  );
  process.exit(2);
}
// A server with one core (its CPU affinity: taskset, a cpuset) collects garbage on its own thread: V8's helper
// threads for it would only take turns with the thread that answers requests, each stopping it for its time
// slice. Its young generation is smaller (8 MB semi-spaces instead of up to 16): each collection of it stops
// requests for less time, and it takes 16 MB less. 4 MB promoted so much of what requests in flight hold that a
// full collection ran every half second, 60 ms of marking on this thread each, in some runs (0.91x the tokens). Its old generation
// may grow by 20 % of what a full collection left before the next one (V8 lets it double or more): with no helper
// thread to mark concurrently it otherwise grows far past what is live (150 MB of pages for 65 MB live with 100k
// cached clients, 80 MB with the flag), and the pages it freed stay with the process. And glibc's malloc keeps
// two arenas (MALLOC_ARENA_MAX=2) rather than up to 8 a CPU of the machine for threads that take turns on one
// core: 8-15 MB less. See README, "Garbage collection on one core". The flags must be there when the process
// starts, so the process becomes itself again with them (execve: the same process, nothing opened yet). A choice
// of any of them given to node (or in NODE_OPTIONS, or MALLOC_ARENA_MAX in the environment) is left as it is.
const { availableParallelism } = await import('node:os');
if (process.argv[2] === 'serve' && typeof process.execve === 'function' && availableParallelism() === 1) {
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  const defaults = [
    [/^--(no-)?single[-_]threaded[-_]gc$/, '--single-threaded-gc'],
    [/^--(max|min)[-_]semi[-_]space[-_]size\b/, '--max-semi-space-size=8'],
    [/^--heap[-_]growing[-_]percent\b/, '--heap-growing-percent=20'],
  ];
  const flags = defaults
    .filter(([choice]) => !given.some((flag) => choice.test(flag)))
    .map(([, flag]) => flag);
  const arenas = process.env.MALLOC_ARENA_MAX === undefined;
  if (flags.length > 0 || arenas)
    process.execve(
      process.execPath,
      [process.execPath, ...flags, ...process.execArgv, ...process.argv.slice(1)],
      arenas ? { ...process.env, MALLOC_ARENA_MAX: '2' } : process.env,
    );
}
// Node keeps the compiled code of every module it loads (in $NODE_COMPILE_CACHE, or a directory of the system's
// temporary one; NODE_DISABLE_COMPILE_CACHE=1 turns it off), so a command after the first starts ~15 % faster.
const { enableCompileCache } = await import('node:module');
enableCompileCache?.();
let cli;
try {
  cli = await import('../dist/cli/index.js');
} catch (error) {
  if (error?.code === 'ERR_MODULE_NOT_FOUND' && String(error.message).includes('dist/cli')) {
    process.stderr.write('tessera: not built yet; run "npm run build" (npm ci does it)\n');
    process.exit(2);
  }
  throw error;
}
await cli.main();
