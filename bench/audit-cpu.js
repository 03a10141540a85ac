/* global process, console, performance, setImmediate, setTimeout */
// The audit trail's writes on the store as the server opens it (SQLite, its maintenance thread):
// `npm run build && npx node bench/audit-cpu.js [--clients 50,1000,10000] [--events 200000] [--dist DIR]`.
//
// 1. CPU per event. For each number of clients, the events of a second at a time (12 000, each of a client picked
//    at random) are recorded by Tessera's own AuditRecorder, put on its spool and flushed to the store, as the
//    server does every second under load; the process's CPU (both threads: the recorder's and the maintenance
//    thread's) and the wall time of the flushes are divided by the events. The first tenth is a warm-up.
// 2. The server's own writes meanwhile. Ten such seconds again (1 000 clients), the event loop kept busy 3 ms a
//    turn (the requests of a loaded server), and every 2 ms a replay guard's insert (a private_key_jwt or DPoP
//    request's, on the server's connection) timed from its call to its answer: how long it waited for the lock.
//
// `--dist` measures another build (a worktree of an older revision), so that two can be compared on the same
// machine in a row.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { pino } from 'pino';

const { values } = parseArgs({
  options: {
    clients: { type: 'string', default: '50,1000,10000' },
    events: { type: 'string', default: '200000' },
    dist: { type: 'string', default: 'dist' },
  },
});
const dist = pathToFileURL(resolve(values.dist)).href;
const { openSqliteStore } = await import(`${dist}/store/sqlite.js`);
const { AuditRecorder } = await import(`${dist}/audit/recorder.js`);
const N = Number(values.events);
const PER_SECOND = 12_000;

/**
 * Runs `body` with a fresh server-mode SQLite store, its recorder (flushed by hand) and a function that records the
 * `count` events of one second, each of one of `clientCount` clients picked at random; removes it all after.
 */
async function withRecorder(clientCount, body) {
  const clients = Array.from({ length: clientCount }, () => randomBytes(16).toString('hex'));
  const dir = mkdtempSync(join(tmpdir(), 'tessera-audit-cpu-'));
  const store = openSqliteStore(join(dir, 'tessera.db'), { backgroundCheckpoints: true });
  try {
    await store.migrate();
    store.prepareAuditWrites();
    const recorder = new AuditRecorder(store, {
      spoolDir: join(dir, 'spool'),
      spoolMaxBytes: 1 << 30,
      retentionSeconds: 90 * 86_400,
      logger: pino({ level: 'silent' }),
      flushMs: 3_600_000, // flushed here, by hand
    });
    recorder.start();
    // `count` events from `from` on, twelve a millisecond.
    const recordSecond = (from, count) => {
      for (let i = 0; i < count; i++)
        recorder.record({
          at: from + Math.floor(i / 12),
          type: 'token.issued',
          clientId: clients[Math.floor(Math.random() * clientCount)],
          audience: 'https://api.example.com',
          jti: randomBytes(16).toString('base64url'),
          reason: null,
          source: '10.0.0.1',
        });
      recorder.persist();
    };
    const result = await body({ store, recorder, recordSecond });
    if (recorder.queued !== 0) throw new Error(`${recorder.queued} events were not written`);
    await recorder.close();
    return result;
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** CPU and wall time of the flushes per event, the first tenth left out (a warm-up). */
function measure(clientCount) {
  return withRecorder(clientCount, async ({ recorder, recordSecond }) => {
    const start = Date.now() - 3_600_000;
    let cpu = 0;
    let wall = 0;
    let measured = 0;
    for (let done = 0; done < N; done += PER_SECOND) {
      const count = Math.min(PER_SECOND, N - done);
      recordSecond(start + Math.floor(done / 12), count);
      const cpuBefore = process.cpuUsage();
      const wallBefore = performance.now();
      await recorder.flush();
      if (done >= N / 10) {
        const used = process.cpuUsage(cpuBefore);
        cpu += used.user + used.system;
        wall += performance.now() - wallBefore;
        measured += count;
      }
    }
    return { clients: clientCount, cpu: cpu / measured, wall: (wall * 1000) / measured };
  });
}

/** Replay guard inserts while the recorder flushes ten seconds of events, the loop busy 3 ms a turn. */
function serverWrites(clientCount) {
  return withRecorder(clientCount, async ({ store, recorder, recordSecond }) => {
    let busy = true;
    (function turn() {
      if (!busy) return;
      const started = performance.now();
      while (performance.now() - started < 3);
      setImmediate(turn);
    })();
    const waits = [];
    const inserting = (async () => {
      while (busy) {
        const started = performance.now();
        await store.useAssertionJti(randomBytes(12).toString('base64url'), Date.now() + 60_000);
        waits.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    })();
    try {
      for (let second = 0; second < 10; second++) {
        const started = performance.now();
        recordSecond(Date.now(), PER_SECOND);
        await recorder.flush();
        const left = 1000 - (performance.now() - started);
        if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
      }
    } finally {
      busy = false;
      await inserting;
    }
    waits.sort((a, b) => a - b);
    const at = (q) => waits[Math.min(waits.length - 1, Math.floor(waits.length * q))].toFixed(1);
    return { count: waits.length, p50: at(0.5), p99: at(0.99), p999: at(0.999), max: at(1) };
  });
}

console.log(`${N.toLocaleString('en-US')} events, ${values.dist}`);
console.log('clients   CPU µs/event   wall µs/event');
for (const count of values.clients.split(',').map(Number)) {
  const { clients, cpu, wall } = await measure(count);
  console.log(
    `${String(clients).padStart(7)}   ${cpu.toFixed(2).padStart(12)}   ${wall.toFixed(2).padStart(13)}`,
  );
}
const writes = await serverWrites(1000);
console.log(
  `replay guard inserts while flushing (1000 clients, loop busy 3 ms a turn): ${writes.count}, ` +
    `p50 ${writes.p50} ms, p99 ${writes.p99} ms, p99.9 ${writes.p999} ms, max ${writes.max} ms`,
);
