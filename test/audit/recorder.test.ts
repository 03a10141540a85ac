/**
 * The audit recorder and its spool, on a real SQLite store: events are on disk before their answers, reach
 * the store exactly once (across crashes of the process that wrote them, which the tests make real with
 * SIGKILL), wait on disk while the store is down, are dropped only when the spool is full (counted, logged
 * once), and throttled refusals are summed per caller and minute.
 *
 * The crash tests run a child process on dist/ (`npm run build` first; `npm test` does it).
 */
import { spawn } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditRecorder, THROTTLE_WINDOW_MS } from '../../src/audit/recorder.js';
import { Spool } from '../../src/audit/spool.js';
import type { AuditEntry } from '../../src/domain/token-events.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { AuditRecord, AuditStore, Store } from '../../src/store/types.js';
import { ROOT } from '../helpers/process.js';
import { tempDir } from '../helpers/server.js';
import { sleep } from '../helpers/wait.js';
import { clockAt } from '../helpers/clock.js';

const T0 = Date.parse('2026-11-01T10:00:00.000Z');

const issued = (i: number): AuditEntry => ({
  at: T0 + i,
  type: 'token.issued',
  clientId: 'svc',
  audience: 'https://api.example.com',
  jti: `jti-${i}`,
  reason: null,
  source: '192.0.2.1',
});

interface Logged {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** A logger whose lines the test reads. */
function capture() {
  const lines: Logged[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as Logged) });
  return { logger, lines, messages: () => lines.map((l) => l.msg) };
}

const stores: Store[] = [];
const recorders: AuditRecorder[] = [];
afterEach(async () => {
  for (const recorder of recorders.splice(0)) await recorder.close();
  for (const store of stores.splice(0)) await store.close();
});

async function sqlite(file: string): Promise<Store> {
  const store = openSqliteStore(file);
  await store.migrate();
  stores.push(store);
  return store;
}

/** A store whose audit writes fail while `down` is set, passing everything else to the real one. */
function switchable(store: Store) {
  const state = { down: false, writes: 0 };
  const check = () => {
    if (state.down) throw new Error('the store is down');
  };
  const audit: AuditStore = {
    appendAuditEvents: async (events, position, part) => {
      check();
      state.writes++;
      return store.appendAuditEvents(events, position, part);
    },
    prepareAuditWrites: () => store.prepareAuditWrites(),
    spoolPosition: async (segment) => (check(), store.spoolPosition(segment)),
    forgetSpoolSegments: async (segments) => (check(), store.forgetSpoolSegments(segments)),
    queryAuditEvents: (filter) => store.queryAuditEvents(filter),
    pruneAuditEvents: async (before, limit) => (check(), store.pruneAuditEvents(before, limit)),
    tokenCounts: (since, until) => store.tokenCounts(since, until),
    pruneTokenCounts: async (before) => (check(), store.pruneTokenCounts(before)),
  };
  return { audit, state };
}

function recorder(
  store: AuditStore,
  spoolDir: string,
  options: Partial<ConstructorParameters<typeof AuditRecorder>[1]> = {},
): AuditRecorder {
  const made = new AuditRecorder(store, {
    spoolDir,
    spoolMaxBytes: 1 << 30,
    retentionSeconds: 10 * 365 * 86_400,
    logger: pino({ level: 'silent' }),
    flushMs: 3_600_000, // the tests flush by hand
    ...options,
  });
  recorders.push(made);
  return made;
}

const jtis = async (store: Store) =>
  (await store.queryAuditEvents({ limit: 100_000 })).map((e) => e.jti).reverse();
const spoolFiles = (dir: string) => readdirSync(dir).sort();

