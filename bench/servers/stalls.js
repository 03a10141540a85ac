/* global process */
// Preloaded into a Tessera server by `npm run bench -- --stalls` (node --import): every callback of the event
// loop (a timer, an immediate, a socket's data, a promise's reaction run from the loop) that holds the thread
// for BENCH_STALL_MS (default 5) or more is written to BENCH_STALLS_FILE as `<start µs> <ms> <resource type>`,
// its start on the monotonic clock of V8's CPU profile, so that the profile's samples in that window name the
// code (bench/lib/stalls.js). async_hooks slows the server down; its figures are not the benchmark's.
import { createHook } from 'node:async_hooks';
import { closeSync, openSync, writeSync } from 'node:fs';

const file = process.env.BENCH_STALLS_FILE;
if (file) {
  const fd = openSync(file, 'a');
  const threshold = Number(process.env.BENCH_STALL_MS ?? 5);
  const types = new Map();
  let depth = 0;
  let started = 0n;
  createHook({
    init(id, type) {
      types.set(id, type);
    },
    before() {
      if (depth++ === 0) started = process.hrtime.bigint();
    },
    after(id) {
      if (--depth !== 0) return;
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      if (ms >= threshold) writeSync(fd, `${started / 1000n} ${ms.toFixed(2)} ${types.get(id) ?? '?'}\n`);
    },
    destroy(id) {
      types.delete(id);
    },
  }).enable();
  process.on('exit', () => closeSync(fd));
}
