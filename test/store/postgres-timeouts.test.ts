import { createServer, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { openStore } from '../../src/runtime/store.js';
import { rejection } from '../helpers/assert.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { sleep } from '../helpers/wait.js';

/**
 * TESSERA_PG_QUERY_TIMEOUT and TESSERA_PG_CONNECT_TIMEOUT reach the store that the server and the CLI open
 * (runtime/store.ts openStore): a PostgreSQL that hangs fails within them, like one that refuses.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

describe('PostgreSQL timeouts', () => {
  it('TESSERA_PG_QUERY_TIMEOUT=1: a query held up by a lock fails after a second', async () => {
    const url = await db.freshSchema();
    const config = loadConfig({ TESSERA_DATABASE_URL: url, TESSERA_PG_QUERY_TIMEOUT: '1' });
    expect(config.pgQueryTimeout).toBe(1);
    const store = await openStore(config);
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    try {
      await locker.query('begin');
      await locker.query('lock table audiences in access exclusive mode');
      const started = Date.now();
      const error = await rejection(store.listAudiences());
      const waited = Date.now() - started;
      expect(error.message).toBe('Query read timeout');
      expect(waited).toBeGreaterThanOrEqual(950);
      expect(waited).toBeLessThan(2000);
    } finally {
      await locker.query('rollback').catch(() => undefined);
      await locker.end();
      await store.close();
    }
  });

  it('TESSERA_PG_QUERY_TIMEOUT=1: a store opened while another instance migrates waits for it, past the query timeout', async () => {
    const url = await db.freshSchema();
    const config = loadConfig({ TESSERA_DATABASE_URL: url, TESSERA_PG_QUERY_TIMEOUT: '1' });
    // Kysely's migration lock (kysely/dist/dialect/postgres/postgres-adapter.js), held as an instance migrating holds it.
    const LOCK = '3853314791062309107';
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    await locker.query(`select pg_advisory_lock(${LOCK})`);
    let outcome: { opened: Awaited<ReturnType<typeof openStore>> } | { failed: unknown } | undefined;
    const opening = openStore(config).then(
      (opened) => (outcome = { opened }),
      (failed: unknown) => (outcome = { failed }),
    );
    try {
      await sleep(2500);
      expect(outcome).toBe(undefined);
    } finally {
      await locker.query(`select pg_advisory_unlock(${LOCK})`);
      await locker.end();
    }
    await opening;
    expect(outcome).toHaveProperty('opened');
    const store = (outcome as { opened: Awaited<ReturnType<typeof openStore>> }).opened;
    try {
      expect((await store.schema()).pending).toEqual([]);
    } finally {
      await store.close();
    }
  });

  describe('TESSERA_PG_CONNECT_TIMEOUT', () => {
    // A "PostgreSQL" that accepts connections and never says a word, like a host that froze.
    let silent: Server;
    const sockets: Socket[] = [];
    let port: number;
    beforeAll(async () => {
      silent = createServer((socket) => sockets.push(socket));
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      port = (silent.address() as { port: number }).port;
    });
    afterAll(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    });

    it.each([
      ['1', 1000],
      ['2s', 2000],
    ])('=%s: opening the store fails after %d ms', async (setting, ms) => {
      const config = loadConfig({
        TESSERA_DATABASE_URL: `postgres://tessera@127.0.0.1:${port}/tessera`,
        TESSERA_PG_CONNECT_TIMEOUT: setting,
      });
      expect(config.pgConnectTimeout * 1000).toBe(ms);
      const started = Date.now();
      const error = await rejection(openStore(config));
      const waited = Date.now() - started;
      expect(error.message).toBe('Connection terminated due to connection timeout');
      expect(waited).toBeGreaterThanOrEqual(ms - 50);
      expect(waited).toBeLessThan(ms + 1000);
    });
  });
});