describe('AuditRecorder: the spool', () => {
  it('puts every recorded event on disk at persist, and the store gets them once, in batches', async () => {
    const dir = tempDir();
    const store = await sqlite(path.join(dir, 'tessera.db'));
    const { audit, state } = switchable(store);
    const spoolDir = path.join(dir, 'spool');
    const r = recorder(audit, spoolDir, { batch: 2 });
    r.start();
    for (let i = 0; i < 5; i++) r.record(issued(i));
    expect(r.queued).toBe(5);
    r.persist();
    const [segment] = r.spoolSegments;
    const lines = readFileSync(path.join(spoolDir, segment!), 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(JSON.parse(lines[0]!)).toEqual([
      T0,
      'token.issued',
      'svc',
      'https://api.example.com',
      'jti-0',
      null,
      '192.0.2.1',
      null,
    ]);
    await r.flush();
    expect(state.writes).toBe(3); // 2 + 2 + 1
    expect(await jtis(store)).toEqual(['jti-0', 'jti-1', 'jti-2', 'jti-3', 'jti-4']);
    expect(r.queued).toBe(0);
    await r.flush();
    expect(await jtis(store)).toHaveLength(5);
    expect(await store.spoolPosition(segment!)).toBe(r.spoolBytes);
  });

  it("writes a flush in batches of up to 8 chunks, which the server's store commits at once; a part that fails leaves its whole batch for the next flush, and every event reaches the store once", async () => {
    const dir = tempDir();
    const store = openSqliteStore(path.join(dir, 'tessera.db'), { backgroundCheckpoints: true });
    stores.push(store);
    await store.migrate();
    // The parts as the store was asked for them, and a part that fails in the store (a type that cannot be null).
    const parts: [first: boolean, last: boolean, events: number, committed: boolean | 'failed'][] = [];
    let failAt = 5;
    const audit: AuditStore = {
      ...switchable(store).audit,
      appendAuditEvents: async (events, position, part) => {
        const failing = parts.length + 1 === failAt;
        const sent = failing ? [...events, { ...events[0]!, type: null } as unknown as AuditRecord] : events;
        try {
          const committed = await store.appendAuditEvents(sent, position, part);
          parts.push([part!.first, part!.last, events.length, committed]);
          return committed;
        } catch (error) {
          parts.push([part!.first, part!.last, events.length, 'failed']);
          throw error;
        }
      },
    };
    // A clock that stands still: a batch is never cut short by its 50 ms, however slow the machine.
    const r = recorder(audit, path.join(dir, 'spool'), { batch: 2, clock: clockAt(() => T0) });
    r.start();
    await r.flush();
    for (let i = 0; i < 21; i++) r.record(issued(i));
    r.persist();
    // The first batch fails at its fifth part: its four held parts are rolled back with it, nothing is stored.
    await r.flush();
    expect(parts).toEqual([
      [true, false, 2, false],
      [false, false, 2, false],
      [false, false, 2, false],
      [false, false, 2, false],
      [false, false, 2, 'failed'],
    ]);
    expect(await jtis(store)).toEqual([]);
    expect(r.queued).toBe(21);
    // The next flush writes them all: 11 chunks, a batch of 8 and one of 3, each committed with its last part.
    failAt = 0;
    parts.length = 0;
    await r.flush();
    expect(parts).toEqual([
      [true, false, 2, false],
      ...Array.from({ length: 6 }, () => [false, false, 2, false]),
      [false, true, 2, true],
      [true, false, 2, false],
      [false, false, 2, false],
      [false, true, 1, true],
    ]);
    expect(await jtis(store)).toEqual(Array.from({ length: 21 }, (_, i) => `jti-${i}`));
    expect(r.queued).toBe(0);
    expect(await store.spoolPosition(r.spoolSegments[0]!)).toBe(r.spoolBytes);
  });

  it('persists on its own in the next loop iteration when no answer follows', async () => {
    const dir = tempDir();
    const store = await sqlite(path.join(dir, 'tessera.db'));
    const spoolDir = path.join(dir, 'spool');
    const r = recorder(store, spoolDir);
    r.start();
    r.record(issued(1));
    expect(r.spoolBytes).toBe(0);
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(r.spoolBytes).toBeGreaterThan(0);
  });

  it('while the store is down, events wait on disk, not in memory; one line when the outage begins, one when it ends', async () => {
    const dir = tempDir();
    const store = await sqlite(path.join(dir, 'tessera.db'));
    const { audit, state } = switchable(store);
    const log = capture();
    const r = recorder(audit, path.join(dir, 'spool'), { logger: log.logger });
    r.start();
    await r.flush();
    state.down = true;
    for (let i = 0; i < 3000; i++) r.record(issued(i));
    r.persist();
    for (let i = 0; i < 5; i++) await r.flush();
    expect(r.queued).toBe(3000);
    expect(r.spoolBytes).toBeGreaterThan(3000 * 80);
    state.down = false;
    await r.flush();
    expect(r.queued).toBe(0);
    expect(await jtis(store)).toEqual(Array.from({ length: 3000 }, (_, i) => `jti-${i}`));
    const outage = log.lines.filter((l) => l.msg.startsWith('audit events'));
    expect(outage.map((l) => [l.level, l.msg])).toEqual([
      [50, 'audit events cannot be written to the store yet; they wait in the spool'],
      [30, 'audit events reach the store again'],
    ]);
    expect(outage[0]).toMatchObject({ queued: 3000 });
  });

  it('past its size, drops new events, counted, with one line when it fills and one when it has room again', async () => {
    const dir = tempDir();
    const store = await sqlite(path.join(dir, 'tessera.db'));
    const { audit, state } = switchable(store);
    const log = capture();
    const r = recorder(audit, path.join(dir, 'spool'), { logger: log.logger, spoolMaxBytes: 2000 });
    r.start();
    state.down = true;
    let i = 0;
    // Persisted one at a time, as answers go: the spool takes whole lines until the next would not fit.
    while (r.dropped === 0) {
      r.record(issued(i++));
      r.persist();
    }
    const kept = i - 1;
    expect(r.spoolBytes).toBeLessThanOrEqual(2000);
    expect(kept).toBeGreaterThan(10);
    for (let k = 0; k < 5; k++) {
      r.record(issued(i++));
      r.persist();
    }
    expect(r.dropped).toBe(6);
    state.down = false;
    await r.flush();
    r.record(issued(i++));
    r.persist();
    expect(r.dropped).toBe(6);
    await r.flush();
    const stored = await jtis(store);
    expect(stored).toEqual([...Array.from({ length: kept }, (_, k) => `jti-${k}`), `jti-${i - 1}`]);
    const full = log.lines.filter((l) => l.msg.startsWith('the audit spool'));
    expect(full.map((l) => [l.level, l.msg])).toEqual([
      [
        50,
        'the audit spool is full (TESSERA_AUDIT_SPOOL_MAX): new audit events are dropped until the store takes the backlog',
      ],
      [30, 'the audit spool has room again'],
    ]);
    expect(full[1]).toMatchObject({ dropped: 6 });
  });

  it('skips damaged lines (counted and logged) and writes the others; whole runs of lines are read at once', async () => {
    const line = (jti: string) =>
      JSON.stringify([T0, 'token.issued', 'c', 'https://api.example.com', jti, null, '10.0.0.1', null]);
    // Each case: what is appended after the recorder's own line, the jtis written, the lines skipped.
    const cases: [string, string[], number][] = [
      // Lines that are not JSON, or not a record: skipped, counted and logged; the others written.
      ['not json\n[1,"token.unknown",null,null,null,null,null,null]\n', ['jti-1'], 2],
      // Every line parses: one JSON.parse for them all.
      [`${line('a')}\n${line('b')}\n`, ['a', 'b', 'jti-1'], 0],
      // Every line parses, one is not a record.
      [`[1,"token.unknown",null,null,null,null,null,null]\n${line('a')}\n`, ['a', 'jti-1'], 1],
      // Two records on one line: one damaged line, not two events (the lines are read one by one).
      [`${line('a')},${line('b')}\n${line('c')}\n`, ['c', 'jti-1'], 1],
      // A line cut short.
      [`${line('a').slice(0, 20)}\n${line('b')}\n`, ['b', 'jti-1'], 1],
    ];
    for (const [appended, expected, damaged] of cases) {
      const dir = tempDir();
      const store = await sqlite(path.join(dir, 'tessera.db'));
      const spoolDir = path.join(dir, 'spool');
      const log = capture();
      const r = recorder(store, spoolDir, { logger: log.logger });
      r.start();
      r.record(issued(1));
      r.persist();
      appendFileSync(path.join(spoolDir, r.spoolSegments[0]!), appended);
      await r.close();
      recorders.splice(recorders.indexOf(r), 1);
      const next = recorder(store, spoolDir, { logger: log.logger });
      next.start();
      await next.flush();
      expect((await jtis(store)).sort()).toEqual(expected);
      expect(log.lines.filter((l) => l.msg === 'damaged audit spool lines were skipped')).toEqual(
        damaged === 0 ? [] : [expect.objectContaining({ lines: damaged })],
      );
    }
  });

  it('cleans control characters (PostgreSQL refuses NUL) out of what it records', async () => {
    const dir = tempDir();
    const store = await sqlite(path.join(dir, 'tessera.db'));
    const r = recorder(store, path.join(dir, 'spool'));
    r.start();
    r.record({ ...issued(1), clientId: 'a\u0000b', audience: 'https://x\u0000\n', reason: 'r\u001b[31m' });
    await r.flush();
    expect((await store.queryAuditEvents({ limit: 1 }))[0]).toMatchObject({
      clientId: 'a\uFFFDb',
      audience: 'https://x\uFFFD\uFFFD',
      reason: 'r\uFFFD[31m',
    });
  });

  it('leaves nothing behind when closed with everything in the store', async () => {
    const dir = tempDir();
    const store = await sqlite(path.join(dir, 'tessera.db'));
    const spoolDir = path.join(dir, 'spool');
    const r = recorder(store, spoolDir);
    r.start();
    for (let i = 0; i < 3; i++) r.record(issued(i));
    await r.close();
    recorders.splice(recorders.indexOf(r), 1);
    expect(spoolFiles(spoolDir)).toEqual([]);
    expect(await jtis(store)).toEqual(['jti-0', 'jti-1', 'jti-2']);
  });

  it('closed while the store is down, it leaves the spool for the next start, which writes it', async () => {
    const dir = tempDir();
    const store = await sqlite(path.join(dir, 'tessera.db'));
    const { audit, state } = switchable(store);
    const spoolDir = path.join(dir, 'spool');
    const r = recorder(audit, spoolDir);
    r.start();
    state.down = true;
    for (let i = 0; i < 3; i++) r.record(issued(i));
    await r.close();
    recorders.splice(recorders.indexOf(r), 1);
    expect(spoolFiles(spoolDir)).toHaveLength(2); // its lock file and its segment
    state.down = false;
    const next = recorder(audit, spoolDir);
    next.start();
    await next.flush();
    expect(await jtis(store)).toEqual(['jti-0', 'jti-1', 'jti-2']);
    expect(
      spoolFiles(spoolDir).filter((f) => !f.startsWith(`${next.spoolSegments[0]!.split('.')[0]}.`)),
    ).toEqual([]);
  });
});

/**
 * A child process that records `count` events into a spool and a SQLite store, then, as `mode` says, writes
 * some of them to the store first and is killed (SIGKILL), or stays alive until the test kills it.
 */
function child(
  spoolDir: string,
  dbFile: string,
  mode: 'crash' | 'flush-some-then-crash' | 'hold',
  count: number,
) {
  const code = `
    import { pino } from 'pino';
    import { AuditRecorder } from './dist/audit/recorder.js';
    import { openSqliteStore } from './dist/store/sqlite.js';
    const [spoolDir, dbFile, mode, count] = process.argv.slice(1);
    const store = openSqliteStore(dbFile);
    await store.migrate();
    const recorder = new AuditRecorder(store, {
      spoolDir, spoolMaxBytes: 1 << 30, retentionSeconds: 3600, logger: pino({ level: 'silent' }),
      flushMs: 3600000, batch: 7,
    });
    recorder.start();
    const record = (i) => recorder.record({ at: ${T0} + i, type: 'token.issued', clientId: 'svc',
      audience: null, jti: 'jti-' + i, reason: null, source: null });
    const half = mode === 'flush-some-then-crash' ? Math.floor(Number(count) / 2) : 0;
    for (let i = 0; i < half; i++) record(i);
    if (half > 0) await recorder.flush();
    for (let i = half; i < Number(count); i++) record(i);
    recorder.persist();
    process.stdout.write('ready\\n');
    if (mode !== 'hold') process.kill(process.pid, 'SIGKILL');
    else setInterval(() => undefined, 1000); // lives until the test kills it
  `;
  const proc = spawn(
    process.execPath,
    [
      '--disable-warning=ExperimentalWarning',
      '--input-type=module',
      '-e',
      code,
      spoolDir,
      dbFile,
      mode,
      String(count),
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  proc.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const ready = new Promise<void>((resolve, reject) => {
    proc.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && resolve());
    proc.once('exit', (code, signal) =>
      signal === 'SIGKILL' ? resolve() : reject(new Error(`child exited ${code}: ${stderr}`)),
    );
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return { proc, ready, exited };
}

describe('AuditRecorder: a process that crashed', () => {
  it.each(['crash', 'flush-some-then-crash'] as const)(
    '%s: the next process adopts its spool and writes every event exactly once',
    async (mode) => {
      const dir = tempDir();
      const dbFile = path.join(dir, 'tessera.db');
      const spoolDir = path.join(dir, 'spool');
      const crashed = child(spoolDir, dbFile, mode, 40);
      await crashed.ready;
      await crashed.exited;
      const store = await sqlite(dbFile);
      const before = await jtis(store);
      expect(before).toHaveLength(mode === 'crash' ? 0 : 20);
      const log = capture();
      const r = recorder(store, spoolDir, { logger: log.logger });
      r.start();
      await r.flush();
      expect(await jtis(store)).toEqual(Array.from({ length: 40 }, (_, i) => `jti-${i}`));
      expect(
        log.lines.filter((l) => l.msg === 'audit spool files left by a stopped process adopted'),
      ).toMatchObject([{ segments: 1 }]);
      // The adopted segment and its owner's lock are gone; this process's own files are all that is left.
      const own = r.spoolSegments[0]!.split('.')[0]!;
      expect(spoolFiles(spoolDir).every((f) => f.startsWith(`${own}.`))).toBe(true);
      await r.flush();
      expect(await jtis(store)).toHaveLength(40);
    },
  );

  it('a process that lives keeps its spool; once it is killed, the next adoption round takes it', async () => {
    const dir = tempDir();
    const dbFile = path.join(dir, 'tessera.db');
    const spoolDir = path.join(dir, 'spool');
    const alive = child(spoolDir, dbFile, 'hold', 10);
    try {
      await alive.ready;
      const store = await sqlite(dbFile);
      let now = Date.now();
      const r = recorder(store, spoolDir, { clock: clockAt(() => now) });
      r.start();
      await r.flush();
      expect(await jtis(store)).toEqual([]);
      alive.proc.kill('SIGKILL');
      await alive.exited;
      await r.flush(); // within the minute: not looked for yet
      expect(await jtis(store)).toEqual([]);
      now += 60_000;
      await r.flush();
      expect(await jtis(store)).toEqual(Array.from({ length: 10 }, (_, i) => `jti-${i}`));
    } finally {
      alive.proc.kill('SIGKILL');
    }
  });
});

describe('AuditRecorder: throttled refusals', () => {
  const throttled = (at: number, source: string, clientId: string | null): AuditEntry => ({
    at,
    type: 'token.throttled',
    clientId,
    audience: 'https://api.example.com',
    jti: null,
    reason: 'invalid_request: too many failed attempts; try again later',
    source,
  });

  it('are summed per caller and minute into one event with the count, logged once each', async () => {
    const dir = tempDir();
    const store = await sqlite(path.join(dir, 'tessera.db'));
    const log = capture();
    const minute = T0 - (T0 % THROTTLE_WINDOW_MS);
    let now = minute + 1000;
    const r = recorder(store, path.join(dir, 'spool'), { logger: log.logger, clock: clockAt(() => now) });
    r.start();
    for (let i = 0; i < 500; i++) r.record(throttled(minute + 1000 + i, '203.0.113.9', `id-${i}`));
    for (let i = 0; i < 30; i++) r.record(throttled(minute + 2000 + i, '198.51.100.3', 'svc'));
    r.record(issued(1));
    await r.flush(); // the minute is not over: nothing of it yet
    expect((await store.queryAuditEvents({ limit: 100 })).map((e) => e.type)).toEqual(['token.issued']);
    now = minute + THROTTLE_WINDOW_MS + 5;
    await r.flush();
    const summaries = await store.queryAuditEvents({ limit: 100, types: ['token.throttled'] });
    expect(summaries.map(({ id: _id, ...e }) => e)).toEqual([
      {
        at: new Date(minute + 2000).toISOString(),
        type: 'token.throttled',
        clientId: 'svc',
        audience: null,
        jti: null,
        reason: 'invalid_request: too many failed attempts; try again later',
        source: '198.51.100.3',
        count: 30,
        actor: null,
        target: null,
        changes: null,
      },
      {
        at: new Date(minute + 1000).toISOString(),
        type: 'token.throttled',
        clientId: null, // several ids were sprayed
        audience: null,
        jti: null,
        reason: 'invalid_request: too many failed attempts; try again later',
        source: '203.0.113.9',
        count: 500,
        actor: null,
        target: null,
        changes: null,
      },
    ]);
    expect(log.messages().filter((m) => m === 'token requests throttled')).toHaveLength(2);
    expect(log.messages().filter((m) => m === 'token refused')).toEqual([]);
  });

  it('a refusal of the next minute closes the last one; closing the recorder records the current one', async () => {
    const dir = tempDir();
    const store = await sqlite(path.join(dir, 'tessera.db'));
    const minute = T0 - (T0 % THROTTLE_WINDOW_MS);
    const r = recorder(store, path.join(dir, 'spool'), { clock: clockAt(() => minute) });
    r.start();
    r.record(throttled(minute + 10, '203.0.113.9', 'a'));
    r.record(throttled(minute + THROTTLE_WINDOW_MS + 10, '203.0.113.9', 'a'));
    r.record(throttled(minute + THROTTLE_WINDOW_MS + 20, '203.0.113.9', 'a'));
    await r.close();
    recorders.splice(recorders.indexOf(r), 1);
    const counts = (await store.queryAuditEvents({ limit: 10 })).map((e) => [e.at, e.count]);
    expect(counts).toEqual([
      [new Date(minute + THROTTLE_WINDOW_MS + 10).toISOString(), 2],
      [new Date(minute + 10).toISOString(), 1],
    ]);
  });
});

describe("AuditRecorder: the admin API's refusals", () => {
  it('are summed per kind, address and minute, with their different reasons; in the store once the minute is over, never in the chart', async () => {
    const dir = tempDir();
    const store = await sqlite(path.join(dir, 'tessera.db'));
    const minute = T0 - (T0 % THROTTLE_WINDOW_MS);
    let now = minute + 1000;
    const r = recorder(store, path.join(dir, 'spool'), { clock: clockAt(() => now) });
    r.start();
    const refusal = (
      at: number,
      type: 'admin.auth_failed' | 'admin.forbidden',
      reason: string,
      clientId: string | null,
    ) => r.recordAdminRefusal({ at, type, clientId, reason, source: '203.0.113.7' });
    for (let i = 0; i < 4; i++)
      refusal(
        minute + 1000 + i,
        'admin.auth_failed',
        'GET /admin/v1/keys: the access token is not valid for this API',
        null,
      );
    refusal(
      minute + 2000,
      'admin.forbidden',
      'GET /admin/v1/keys: this call needs the scope keys:read',
      'ops',
    );
    refusal(
      minute + 2001,
      'admin.forbidden',
      'GET /admin/v1/keys: this call needs the scope keys:read',
      'ops',
    );
    refusal(
      minute + 2002,
      'admin.forbidden',
      'POST /admin/v1/operators: this call needs the scope operators:write',
      'ops',
    );
    await r.flush(); // the minute is not over: nothing of it yet
    expect(await store.queryAuditEvents({ limit: 100 })).toEqual([]);
    // Within a second of the minute's end (the recorder writes every second), well inside the contract's 10 s.
    now = minute + THROTTLE_WINDOW_MS + 1;
    await r.flush();
    const events = await store.queryAuditEvents({ limit: 100 });
    expect(events.map(({ id: _id, ...e }) => e)).toEqual([
      {
        at: new Date(minute + 2000).toISOString(),
        type: 'admin.forbidden',
        clientId: 'ops',
        audience: null,
        jti: null,
        reason:
          'GET /admin/v1/keys: this call needs the scope keys:read; POST /admin/v1/operators: this call needs the scope operators:write',
        source: '203.0.113.7',
        count: 3,
        actor: null,
        target: null,
        changes: null,
      },
      {
        at: new Date(minute + 1000).toISOString(),
        type: 'admin.auth_failed',
        clientId: null,
        audience: null,
        jti: null,
        reason: 'GET /admin/v1/keys: the access token is not valid for this API',
        source: '203.0.113.7',
        count: 4,
        actor: null,
        target: null,
        changes: null,
      },
    ]);
    // The overview's chart counts the token endpoint only.
    expect(await store.tokenCounts(minute, minute + THROTTLE_WINDOW_MS)).toEqual([]);
  });
});

describe('AuditRecorder: retention', () => {
  it('deletes events older than the retention in small statements, and keeps the rest', async () => {
    const dir = tempDir();
    const store = await sqlite(path.join(dir, 'tessera.db'));
    const now = Date.parse('2026-06-01T00:00:00Z');
    const old: AuditRecord[] = Array.from({ length: 12_000 }, (_, i) => ({
      ...issued(i),
      at: now - 2 * 86_400_000 + i,
      count: null,
    }));
    for (let i = 0; i < old.length; i += 500) await store.appendAuditEvents(old.slice(i, i + 500));
    await store.appendAuditEvents([{ ...issued(1), jti: 'recent', at: now - 1000, count: null }]);
    const limits: number[] = [];
    const counting: AuditStore = {
      ...switchable(store).audit,
      pruneAuditEvents: async (before, limit) => {
        limits.push(limit);
        expect(before).toEqual(new Date(now - 86_400_000));
        return store.pruneAuditEvents(before, limit);
      },
    };
    const log = capture();
    const r = recorder(counting, path.join(dir, 'spool'), {
      retentionSeconds: 86_400,
      clock: clockAt(() => now),
      logger: log.logger,
    });
    r.start();
    for (let i = 0; i < 2000 && !log.messages().includes('old audit events deleted'); i++) await sleep(10);
    expect(await jtis(store)).toEqual(['recent']);
    // The chart's counts go with the events they counted: only the recent event's minute is left.
    expect(await store.tokenCounts(0, now + 60_000)).toEqual([
      { minute: new Date(now - 60_000).toISOString(), issued: 1, refused: 0 },
    ]);
    expect(limits.length).toBeGreaterThan(2);
    expect(Math.max(...limits)).toBeLessThanOrEqual(5000);
    expect(log.lines.find((l) => l.msg === 'old audit events deleted')).toMatchObject({ pruned: 12_000 });
  });
});

describe('Spool: processes starting together on one spool folder', () => {
  it('each takes its own lock while the others adopt: none fails to start, none adopts a live owner', async () => {
    const spoolDir = path.join(tempDir(), 'spool');
    // Each process starts and stops spools in a loop, adopting as every start does; the lock file of one
    // being made must never be taken for a dead owner's.
    const code = `
      const { Spool } = await import('./dist/audit/spool.js');
      const [dir] = process.argv.slice(1);
      for (let i = 0; i < 150; i++) {
        const spool = new Spool({ dir, maxBytes: 1 << 24 });
        spool.adoptOrphans();
        spool.close();
      }
    `;
    const runs = Array.from({ length: 3 }, () => {
      const proc = spawn(
        process.execPath,
        ['--disable-warning=ExperimentalWarning', '--input-type=module', '-e', code, spoolDir],
        { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      proc.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      return new Promise<{ code: number | null; stderr: string }>((resolve) =>
        proc.once('exit', (exitCode) => resolve({ code: exitCode, stderr })),
      );
    });
    expect(await Promise.all(runs)).toEqual([0, 1, 2].map(() => ({ code: 0, stderr: '' })));
    expect(readdirSync(spoolDir)).toEqual([]);
  }, 60_000);

  it('leaves a lock file being made alone, and removes one a crashed start left over a minute ago', () => {
    const spoolDir = path.join(tempDir(), 'spool');
    mkdirSync(spoolDir);
    const making = path.join(spoolDir, 'mfz1a2b3-0a1b2c3d4e5f.lock.new');
    const left = path.join(spoolDir, 'mfz1a2b3-ffffffffffff.lock.new');
    writeFileSync(making, '');
    writeFileSync(left, '');
    const minuteAgo = new Date(Date.now() - 61_000);
    utimesSync(left, minuteAgo, minuteAgo);
    const spool = new Spool({ dir: spoolDir, maxBytes: 1 << 24 });
    expect(spool.adoptOrphans()).toBe(0);
    expect(existsSync(making)).toBe(true);
    expect(existsSync(left)).toBe(false);
    spool.close();
  });
});
