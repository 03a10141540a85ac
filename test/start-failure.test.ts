import { createHook } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../src/config/index.js';
import { MasterKeyMismatchError } from '../src/keys/sealed.js';
import { createLogger } from '../src/logger.js';
import { startServer } from '../src/main.js';
import { rejection } from './helpers/assert.js';
import { createTestDatabase, PG_ADMIN_URL, type TestDatabase } from './helpers/postgres.js';
import { dropPrefix, REDIS_URL, testPrefix } from './helpers/redis.js';
import { freePort, tempDir } from './helpers/server.js';
import { pollUntil, sleep } from './helpers/wait.js';

/**
 * A start that fails after the store, Redis, the change feed and the audit trail were opened (a
 * TESSERA_MASTER_KEY other than the one the signing keys were sealed under, found when the keys are loaded;
 * a port already taken, found when the server listens) closes all of them: nothing of it is left running or
 * holding the process open, nor a connection to PostgreSQL.
 */

const newMasterKey = () => randomBytes(32).toString('base64');

/** The kinds of resources that keep this process's event loop alive, counted: e.g. { Timeout: 2, TCPSocketWrap: 1 }. */
function activeResources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo().sort()) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

/** Waits (two seconds at most) until `read` gives `expected`: a closed socket or thread is let go of a moment after its close() resolves. */
async function settled<T>(read: () => T, expected: T): Promise<T> {
  return (await pollUntil(read, (now) => JSON.stringify(now) === JSON.stringify(expected), 2000, 50)).value;
}

/** The active resources once they have not changed for 200 ms (what the steps before let go of is gone). */
async function quiet(): Promise<Record<string, number>> {
  let last = JSON.stringify(activeResources());
  for (let i = 0; i < 10; i++) {
    await sleep(200);
    const now = JSON.stringify(activeResources());
    if (now === last) break;
    last = now;
  }
  return JSON.parse(last) as Record<string, number>;
}

/**
 * Timers, sockets and threads created while it records and not destroyed since, counted by kind. Unlike
 * getActiveResourcesInfo(), this sees unref()'d timers too (the change feed's poll, the audit trail's flush),
 * which would not keep a process alive but would go on running against a closed store. Destroys are reported
 * asynchronously: the hook stays enabled after the recording stops, until disable().
 */
function trackResources() {
  const KINDS = new Set(['Timeout', 'Immediate', 'TCPWRAP', 'PIPEWRAP', 'WORKER', 'MESSAGEPORT']);
  const live = new Map<number, string>();
  let recording = true;
  const hook = createHook({
    init(id, type) {
      if (recording && KINDS.has(type)) live.set(id, type);
    },
    destroy(id) {
      live.delete(id);
    },
  }).enable();
  return {
    stopRecording: () => (recording = false),
    disable: () => hook.disable(),
    left(): Record<string, number> {
      const counts: Record<string, number> = {};
      for (const kind of [...live.values()].sort()) counts[kind] = (counts[kind] ?? 0) + 1;
      return counts;
    },
  };
}

/** How many connections PostgreSQL has open to `database`. */
async function connectionsTo(database: string): Promise<number> {
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ n: string }>(
      'select count(*) as n from pg_stat_activity where datname = $1',
      [database],
    );
    return Number(rows[0]!.n);
  } finally {
    await admin.end();
  }
}

/**
 * Starts a server that must fail to start (with an error of `type`). Returns that error, what of the start
 * is left (tracked), the process's active resources afterwards (once back to `before`, if they get there),
 * and what was logged after the start had failed.
 */
async function failedStart(
  config: Config,
  type: abstract new (...args: never[]) => Error,
  before: Record<string, number>,
) {
  const lines: string[] = [];
  const tracked = trackResources();
  let error: Error;
  let left: Record<string, number>;
  try {
    error = await rejection(
      startServer(config, createLogger(config, { write: (line: string) => lines.push(line) })),
      type,
    );
    tracked.stopRecording();
    left = await settled(() => tracked.left(), {});
  } finally {
    tracked.disable();
  }
  const failed = lines.length;
  const after = await settled(activeResources, before);
  // Nothing of it runs any more: a poll of the change feed every 50 ms would log the closed store.
  await sleep(300);
  return { error, left, after, loggedAfter: lines.slice(failed) };
}

