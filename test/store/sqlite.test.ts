import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync, StatementSync } from 'node:sqlite';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import {
  expectAudienceIdsAssigned,
  EVENTS_BEFORE_0004,
  expectCompactAuditConverted,
  ROWS_BEFORE_0006,
  storeContract,
} from './contract.js';
import { tokenExchangeContract } from './token-exchange-contract.js';
import { holdWriteLock } from '../helpers/sqlite-lock.js';
import { sleep, threadWatch } from '../helpers/wait.js';

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

  it("the server's store waits for another process's write lock without blocking its thread", async () => {
    const file = path.join(dir, 'tessera.db');
    const server = openSqliteStore(file, { backgroundCheckpoints: true });
    open.push(server);
    await server.migrate();
    // Another connection (an apply from the CLI, here on this same thread) holds the write lock for 600 ms.
    const { holder, heldAt: held } = holdWriteLock(file, 600);
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

  it("the server's store: the replay guard's insert waits for another process's lock on timers", async () => {
    const file = path.join(dir, 'tessera.db');
    const server = openSqliteStore(file, { backgroundCheckpoints: true });
    open.push(server);
    await server.migrate();
    // Another connection (an apply from the CLI) holds the write lock for 600 ms.
    const { holder, heldAt: held } = holdWriteLock(file, 600);
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

  it("the replay guard's ids of one turn are recorded by one statement: the same id twice in a turn is one use and one replay", async () => {
    const file = path.join(dir, 'tessera.db');
    const server = openSqliteStore(file, { backgroundCheckpoints: true });
    open.push(server);
    await server.migrate();
    const expires = Date.now() + 60_000;
    // The lock held by another process while the turn's ids come: all of them wait for it once, together.
    const { holder } = holdWriteLock(file, 300);
    const runs = vi.spyOn(StatementSync.prototype, 'run');
    const reads = vi.spyOn(StatementSync.prototype, 'all');
    try {
      const ids = Array.from({ length: 40 }, (_, i) => `turn-${i % 20}`);
      const answers = await Promise.all(ids.map((id) => server.useAssertionJti(id, expires)));
      expect(answers).toEqual([...Array<boolean>(20).fill(true), ...Array<boolean>(20).fill(false)]);
      // One statement done (however often SQLite refused it while the lock was held), in no transaction of its own.
      const done = (spy: typeof runs | typeof reads, test: (sql: string) => boolean) =>
        spy.mock.contexts.filter(
          (statement, i) =>
            spy.mock.results[i]?.type === 'return' && test((statement as StatementSync).sourceSQL),
        ).length;
      const inserts = (sql: string) => sql.startsWith('insert into assertion_jtis');
      expect([
        done(runs, (sql) => sql === 'begin immediate'),
        done(runs, (sql) => sql === 'commit'),
        done(reads, inserts) + done(runs, inserts),
      ]).toEqual([0, 0, 1]);
    } finally {
      runs.mockRestore();
      reads.mockRestore();
      holder.close();
    }
    const reader = new DatabaseSync(file);
    try {
      const rows = reader.prepare("select count(*) as n from assertion_jtis where id like 'turn-%'").get();
      expect(rows).toEqual({ n: 20 });
    } finally {
      reader.close();
    }
    // Each turn's ids in a transaction of its own: the next turn's see the first's.
    expect(
      await Promise.all([server.useAssertionJti('turn-3', expires), server.useAssertionJti('x', expires)]),
    ).toEqual([false, true]);
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
