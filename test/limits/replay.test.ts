/**
 * The replay guard of client assertions (limits/replay.ts): in Redis when configured (the key expires with
 * the assertion), in the store otherwise and while Redis does not answer; expired ids pruned in batches.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asOAuthError, Unavailable } from '../../src/domain/errors.js';
import { AssertionReplay, redisKeyOf } from '../../src/limits/replay.js';
import { connectRedis, type SharedRedis } from '../../src/limits/redis.js';
import { openPostgresStore } from '../../src/store/postgres.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { dropPrefix, REDIS_URL, testPrefix } from '../helpers/redis.js';
import { tempDir } from '../helpers/server.js';
import path from 'node:path';
import { clockAt } from '../helpers/clock.js';

let store: Store;
let redis: SharedRedis;
const prefix = testPrefix();

beforeAll(async () => {
  store = await openSqliteStore(path.join(tempDir(), 'tessera.db'));
  await store.migrate();
  redis = connectRedis(REDIS_URL, { logger: pino({ level: 'silent' }), keyPrefix: prefix, timeoutMs: 500 });
  await new Promise<void>((resolve) =>
    redis.client.status === 'ready' ? resolve() : redis.client.once('ready', resolve),
  );
});
afterAll(async () => {
  await redis?.close();
  await store?.close();
  await dropPrefix(prefix);
});

describe('AssertionReplay', () => {
  it('in the store: a jti once per client while it could be valid', async () => {
    const guard = new AssertionReplay(store, { keyPrefix: prefix, retryAfter: 7 });
    const until = Date.now() + 60_000;
    expect(await guard.use('svc', 'j1', until)).toBe(true);
    expect(await guard.use('svc', 'j1', until)).toBe(false);
    // Another client's assertion with the same jti is another assertion.
    expect(await guard.use('other', 'j1', until)).toBe(true);
  });

  it('a time with a fraction (a proof whose iat or exp has one, RFC 7519 NumericDate) is recorded, on PostgreSQL too', async () => {
    const db = await createTestDatabase();
    const pgStore = openPostgresStore(await db.freshSchema(), { max: 2 });
    try {
      await pgStore.migrate();
      for (const target of [store, pgStore]) {
        const guard = new AssertionReplay(target, { keyPrefix: prefix, retryAfter: 7 });
        const until = Date.now() + 60_000.0999;
        expect(await guard.use('svc', 'fraction', until)).toBe(true);
        expect(await guard.use('svc', 'fraction', until)).toBe(false);
      }
    } finally {
      await pgStore.close();
      await db.drop();
    }
  });

  it('a store that cannot record the jti: temporarily_unavailable (503, Retry-After), neither fresh nor a replay', async () => {
    const gone = openSqliteStore(path.join(tempDir(), 'gone.db'));
    await gone.migrate();
    await gone.close();
    const seen: unknown[] = [];
    const guard = new AssertionReplay(gone, {
      keyPrefix: prefix,
      retryAfter: 7,
      onUnavailable: (error) => seen.push(error),
    });
    const refused = await guard.use('svc', 'u1', Date.now() + 60_000).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(Unavailable);
    expect(asOAuthError(refused)).toMatchObject({ status: 503, error: 'temporarily_unavailable' });
    expect(asOAuthError(refused)!.headers).toEqual({ 'retry-after': '7' });
    expect(seen).toHaveLength(1);
  });

  it('in Redis when configured: the key expires with the assertion; nothing goes to the store', async () => {
    const guard = new AssertionReplay(store, { keyPrefix: prefix, redis, retryAfter: 7 });
    const until = Date.now() + 60_000;
    expect(await guard.use('svc', 'r1', until)).toBe(true);
    expect(await guard.use('svc', 'r1', until)).toBe(false);
    const key = redisKeyOf(prefix, AssertionReplay.idOf('svc', 'r1'));
    const ttl = await redis.client.pttl(key);
    expect(ttl).toBeGreaterThan(55_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    // The store never saw it: the same id is free there.
    expect(await store.useAssertionJti(AssertionReplay.idOf('svc', 'r1'), until)).toBe(true);
  });

  it('in Redis, the ids of one turn go in one write to Redis, each answered on its own', async () => {
    const guard = new AssertionReplay(store, { keyPrefix: prefix, redis, retryAfter: 7 });
    const until = Date.now() + 60_000;
    const stream = (redis.client as unknown as { stream: { write(...args: unknown[]): boolean } }).stream;
    const write = stream.write.bind(stream);
    let writes = 0;
    stream.write = (...args: unknown[]) => {
      writes++;
      return write(...args);
    };
    try {
      // 40 uses in one turn: 20 ids, each twice (the second a replay).
      const ids = Array.from({ length: 20 }, (_, i) => `p${i}`);
      const answers = await Promise.all([...ids, ...ids].map((id) => guard.use('svc', id, until)));
      expect(answers).toEqual([...ids.map(() => true), ...ids.map(() => false)]);
      // One command a write would be 40.
      expect(writes).toBe(1);
    } finally {
      stream.write = write;
    }
  });

  it('in Redis, a time with a fraction is a whole number of milliseconds to live, and a batch with it is answered by Redis', async () => {
    const guard = new AssertionReplay(store, { keyPrefix: prefix, redis, retryAfter: 7 });
    const until = Date.now() + 60_000.0999;
    const [whole, fraction] = await Promise.all([
      guard.use('svc', 'whole', Math.floor(until)),
      guard.use('svc', 'fraction-r', until),
    ]);
    expect([whole, fraction]).toEqual([true, true]);
    expect(await guard.use('svc', 'fraction-r', until)).toBe(false);
    expect(redis.breaker.closed).toBe(true);
    for (const jti of ['whole', 'fraction-r']) {
      const ttl = await redis.client.pttl(redisKeyOf(prefix, AssertionReplay.idOf('svc', jti)));
      expect(ttl).toBeGreaterThan(55_000);
      // The store never saw them.
      expect(await store.useAssertionJti(AssertionReplay.idOf('svc', jti), until)).toBe(true);
    }
  });

  it('falls back to the store while the breaker is open', async () => {
    const guard = new AssertionReplay(store, { keyPrefix: prefix, redis, retryAfter: 7 });
    redis.breaker.failed(new Error('test: Redis is away'));
    try {
      const until = Date.now() + 60_000;
      expect(await guard.use('svc', 'f1', until)).toBe(true);
      expect(await guard.use('svc', 'f1', until)).toBe(false);
      expect(await redis.client.exists(redisKeyOf(prefix, AssertionReplay.idOf('svc', 'f1')))).toBe(0);
    } finally {
      redis.breaker.ready();
    }
  });

  it('prunes every expired id, a batch at a time, and keeps the others', async () => {
    let now = Date.now();
    const guard = new AssertionReplay(store, { keyPrefix: prefix, clock: clockAt(() => now), retryAfter: 7 });
    for (let i = 0; i < 4500; i++) await store.useAssertionJti(`old-${i}`, now + 1000);
    expect(await guard.use('svc', 'keep', now + 600_000)).toBe(true);
    now += 2000;
    guard.start();
    try {
      expect(await guard.prune()).toBeGreaterThanOrEqual(4500);
    } finally {
      guard.stop();
    }
    expect(await store.pruneAssertionJtis(now, 10_000)).toBe(0);
    expect(await guard.use('svc', 'keep', now + 600_000)).toBe(false);
  });
});
