/* global console, process */
// One half of the physical limit on one core (bench/README.md): what one token's signature costs when nothing
// else runs, the ceiling's own signing (the same key type, header, claims and node:crypto call) in a tight
// loop, pinned like a server. Prints {"usPerSignature": …} on one line.
import { performance } from 'node:perf_hooks';
import { accessTokenSigner } from './common.js';

const sign = accessTokenSigner();
const SECONDS = Number(process.env.BENCH_SIGN_SECONDS ?? 2);

const run = (ms) => {
  let n = 0;
  const started = performance.now();
  const until = started + ms;
  while (performance.now() < until) {
    for (let i = 0; i < 100; i++) sign('bench-client', 'https://api.bench.example');
    n += 100;
  }
  return ((performance.now() - started) * 1000) / n;
};

run(500); // warm-up: the JIT, the key's first use
// The best of three: the cost of a signature, not of whatever else the machine did meanwhile.
const usPerSignature = Math.min(
  run((SECONDS * 1000) / 3),
  run((SECONDS * 1000) / 3),
  run((SECONDS * 1000) / 3),
);
console.log(JSON.stringify({ usPerSignature }));
