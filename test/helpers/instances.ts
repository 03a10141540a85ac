/** Several `tessera serve` instances on one PostgreSQL database, as an operator runs them behind a load balancer. */
import { rmSync } from 'node:fs';
import { Redis } from 'ioredis';
import pg from 'pg';
import { expect } from 'vitest';
import { AssertionReplay, redisKeyOf } from '../../src/limits/replay.js';
import { createTestDatabase, type TestDatabase } from './postgres.js';
import { startServe, tesseraEnv, tesseraOk, type LogLine, type Serve } from './process.js';
import { dropPrefix, REDIS_URL } from './redis.js';
import { freePort, tempDir } from './server.js';
import { waitFor } from './wait.js';

/**
 * The environment every instance shares: the database, one issuer and one master key; listening on 127.0.0.1,
 * logging warnings; then `settings`.
 */
export function sharedDatabaseEnv(
  databaseUrl: string,
  issuer: string,
  settings: Record<string, string> = {},
): NodeJS.ProcessEnv {
  return tesseraEnv({
    TESSERA_DATABASE_URL: databaseUrl,
    TESSERA_ISSUER: issuer,
    TESSERA_HOST: '127.0.0.1',
    TESSERA_LOG_LEVEL: 'warn',
    ...settings,
  });
}

/** `count` instances with `env` (and `settingsOf` each), each on a free port, all started at once. */
export async function startInstances(
  env: NodeJS.ProcessEnv,
  count: number,
  settingsOf: (i: number) => Record<string, string> = () => ({}),
): Promise<Serve[]> {
  const ports: number[] = [];
  for (let i = 0; i < count; i++) ports.push(await freePort());
  return Promise.all(
    ports.map((port, i) => startServe({ ...env, ...settingsOf(i), TESSERA_PORT: String(port) })),
  );
}

/** Two instances on a database of their own (startPostgresPair), and what the test holds of them. */
export interface PostgresPair {
  db: TestDatabase;
  /** The environment the instances share, with A's data directory: the CLI's, as on A's host. */
  env: NodeJS.ProcessEnv;
  instances: Serve[];
  /** The Redis prefix the instances share keys under; undefined without Redis. */
  redisPrefix: string | undefined;
  /** A connection to that Redis, for the test's own look at what the instances keep there. */
  redisClient: Redis | undefined;
  dirs: string[];
}

/**
 * Two instances on a fresh PostgreSQL database, one issuer, with `settings`, and sharing Redis under `redisPrefix`
 * when it is given. Each has a data directory (its audit spool) of its own, named after `dirPrefix`; both start at
 * once on the empty database. Stop them with stopPostgresPair.
 */
export async function startPostgresPair(
  issuer: string,
  dirPrefix: string,
  settings: Record<string, string>,
  redisPrefix?: string,
): Promise<PostgresPair> {
  const db = await createTestDatabase();
  const dirs = [tempDir(dirPrefix), tempDir(dirPrefix)];
  const pair: PostgresPair = { db, env: {}, instances: [], redisPrefix, redisClient: undefined, dirs };
  try {
    const env = sharedDatabaseEnv(db.url, issuer, {
      ...settings,
      ...(redisPrefix === undefined
        ? {}
        : { TESSERA_REDIS_URL: REDIS_URL, TESSERA_REDIS_PREFIX: redisPrefix }),
    });
    pair.instances = await startInstances(env, 2, (i) => ({ TESSERA_DATA_DIR: dirs[i]! }));
    pair.env = { ...env, TESSERA_DATA_DIR: dirs[0] };
    if (redisPrefix !== undefined) pair.redisClient = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    return pair;
  } catch (error) {
    // The caller has nothing to stop in its afterAll yet.
    await stopPostgresPair(pair);
    throw error;
  }
}

/**
 * Kills the instances (nothing of theirs is looked at after), closes `alsoClose` (the test's own pool on the
 * database) before the database goes, and removes all the pair left: its Redis keys, database and directories.
 */
export async function stopPostgresPair(
  pair: PostgresPair | undefined,
  alsoClose?: { close(): Promise<void> },
): Promise<void> {
  await Promise.all((pair?.instances ?? []).map((i) => i.stop('SIGKILL')));
  await alsoClose?.close();
  if (!pair) return;
  pair.redisClient?.disconnect();
  if (pair.redisPrefix !== undefined) await dropPrefix(pair.redisPrefix);
  await pair.db.drop();
  for (const dir of pair.dirs) rmSync(dir, { recursive: true, force: true });
}

/**
 * Where a DPoP proof's id is kept once used, by the holder of the key of thumbprint `jkt`: in Redis (and not the
 * store) when the pair has Redis, else in the store.
 */
export async function expectProofRecorded(pair: PostgresPair, jkt: string, jti: string): Promise<void> {
  const id = AssertionReplay.idOf(`dpop:${jkt}`, jti);
  const client = new pg.Client({ connectionString: pair.db.url });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT expires_at FROM assertion_jtis WHERE id = $1', [id]);
    if (pair.redisClient) {
      expect(rows).toEqual([]);
      expect(await pair.redisClient.pttl(redisKeyOf(pair.redisPrefix!, id))).toBeGreaterThan(60_000);
    } else expect(rows).toHaveLength(1);
  } finally {
    await client.end();
  }
}

/**
 * The token events of `clientId` in the audit trail (read with the CLI of `env`) once there are `count` of them,
 * or what there is after 15 s (the instances write their spools to the store every second), as "type: reason"
 * sorted.
 */
export async function tokenEvents(
  env: NodeJS.ProcessEnv,
  clientId: string,
  count: number,
): Promise<string[]> {
  let events: { type: string; reason: string | null }[] = [];
  await waitFor(
    async () => {
      const result = await tesseraOk(env, 'audit', '--client', clientId, '--limit', '1000', '--json');
      events = (result.json as typeof events).filter((e) => e.type.startsWith('token.'));
      return events.length >= count;
    },
    15_000,
    250,
  ).catch(() => undefined);
  return events.map((e) => `${e.type}: ${e.reason ?? ''}`).sort();
}

/** The warnings and errors the instances logged (Redis outages, store failures), to explain a failure. */
export const complaints = (instances: Serve[]): LogLine[] =>
  instances.flatMap((i) => i.logs.filter((line) => line.level >= 40));
