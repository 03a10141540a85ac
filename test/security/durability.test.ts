/**
 * Nothing the audit trail promises is lost when the process dies: `tessera serve` under keep-alive load is
 * killed with SIGKILL, started again, and the store must then hold a `token.issued` event for every token the
 * load generator was answered (each 200's jti), each exactly once; on SQLite and on PostgreSQL, and for a
 * worker of `--workers 2` that dies while its siblings go on. And while the store is down, events wait on
 * disk and reach it when it is back.
 *
 * The CLI and `tessera serve` load dist/ (`npm run build` first; `npm test` does it).
 */
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../src/store/postgres.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { keepAliveLoad } from '../helpers/load.js';
import { provisionClient } from '../helpers/provision.js';
import { tokenRequest } from '../helpers/raw-http.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { childrenOf } from '../helpers/proc.js';
import { spawnServe, startServe, tesseraEnv, type Serve } from '../helpers/process.js';
import { freePort, tempDir } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const AUDIENCE = 'https://api.example.com';

let db: TestDatabase;
const running: Serve[] = [];
beforeAll(async () => {
  db = await createTestDatabase();
});
afterEach(async () => {
  for (const serve of running.splice(0)) {
    for (const pid of childrenOf(serve.pid)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    await serve.stop('SIGKILL');
  }
});
afterAll(async () => {
  await db.drop();
});

/** An audience and a client, written straight to the store; the token request's form. */
const provision = async (store: Store): Promise<string> => (await provisionClient(store, AUDIENCE)).form;

/** Every issued token's jti in the store, with how many times each is there. */
async function storedJtis(store: Store): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  let after: { at: string; id: number } | undefined;
  for (;;) {
    const page = await store.queryAuditEvents({ types: ['token.issued'], limit: 5000, after });
    for (const e of page) counts.set(e.jti!, (counts.get(e.jti!) ?? 0) + 1);
    if (page.length < 5000) return counts;
    after = { at: page.at(-1)!.at, id: page.at(-1)!.id };
  }
}

/** Waits until the store holds every one of `jtis` (the restarted server writes its spool within seconds). */
async function expectAllStored(store: Store, jtis: string[]): Promise<Map<string, number>> {
  let stored = new Map<string, number>();
  try {
    await waitFor(
      async () => {
        stored = await storedJtis(store);
        return jtis.every((jti) => stored.has(jti));
      },
      20_000,
      250,
    );
  } catch {
    // reported below, with the numbers
  }
  const missing = jtis.filter((jti) => !stored.has(jti));
  expect({ answered: jtis.length, missing: missing.length }).toEqual({ answered: jtis.length, missing: 0 });
  const twice = [...stored].filter(([, n]) => n > 1);
  expect(twice).toEqual([]);
  return stored;
}

/**
 * Load, then the audit table is hidden (renamed) so that the writer falls behind and the last part of the
 * trail is on the spool only, more load, then SIGKILL; the table is put back before the restart. Without
 * hiding it, the writer keeps up so closely that a kill may catch nothing on the spool only.
 */
async function killUnderLoad(env: NodeJS.ProcessEnv, form: string, sql: (query: string) => Promise<void>) {
  const port = Number(env.TESSERA_PORT);
  const serve = await startServe(env);
  running.push(serve);
  const load = keepAliveLoad(port, tokenRequest(port, form), 50);
  await waitFor(() => load.answered() >= 2000, 30_000, 20);
  await sql('alter table audit_events rename to audit_events_hidden');
  const hiddenAt = load.answered();
  await waitFor(() => load.answered() >= hiddenAt + 2000, 30_000, 20);
  serve.child.kill('SIGKILL');
  const result = await load.stop();
  await serve.exited;
  await sql('alter table audit_events_hidden rename to audit_events');
  return result;
}

