import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MaintenanceThread, openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import {
  expectAudienceIdsAssigned,
  EVENTS_BEFORE_0004,
  expectCompactAuditConverted,
  ROWS_BEFORE_0006,
  storeContract,
} from './contract.js';
import { tokenExchangeContract } from './token-exchange-contract.js';
import { ROOT } from '../helpers/process.js';
import { sleep } from '../helpers/wait.js';

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'tessera-sqlite-'));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

let counter = 0;
storeContract('sqlite', async (now) => openSqliteStore(path.join(tempDir(), `store-${++counter}.db`), now));
// As `tessera serve` opens it: reads on a second connection, writes that wait for a lock on timers, and the
// maintenance thread that checkpoints, deletes for retention and writes the audit trail's batches.
storeContract('sqlite, as the server opens it', async (now) =>
  openSqliteStore(path.join(tempDir(), `store-${++counter}.db`), { now, backgroundCheckpoints: true }),
);
tokenExchangeContract('sqlite', async (now) =>
  openSqliteStore(path.join(tempDir(), `store-${++counter}.db`), now),
);

const mode = (file: string) => statSync(file).mode & 0o777;

/**
 * A timer every 5 ms on this thread: `worst()` is the longest it waited between two runs, so a thread stopped
 * inside a synchronous call (SQLite waiting for a lock) shows as a gap as long as the stop.
 */
function threadWatch(): { worst(): number; stop(): void } {
  let last = performance.now();
  let worst = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 5);
  return { worst: () => worst, stop: () => clearInterval(ticker) };
}

describe('migration 0004 (the compact audit trail)', () => {
  it('converts the events written before it: RFC 3339 text to milliseconds, outcome to type, ids kept', async () => {
    const file = path.join(tempDir(), 'tessera.db');
    const store = openSqliteStore(file);
    try {
      expect(await store.migrate('0003_client_quotas')).toEqual([
        '0001_initial',
        '0002_audit_events',
        '0003_client_quotas',
      ]);
      const db = new DatabaseSync(file);
      const { columns, rows } = EVENTS_BEFORE_0004;
      const insert = db.prepare(
        `insert into audit_events (${columns.join(', ')}) values (${columns.map(() => '?').join(', ')})`,
      );
      for (const row of rows) insert.run(...row);
      db.close();
      await expectCompactAuditConverted(store);
    } finally {
      await store.close();
    }
  });
});

describe('migration 0006 (audience ids and scopes)', () => {
  it('gives each audience registered before it an id of its own and no scopes', async () => {
    const file = path.join(tempDir(), 'tessera.db');
    const store = openSqliteStore(file);
    try {
      expect(await store.migrate('0005_change_audit')).toEqual([
        '0001_initial',
        '0002_audit_events',
        '0003_client_quotas',
        '0004_compact_audit',
        '0005_change_audit',
      ]);
      const db = new DatabaseSync(file);
      for (const [table, rows] of Object.entries(ROWS_BEFORE_0006)) {
        for (const row of rows) {
          const columns = Object.keys(row);
          db.prepare(
            `insert into ${table} (${columns.join(', ')}) values (${columns.map(() => '?').join(', ')})`,
          ).run(...Object.values(row));
        }
      }
      db.close();
      await expectAudienceIdsAssigned(store);
    } finally {
      await store.close();
    }
  });
});

