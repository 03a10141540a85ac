/* global process, console, gc, performance */
// Every client id in memory (src/read-model/client-ids.ts): what it holds and how long a server takes to read it,
// at given numbers of clients. `npm run bench -- --only client-ids` runs it, pinned like a server; alone:
// `npm run build && npx node --expose-gc bench/client-ids.js [--clients 100000,1000000] [--json]`.
//
// For each number: a fresh SQLite store (migrated by Tessera, an audience added), filled by the benchmark's
// bulk insert (bench/lib/stores.js: ids made by generateClientId, each with a secret and a grant, one
// transaction), then opened as the server opens it and read by the server's Directory.start(): the feed
// position, the audiences, a count, and the ids a page (10 000) at a time into the set. Reported: the time of
// that start, the memory it left held (heap and array buffers, after full collections), the set's own
// accounting, and a check that every id is in it and random ones are not.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { generateClientId } from '../dist/domain/secrets.js';
import { Directory } from '../dist/read-model/directory.js';
import { openSqliteStore } from '../dist/store/sqlite.js';
import { coldClients, insertSqlite } from './lib/stores.js';

const AUDIENCE = 'https://api.bench.example';

const { values } = parseArgs({
  options: {
    clients: { type: 'string', default: '100000,1000000' },
    json: { type: 'boolean', default: false },
  },
});
const counts = values.clients.split(',').map((s) => {
  const n = Number(s.trim());
  if (!Number.isInteger(n) || n < 1) throw new Error(`--clients wants whole numbers ≥ 1, got ${s}`);
  return n;
});
if (typeof gc !== 'function')
  throw new Error('run with --expose-gc (npx node --expose-gc bench/client-ids.js)');

/** Heap and array buffers in use after full collections: what is kept, not what awaits collection. */
function held() {
  gc();
  gc();
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
}

const log = (message) => process.stderr.write(`[client-ids] ${message}\n`);

async function measure(count) {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-ids-'));
  try {
    const file = join(dir, 'tessera.db');
    const setup = openSqliteStore(file);
    await setup.migrate();
    await setup.addAudience({ url: AUDIENCE, name: null, tokenTtl: null, signingAlg: null });
    await setup.close();
    let started = performance.now();
    const clients = coldClients(count);
    const madeMs = performance.now() - started;
    started = performance.now();
    await insertSqlite(file, clients, AUDIENCE);
    const fillMs = performance.now() - started;
    log(
      `${count.toLocaleString('en-US')} clients made in ${madeMs.toFixed(0)} ms, written in ${fillMs.toFixed(0)} ms`,
    );

    // As the server opens its store (with background checkpoints: src/runtime/store.ts) and starts its directory.
    const store = openSqliteStore(file, { backgroundCheckpoints: true });
    const directory = new Directory(store, { ttlMs: 60_000, max: 100_000, pollMs: 3_600_000, retryAfter: 5 });
    const before = held();
    started = performance.now();
    await directory.start();
    const startMs = performance.now() - started;
    const grownBytes = held() - before;
    const stats = directory.idStats();

    started = performance.now();
    let found = 0;
    for (const id of clients.ids) if (directory.registered(id)) found++;
    const lookupNs = ((performance.now() - started) * 1e6) / count;
    const others = Array.from({ length: Math.min(count, 100_000) }, generateClientId);
    const falsePositives = others.filter((id) => directory.registered(id)).length;
    await directory.stop();
    await store.close();
    return {
      clients: count,
      fillMs: Math.round(fillMs),
      startMs: Math.round(startMs),
      setBytes: stats.bytes,
      heldBytes: grownBytes,
      heldBytesPerClient: grownBytes / count,
      heldMbPerMillion: ((grownBytes / count) * 1e6) / 2 ** 20,
      idsInSet: stats.ids,
      found,
      othersChecked: others.length,
      falsePositives,
      lookupNs,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const results = [];
for (const count of counts) {
  const result = await measure(count);
  results.push(result);
  log(
    `${count.toLocaleString('en-US')} clients: start ${result.startMs} ms, held ${(result.heldBytes / 2 ** 20).toFixed(2)} MB ` +
      `(${result.heldBytesPerClient.toFixed(2)} B/client), set ${(result.setBytes / 2 ** 20).toFixed(2)} MB, ` +
      `${result.found}/${count} found, ${result.falsePositives}/${result.othersChecked} false positives, ` +
      `${result.lookupNs.toFixed(0)} ns per membership test`,
  );
}
if (values.json) process.stdout.write(JSON.stringify({ node: process.versions.node, results }) + '\n');
else console.table(results);