describe(
  'kill -9 under load: every answered token has its event in the store after a restart',
  { timeout: 90_000 },
  () => {
    it('on SQLite', async () => {
      const dataDir = tempDir();
      const env = tesseraEnv({
        TESSERA_DATA_DIR: dataDir,
        TESSERA_PORT: String(await freePort()),
        TESSERA_HOST: '127.0.0.1',
        TESSERA_LOG_LEVEL: 'info',
      });
      const store = openSqliteStore(path.join(dataDir, 'tessera.db'));
      try {
        const form = await provision(store);
        const file = new DatabaseSync(path.join(dataDir, 'tessera.db'));
        file.exec('PRAGMA busy_timeout = 5000');
        const result = await killUnderLoad(env, form, async (query) => void file.exec(query));
        file.close();
        expect(result.statuses.get(200)).toBeGreaterThan(4000);
        expect([...result.statuses.keys()]).toEqual([200]);
        const before = await storedJtis(store);
        // The kill caught the end of the trail on the spool only: that is what this test is about.
        expect(result.jtis.length - before.size).toBeGreaterThan(1000);

        const again = await startServe(env);
        running.push(again);
        await again.waitForLog('audit spool files left by a stopped process adopted', 1, 10_000);
        const stored = await expectAllStored(store, result.jtis);
        // Tokens answered but never received (the kill came between the two) may be there too; no others.
        expect(stored.size).toBeGreaterThanOrEqual(result.jtis.length);
        expect(stored.size - result.jtis.length).toBeLessThanOrEqual(100);
        // The spool of the killed process is gone once written; only the new process's own files are left.
        await waitFor(() => readdirSync(path.join(dataDir, 'audit-spool')).length === 2, 5000);
        console.log(
          `SQLite kill -9: ${result.jtis.length} answered 200, ${before.size} in the store at the kill, ${stored.size} after the restart`,
        );
      } finally {
        await store.close();
      }
    });

    it('on PostgreSQL', async () => {
      const url = await db.freshSchema();
      const dataDir = tempDir();
      const env = tesseraEnv({
        TESSERA_DATA_DIR: dataDir,
        TESSERA_DATABASE_URL: url,
        TESSERA_PORT: String(await freePort()),
        TESSERA_HOST: '127.0.0.1',
        TESSERA_LOG_LEVEL: 'warn',
      });
      const store = openPostgresStore(url, { max: 2 });
      try {
        const form = await provision(store);
        const admin = new pg.Client({ connectionString: url });
        await admin.connect();
        const result = await killUnderLoad(env, form, async (query) => void (await admin.query(query)));
        await admin.end();
        expect(result.statuses.get(200)).toBeGreaterThan(4000);
        expect([...result.statuses.keys()]).toEqual([200]);
        const before = await storedJtis(store);
        expect(result.jtis.length - before.size).toBeGreaterThan(1000);
        const again = await startServe(env);
        running.push(again);
        const stored = await expectAllStored(store, result.jtis);
        console.log(
          `PostgreSQL kill -9: ${result.jtis.length} answered 200, ${before.size} in the store at the kill, ${stored.size} after the restart`,
        );
      } finally {
        await store.close();
      }
    });

    it('a worker of --workers 2 killed under load: its replacement writes what it left', async () => {
      const dataDir = tempDir();
      const env = tesseraEnv({
        TESSERA_DATA_DIR: dataDir,
        TESSERA_PORT: String(await freePort()),
        TESSERA_HOST: '127.0.0.1',
        TESSERA_LOG_LEVEL: 'info',
      });
      const store = openSqliteStore(path.join(dataDir, 'tessera.db'));
      try {
        const form = await provision(store);
        const serve = spawnServe(env, '--workers', '2');
        running.push(serve);
        await serve.waitForLog('tessera is listening', 2, 20_000);
        const port = Number(env.TESSERA_PORT);
        const load = keepAliveLoad(port, tokenRequest(port, form), 50, { reopen: true });
        await waitFor(() => load.answered() >= 3000, 30_000, 20);
        const [victim] = childrenOf(serve.pid);
        process.kill(victim!, 'SIGKILL');
        // The other worker goes on serving; the primary replaces the dead one, which adopts its spool.
        await serve.waitForLog('audit spool files left by a stopped process adopted', 1, 15_000);
        // The load goes on being answered after the adoption.
        const adoptedAt = load.answered();
        await waitFor(() => load.answered() >= adoptedAt + 500, 10_000, 20);
        const result = await load.stop();
        expect(result.statuses.get(200)).toBeGreaterThan(3000);
        await expectAllStored(store, result.jtis);
      } finally {
        await store.close();
      }
    });
  },
);

describe('a store that is down: events wait on disk', { timeout: 90_000 }, () => {
  it('PostgreSQL unreachable for a while: tokens keep coming from the cache, their events reach the store after', async () => {
    // A schema that is dropped and made again stands for an outage of the audit table only (the machine's
    // PostgreSQL is shared, so it is not stopped here; test/security/faults.test.ts stops a private one).
    const url = await db.freshSchema();
    const dataDir = tempDir();
    const env = tesseraEnv({
      TESSERA_DATA_DIR: dataDir,
      TESSERA_DATABASE_URL: url,
      TESSERA_PORT: String(await freePort()),
      TESSERA_HOST: '127.0.0.1',
      TESSERA_LOG_LEVEL: 'info',
    });
    const store = openPostgresStore(url, { max: 2 });
    try {
      const form = await provision(store);
      const serve = await startServe(env);
      running.push(serve);
      const port = Number(env.TESSERA_PORT);
      const request = tokenRequest(port, form);
      const first = keepAliveLoad(port, request, 5);
      await waitFor(() => first.answered() >= 200, 10_000, 20);
      const warm = await first.stop();
      // The audit table goes away: every write of the trail fails.
      const hidden = `audit_hidden_${randomBytes(3).toString('hex')}`;
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query(`alter table audit_events rename to ${hidden}`);
      const during = keepAliveLoad(port, request, 5);
      await waitFor(() => during.answered() >= 2000, 20_000, 20);
      const outage = await during.stop();
      expect([...outage.statuses.keys()]).toEqual([200]);
      await serve.waitForLog(
        'audit events cannot be written to the store yet; they wait in the spool',
        1,
        5000,
      );
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const queued = Number(/^tessera_audit_events_queued (\d+)/m.exec(metrics)?.[1]);
      const spoolBytes = Number(/^tessera_audit_spool_bytes (\d+)/m.exec(metrics)?.[1]);
      expect(queued).toBeGreaterThanOrEqual(2000);
      expect(spoolBytes).toBeGreaterThan(2000 * 80);
      await admin.query(`alter table ${hidden} rename to audit_events`);
      await admin.end();
      await serve.waitForLog('audit events reach the store again', 1, 10_000);
      await expectAllStored(store, [...warm.jtis, ...outage.jtis]);
      expect(
        serve.logs.filter(
          (l) => l.msg === 'audit events cannot be written to the store yet; they wait in the spool',
        ),
      ).toHaveLength(1);
    } finally {
      await store.close();
    }
  });
});