describe('openSqliteStore', () => {
  let dir: string;
  const open: Store[] = [];

  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(async () => {
    for (const store of open.splice(0)) await store.close();
  });

  it('reports its engine', async () => {
    const store = openSqliteStore(path.join(dir, 'tessera.db'));
    open.push(store);
    expect(store.engine).toBe('sqlite');
  });

  it('creates the data directory (and its parents) with mode 0700 and the database file with mode 0600', async () => {
    const dataDir = path.join(dir, 'nested', 'data');
    const file = path.join(dataDir, 'tessera.db');
    const store = openSqliteStore(file);
    open.push(store);
    expect(mode(dataDir)).toBe(0o700);
    expect(mode(path.join(dir, 'nested'))).toBe(0o700);
    expect(mode(file)).toBe(0o600);
    await store.migrate();
    await store.addAudience({ url: 'https://api.example.com', name: null, tokenTtl: null, signingAlg: null });
    expect(mode(file)).toBe(0o600);
  });

  it('gives the write-ahead log and shared-memory files the same mode 0600', async () => {
    const file = path.join(dir, 'tessera.db');
    const store = openSqliteStore(file);
    open.push(store);
    await store.migrate();
    await store.addAudience({ url: 'https://api.example.com', name: null, tokenTtl: null, signingAlg: null });
    for (const suffix of ['-wal', '-shm']) {
      expect(existsSync(file + suffix)).toBe(true);
      expect(mode(file + suffix)).toBe(0o600);
    }
  });

  it('with background checkpoints, writes never copy the log into the file themselves; a thread of its own does', async () => {
    const file = path.join(dir, 'tessera.db');
    const records = (from: number) =>
      Array.from({ length: 500 }, (_, i) => ({
        at: Date.now() + from + i,
        type: 'token.issued' as const,
        clientId: 'c'.repeat(32),
        audience: 'https://api.example.com',
        jti: `${from + i}`.padStart(22, '0'),
        reason: null,
        source: '10.0.0.1',
        count: null,
        actor: null,
        target: null,
        changes: null,
      }));
    for (const background of [false, true]) {
      rmSync(file, { force: true });
      rmSync(file + '-wal', { force: true });
      rmSync(file + '-shm', { force: true });
      // The checkpointer's first round comes after 2 s here, long after the writes (a few hundred ms).
      const store = openSqliteStore(file, { backgroundCheckpoints: background, checkpointEveryMs: 2000 });
      open.push(store);
      await store.migrate();
      const before = statSync(file).size;
      // 40 000 events: well past the 1000 log pages at which a write would checkpoint on its own.
      for (let i = 0; i < 80; i++) await store.appendAuditEvents(records(i * 500));
      const right = statSync(file).size;
      if (!background) {
        expect(right).toBeGreaterThan(before + 2_000_000); // copied inside the writes
        continue;
      }
      expect(right).toBe(before); // nothing copied inside the writes...
      const started = Date.now();
      while (statSync(file).size < before + 2_000_000 && Date.now() - started < 8000) await sleep(50);
      expect(statSync(file).size).toBeGreaterThan(before + 2_000_000); // ...the checkpointer did it
      expect((await store.queryAuditEvents({ limit: 100_000 })).length).toBe(40_000);
    }
  });

  it("the server's store waits for another process's write lock without blocking its thread", async () => {
    const file = path.join(dir, 'tessera.db');
    const server = openSqliteStore(file, { backgroundCheckpoints: true });
    open.push(server);
    await server.migrate();
    // Another connection (an apply from the CLI, here on this same thread) holds the write lock for 600 ms.
    const holder = new DatabaseSync(file);
    holder.exec('BEGIN IMMEDIATE');
    const held = performance.now();
    setTimeout(() => holder.exec('COMMIT'), 600);
    // Meanwhile the thread keeps running: a timer every 5 ms never waits long.
    const watch = threadWatch();
    try {
      const written = await server.addAudience({
        url: 'https://api.example.com',
        name: null,
        tokenTtl: null,
        signingAlg: null,
      });
      const waited = performance.now() - held;
      expect(written.url).toBe('https://api.example.com');
      expect(waited).toBeGreaterThanOrEqual(590); // it did wait for the lock...
      expect(watch.worst()).toBeLessThan(200); // ...without stopping the thread (it was 5 s stopped, then failed)
    } finally {
      watch.stop();
      holder.close();
    }
  });

  it("the server's store: a statement outside a transaction (the replay guard's insert) waits for another process's lock on timers", async () => {
    const file = path.join(dir, 'tessera.db');
    const server = openSqliteStore(file, { backgroundCheckpoints: true });
    open.push(server);
    await server.migrate();
    // Another connection (an apply from the CLI) holds the write lock for 600 ms.
    const holder = new DatabaseSync(file);
    holder.exec('BEGIN IMMEDIATE');
    const held = performance.now();
    setTimeout(() => holder.exec('COMMIT'), 600);
    const watch = threadWatch();
    try {
      const expires = Date.now() + 60_000;
      const first = await server.useAssertionJti('jti-1', expires);
      expect(first).toBe(true);
      expect(performance.now() - held).toBeGreaterThanOrEqual(590); // it did wait for the lock...
      expect(watch.worst()).toBeLessThan(200); // ...without stopping the thread (it was stopped for the 600 ms)
      expect(await server.useAssertionJti('jti-1', expires)).toBe(false); // and it was recorded once
    } finally {
      watch.stop();
      holder.close();
    }
  });

  it("the server's store reads clients, the change feed and what operators read at once while its own write waits for another process's lock", async () => {
    const file = path.join(dir, 'tessera.db');
    const server = openSqliteStore(file, { backgroundCheckpoints: true });
    open.push(server);
    await server.migrate();
    await server.addAudience({
      url: 'https://api.example.com',
      name: null,
      tokenTtl: null,
      signingAlg: null,
    });
    const seq = await server.latestChange();
    // Another process (an apply from the CLI) holds the write lock for 1.5 s, with a client it has not committed.
    const holder = new DatabaseSync(file);
    holder.exec('BEGIN IMMEDIATE');
    holder.exec(
      "insert into changes (entity, key, created_at) values ('client', 'uncommitted', '2026-01-01T00:00:00.000Z')",
    );
    const held = performance.now();
    setTimeout(() => holder.exec('ROLLBACK'), 1500);
    try {
      // The server's audit writer (here: an audience update) waits for the lock, on timers...
      const writing = server.addAudience({
        url: 'https://other.example.com',
        name: null,
        tokenTtl: null,
        signingAlg: null,
      });
      // ...and the reads a token request and the directory make are answered meanwhile, from what is committed;
      // on the one connection they were queued behind the write, and a lookup gave up (503) after 2 s.
      expect(await server.findClients(['nobody'])).toEqual([]);
      expect(await server.changesSince(seq, 10)).toEqual([]);
      expect(await server.latestChange()).toBe(seq);
      expect((await server.listAudiences()).map((a) => a.url)).toEqual(['https://api.example.com']);
      // So are the admin API's and the console's: operators can read while an apply runs.
      expect(await server.findClient('uncommitted')).toBeUndefined();
      expect(await server.listClientsPage(null, 50)).toEqual([]);
      expect((await server.findAudience('https://api.example.com'))?.url).toBe('https://api.example.com');
      expect(await server.findAudience('https://other.example.com')).toBeUndefined();
      expect(await server.queryAuditEvents({ limit: 10 })).toEqual([]);
      expect(await server.listOperators()).toEqual([]);
      expect(await server.findOperatorSession('nope')).toBeUndefined();
      expect(performance.now() - held).toBeLessThan(500);
      await writing;
      expect(performance.now() - held).toBeGreaterThanOrEqual(1490);
      // Once written, the write is read at once on the reading side too.
      expect((await server.listAudiences()).map((a) => a.url).sort()).toEqual([
        'https://api.example.com',
        'https://other.example.com',
      ]);
      expect((await server.changesSince(seq, 10)).map((c) => [c.entity, c.key])).toEqual([
        ['audience', 'https://other.example.com'],
      ]);
    } finally {
      holder.close();
    }
  });

  it("the server's store gives up on a lock held past the wait (5 s) with SQLITE_BUSY, its thread free all along", async () => {
    const file = path.join(dir, 'tessera.db');
    const server = openSqliteStore(file, { backgroundCheckpoints: true });
    open.push(server);
    await server.migrate();
    const holder = new DatabaseSync(file);
    holder.exec('BEGIN IMMEDIATE');
    const watch = threadWatch();
    const started = performance.now();
    try {
      await expect(server.useAssertionJti('jti-2', Date.now() + 60_000)).rejects.toMatchObject({
        errcode: 5,
      });
      expect(performance.now() - started).toBeGreaterThanOrEqual(4990);
      await sleep(20); // the ticker's turn: a thread stopped until now would show its gap here
      expect(watch.worst()).toBeLessThan(200);
    } finally {
      watch.stop();
      holder.exec('ROLLBACK');
      holder.close();
    }
  }, 15_000);

  it("the server's store deletes old audit events on its maintenance thread: a lock it waits for never stops this one", async () => {
    const file = path.join(dir, 'tessera.db');
    const server = openSqliteStore(file, { backgroundCheckpoints: true });
    open.push(server);
    await server.migrate();
    const event = (at: number, jti: string) => ({
      at,
      type: 'token.issued' as const,
      clientId: 'svc',
      audience: 'https://api.example.com',
      jti,
      reason: null,
      source: '127.0.0.1',
      count: null,
    });
    const old = Date.parse('2026-01-01T00:00:00Z');
    const recent = Date.parse('2026-06-01T00:00:00Z');
    await server.appendAuditEvents([
      ...Array.from({ length: 5 }, (_, i) => event(old + i, `old-${i}`)),
      event(recent, 'recent'),
    ]);
    // Another connection holds the write lock for 600 ms: the deletes wait for it inside SQLite, as a statement
    // outside a transaction does, which on this thread would stop it for those 600 ms.
    const holder = new DatabaseSync(file);
    holder.exec('BEGIN IMMEDIATE');
    const held = performance.now();
    setTimeout(() => holder.exec('COMMIT'), 600);
    const watch = threadWatch();
    try {
      const before = new Date(Date.parse('2026-03-01T00:00:00Z'));
      expect(await server.pruneAuditEvents(before, 3)).toBe(3);
      expect(performance.now() - held).toBeGreaterThanOrEqual(590); // it did wait for the lock...
      expect(watch.worst()).toBeLessThan(200); // ...on another thread: this one kept running
      expect(await server.pruneAuditEvents(before, 3)).toBe(2);
      expect(await server.pruneAuditEvents(before, 3)).toBe(0);
      const left = await server.queryAuditEvents({ limit: 10 });
      expect(left.map((e) => e.jti)).toEqual(['recent']);
      expect(await server.pruneTokenCounts(before)).toBeGreaterThanOrEqual(1); // the old events' minute
      expect(await server.tokenCounts(0, Date.parse('2027-01-01T00:00:00Z'))).toEqual([
        { minute: '2026-06-01T00:00:00.000Z', issued: 1, refused: 0 },
      ]);
    } finally {
      watch.stop();
      holder.close();
    }
    // Closed, the store refuses further deletes instead of leaving them waiting.
    await server.close();
    open.splice(open.indexOf(server), 1);
    await expect(server.pruneAuditEvents(new Date(), 10)).rejects.toThrow('the store is closed');
  });

  it("the server's store holds the parts of an audit batch in one transaction on its maintenance thread, and commits them with the last; a plain store commits each", async () => {
    const event = (i: number) => ({
      at: Date.parse('2026-06-01T00:00:00Z') + i,
      type: 'token.issued' as const,
      clientId: `client-${i}`,
      audience: 'https://api.example.com',
      jti: `jti-${i}`,
      reason: null,
      source: '127.0.0.1',
      count: null,
    });
    const at = (offset: number) => ({ segment: 's.00000001.spool', offset });
    const file = path.join(dir, 'tessera.db');
    const server = openSqliteStore(file, { backgroundCheckpoints: true });
    open.push(server);
    await server.migrate();
    // Another connection sees nothing of the held parts, and the write lock is taken until the last.
    const other = new DatabaseSync(file);
    const count = () => Number(other.prepare('select count(*) as n from audit_events').get()!.n);
    try {
      expect(await server.appendAuditEvents([event(1), event(2)], at(10), { first: true, last: false })).toBe(
        false,
      );
      expect(await server.appendAuditEvents([event(3)], at(20), { first: false, last: false })).toBe(false);
      expect(count()).toBe(0);
      other.exec('PRAGMA busy_timeout = 0');
      expect(() => other.exec('BEGIN IMMEDIATE')).toThrow('database is locked');
      expect(await server.appendAuditEvents([event(4)], at(30), { first: false, last: true })).toBe(true);
      expect(count()).toBe(4);
      expect(await server.spoolPosition('s.00000001.spool')).toBe(30);
      other.exec('BEGIN IMMEDIATE');
      other.exec('ROLLBACK');
      // A part whose batch never continues (the server's thread stopped between two parts) is rolled back after
      // 2 s: the lock is free again, and what would have continued it is refused.
      expect(await server.appendAuditEvents([event(5)], at(40), { first: true, last: false })).toBe(false);
      const heldAt = performance.now();
      expect(() => other.exec('BEGIN IMMEDIATE')).toThrow('database is locked');
      let freeAfter = -1;
      while (freeAfter < 0 && performance.now() - heldAt < 8000) {
        await sleep(50);
        try {
          other.exec('BEGIN IMMEDIATE');
          other.exec('ROLLBACK');
          freeAfter = performance.now() - heldAt;
        } catch {
          // still held
        }
      }
      expect(freeAfter).toBeGreaterThanOrEqual(1950);
      await expect(
        server.appendAuditEvents([event(6)], at(50), { first: false, last: true }),
      ).rejects.toThrow("the audit batch's transaction was rolled back");
      expect(count()).toBe(4);
      expect(await server.spoolPosition('s.00000001.spool')).toBe(30);
    } finally {
      other.close();
    }
    // One of the server's own writes (a replay guard's insert) waits for the lock a held batch has: the batch is
    // committed at its next part (true before the last), the write goes before the next part takes the lock
    // again, and the parts after it continue the batch in a new transaction.
    expect(await server.appendAuditEvents([event(7)], at(60), { first: true, last: false })).toBe(false);
    const waited = performance.now();
    const jti = server.useAssertionJti('jti-of-an-assertion', Date.now() + 60_000);
    await sleep(50); // refused the lock at least once: it counts as waiting
    expect(await server.appendAuditEvents([event(8)], at(70), { first: false, last: false })).toBe(true);
    expect(await jti).toBe(true);
    expect(performance.now() - waited).toBeLessThan(1000);
    expect(await server.appendAuditEvents([event(9)], at(80), { first: false, last: false })).toBe(false);
    expect(await server.appendAuditEvents([event(10)], at(90), { first: false, last: true })).toBe(true);
    expect((await server.queryAuditEvents({ limit: 10 })).map((e) => e.jti)).toEqual([
      'jti-10',
      'jti-9',
      'jti-8',
      'jti-7',
      'jti-4',
      'jti-3',
      'jti-2',
      'jti-1',
    ]);
    expect(await server.spoolPosition('s.00000001.spool')).toBe(90);
    const plain = openSqliteStore(path.join(dir, 'plain.db'));
    open.push(plain);
    await plain.migrate();
    expect(await plain.appendAuditEvents([event(1)], at(10), { first: true, last: false })).toBe(true);
    expect((await plain.queryAuditEvents({ limit: 10 })).map((e) => e.jti)).toEqual(['jti-1']);
  });

  it('starts its maintenance thread again when it ends: what was in flight is refused, the next asks are answered', async () => {
    const file = path.join(dir, 'tessera.db');
    const made = openSqliteStore(file);
    await made.migrate();
    await made.close();
    const restarts: { reason: string; pauseMs: number }[] = [];
    const thread = new MaintenanceThread(file, 60_000, (reason, pauseMs) =>
      restarts.push({ reason: reason.message, pauseMs }),
    );
    const answered = async () => {
      for (let i = 0; i < 200; i++) {
        try {
          return await thread.run('pruneTokenCounts', [Date.now()]);
        } catch (error) {
          if (!/maintenance thread ended/.test((error as Error).message)) throw error;
          await sleep(25);
        }
      }
      throw new Error('the thread was not started again');
    };
    try {
      expect(await thread.run('pruneTokenCounts', [Date.now()])).toBe(0);
      expect(thread.starts).toBe(1);
      // Ended while a delete is in flight (as a crash would end it): the delete is refused with the reason.
      const inFlight = thread.run('pruneTokenCounts', [Date.now()]);
      const settled = inFlight.then(
        () => 'answered',
        (error: Error) => error.message,
      );
      await thread.terminate();
      const outcome = await settled;
      // It may have answered before it ended; if not, it was refused, never left waiting.
      expect(['answered', "the store's maintenance thread ended (exit code 1)"]).toContain(outcome);
      // Asked during the pause: refused with the same reason, at once.
      await expect(thread.run('pruneTokenCounts', [Date.now()])).rejects.toThrow(
        "the store's maintenance thread ended (exit code 1)",
      );
      // A thread that ended within 10 s of its start is started again after 250 ms, then 500 ms, ...
      expect(await answered()).toBe(0);
      expect(thread.starts).toBe(2);
      await thread.terminate();
      expect(await answered()).toBe(0);
      expect(thread.starts).toBe(3);
      expect(restarts).toEqual([
        { reason: "the store's maintenance thread ended (exit code 1)", pauseMs: 250 },
        { reason: "the store's maintenance thread ended (exit code 1)", pauseMs: 500 },
      ]);
      // The new thread checkpoints and writes as the first did: a batch of the audit trail goes through it.
      const writes = [
        {
          sql: 'insert into token_counts (minute, issued, refused) values (?, ?, ?)',
          parameters: [60_000, 1, 0],
        },
      ];
      expect(await thread.run('appendAudit', [writes, true, true])).toBe(1);
      expect(await thread.run('pruneTokenCounts', [120_000])).toBe(1);
      // A batch held open (its first part written, not committed) ends with its thread: the part that would
      // have continued it is refused by the next thread, and nothing of the batch is in the store.
      expect(await thread.run('appendAudit', [writes, true, false])).toBe(0);
      await thread.terminate();
      expect(await answered()).toBe(0);
      expect(thread.starts).toBe(4);
      await expect(thread.run('appendAudit', [writes, false, true])).rejects.toThrow(
        "the audit batch's transaction was rolled back",
      );
      expect(await thread.run('pruneTokenCounts', [120_000])).toBe(0);
    } finally {
      thread.stop();
    }
    // Stopped, it is not started again, and refuses.
    await sleep(300);
    expect(thread.starts).toBe(4);
    expect(restarts).toHaveLength(3);
    await expect(thread.run('pruneTokenCounts', [0])).rejects.toThrow('the store is closed');
  });

  it("a process that opened the server's store ends by itself: closed after side reads only, or never closed", async () => {
    const file = path.join(dir, 'tessera.db');
    const made = openSqliteStore(file);
    await made.migrate();
    await made.close();
    const module = pathToFileURL(path.join(ROOT, 'dist/store/sqlite.js')).href;
    const run = (body: string) =>
      new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) => {
        const child = execFile(
          process.execPath,
          [
            '--disable-warning=ExperimentalWarning',
            '--input-type=module',
            '-e',
            `import { openSqliteStore } from ${JSON.stringify(module)};\n` +
              `const store = openSqliteStore(${JSON.stringify(file)}, { backgroundCheckpoints: true });\n` +
              body,
          ],
          { timeout: 10_000, killSignal: 'SIGKILL' },
          (_error, _stdout, stderr) => resolve({ code: child.exitCode, signal: child.signalCode, stderr }),
        );
      });
    // Every read of this store went to its side connection, so Kysely never opened the main one: its close
    // closed nothing and left the maintenance thread running, and the process up.
    expect(
      await run(
        `await store.listAudiences();\nawait new Promise((r) => setTimeout(r, 300));\nawait store.close();`,
      ),
    ).toEqual({ code: 0, signal: null, stderr: '' });
    // Never closed: the maintenance thread alone does not keep a process up (it did, once started, because
    // its message listener was added after unref(): nodejs/node#53036).
    expect(
      await run(
        `await store.migrate();\nawait store.pruneTokenCounts(new Date(0));\nawait new Promise((r) => setTimeout(r, 300));`,
      ),
    ).toEqual({ code: 0, signal: null, stderr: '' });
  }, 30_000);

  it('tightens the mode of an existing database file to 0600', async () => {
    const file = path.join(dir, 'tessera.db');
    const first = openSqliteStore(file);
    await first.migrate();
    await first.close();
    chmodSync(file, 0o644);
    const second = openSqliteStore(file);
    open.push(second);
    expect(mode(file)).toBe(0o600);
    expect(await second.migrate()).toEqual([]);
  });

  it('keeps the data across close and reopen', async () => {
    const file = path.join(dir, 'tessera.db');
    const first = openSqliteStore(file);
    await first.migrate();
    await first.addAudience({
      url: 'https://api.example.com',
      name: 'API',
      tokenTtl: null,
      signingAlg: null,
    });
    await first.close();
    const second = openSqliteStore(file);
    open.push(second);
    expect(await second.migrate()).toEqual([]);
    expect((await second.findAudience('https://api.example.com'))?.name).toBe('API');
  });

  it('lets two stores on the same file see each other’s writes, and follow them through the change feed', async () => {
    const file = path.join(dir, 'tessera.db');
    const server = openSqliteStore(file);
    const cli = openSqliteStore(file);
    open.push(server, cli);
    await server.migrate();
    expect(await cli.migrate()).toEqual([]);

    const start = await server.latestChange();
    await cli.addAudience({ url: 'https://api.example.com', name: null, tokenTtl: null, signingAlg: null });
    await cli.createClient({
      id: 'svc',
      name: 'svc',
      secretDigest: 'sha256:' + Buffer.alloc(32, 7).toString('base64url'),
      tokenTtl: null,
      audiences: ['https://api.example.com'],
    });
    const seen = await server.changesSince(start, 100);
    expect(seen.map((c) => [c.entity, c.key])).toEqual([
      ['audience', 'https://api.example.com'],
      ['client', 'svc'],
    ]);
    expect((await server.findClient('svc'))?.audiences).toEqual(['https://api.example.com']);

    await server.updateClient('svc', { enabled: false });
    const back = await cli.changesSince(seen[1]!.seq, 100);
    expect(back.map((c) => [c.entity, c.key])).toEqual([['client', 'svc']]);
    expect((await cli.findClient('svc'))?.enabled).toBe(false);
    expect(await cli.latestChange()).toBe(await server.latestChange());
  });

  it('uses the real clock when none is injected', async () => {
    const store = openSqliteStore(path.join(dir, 'tessera.db'));
    open.push(store);
    await store.migrate();
    const before = Date.now();
    const audience = await store.addAudience({
      url: 'https://api.example.com',
      name: null,
      tokenTtl: null,
      signingAlg: null,
    });
    const after = Date.now();
    const at = Date.parse(audience.createdAt);
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(after);
    expect(audience.createdAt).toBe(new Date(at).toISOString());
  });
});