/** A server's settings on `dataDir`, on a free port, its change feed polled every 50 ms. */
async function settings(dataDir: string, env: Record<string, string>): Promise<Config> {
  return loadConfig({
    TESSERA_DATA_DIR: dataDir,
    TESSERA_PORT: String(await freePort()),
    TESSERA_HOST: '127.0.0.1',
    TESSERA_LOG_LEVEL: 'info',
    TESSERA_MASTER_KEY: newMasterKey(),
    TESSERA_CHANGE_POLL_MS: '50',
    ...env,
  });
}

/**
 * Starts and stops a server with one master key (its signing keys are sealed under it), then starts one with
 * another, which fails; see failedStart. `before`: the active resources before the first start.
 */
async function startWithTheWrongKey(env: Record<string, string>) {
  const dataDir = tempDir();
  try {
    const first = await settings(dataDir, env);
    const wrong = await settings(dataDir, env);
    const before = await quiet();
    const server = await startServer(first, createLogger(first, { write: () => undefined }));
    await server.close();
    // A start that succeeded and was closed leaves nothing either.
    expect(await settled(activeResources, before)).toEqual(before);
    return { before, ...(await failedStart(wrong, MasterKeyMismatchError, before)) };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

describe('a start that fails closes what it opened', () => {
  const prefix = testPrefix();
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
    await dropPrefix(prefix);
  });

  it('SQLite and Redis: a wrong TESSERA_MASTER_KEY rejects, and leaves no timer, thread or socket behind', async () => {
    const { error, left, before, after, loggedAfter } = await startWithTheWrongKey({
      TESSERA_REDIS_URL: REDIS_URL,
      TESSERA_REDIS_PREFIX: prefix,
    });
    expect(error.message).toMatch(
      /^signing key \S+ was sealed under another master key \(\S+, this one is \S+\); start with the TESSERA_MASTER_KEY it was created with$/,
    );
    expect({ left, after, loggedAfter }).toEqual({ left: {}, after: before, loggedAfter: [] });
  });

  it('PostgreSQL and Redis: the same, and PostgreSQL has no connection left from it (the change listener included)', async () => {
    const url = await db.freshSchema();
    const database = new URL(url).pathname.slice(1);
    const connectionsBefore = await connectionsTo(database);
    const { error, left, before, after, loggedAfter } = await startWithTheWrongKey({
      TESSERA_DATABASE_URL: url,
      TESSERA_REDIS_URL: REDIS_URL,
      TESSERA_REDIS_PREFIX: prefix,
    });
    expect(error).toBeInstanceOf(MasterKeyMismatchError);
    expect({ left, after, loggedAfter }).toEqual({ left: {}, after: before, loggedAfter: [] });
    // Connections end on PostgreSQL's side a moment after the client closes them.
    let connections = await connectionsTo(database);
    for (let i = 0; i < 20 && connections !== connectionsBefore; i++) {
      await sleep(100);
      connections = await connectionsTo(database);
    }
    expect(connections).toBe(connectionsBefore);
  });

  it('a port already taken: the listen error, and the app and the runtime are closed', async () => {
    const dataDir = tempDir();
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as { port: number }).port;
      const config = await settings(dataDir, {
        TESSERA_PORT: String(port),
        TESSERA_REDIS_URL: REDIS_URL,
        TESSERA_REDIS_PREFIX: prefix,
      });
      const before = await quiet();
      const { error, left, after, loggedAfter } = await failedStart(config, Error, before);
      expect(error.message).toBe(`listen EADDRINUSE: address already in use 127.0.0.1:${port}`);
      expect({ left, after, loggedAfter }).toEqual({ left: {}, after: before, loggedAfter: [] });
    } finally {
      await new Promise((resolve) => taken.close(resolve));
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
