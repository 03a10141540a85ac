/**
 * The SQLite store's maintenance thread (store/sqlite-maintenance.ts), as the server opens the store: checkpoints,
 * retention's deletes and the audit trail's batches on a thread of its own, which is started again if it ends and
 * never keeps a process up.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { MaintenanceThread } from '../../src/store/sqlite-maintenance.js';
import type { Store } from '../../src/store/types.js';
import { ROOT } from '../helpers/process.js';
import { holdWriteLock } from '../helpers/sqlite-lock.js';
import { sleep, threadWatch } from '../helpers/wait.js';

describe("the SQLite store's maintenance thread", () => {
  let dir: string;
  const open: Store[] = [];

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'tessera-sqlite-maintenance-'));
  });
  afterEach(async () => {
    for (const store of open.splice(0)) await store.close();
    rmSync(dir, { recursive: true, force: true });
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
    const { holder, heldAt: held } = holdWriteLock(file, 600);
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
});
