import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDIS_OUTAGE } from '../../src/limits/breaker.js';
import { loadConfig } from '../../src/config/index.js';
import { FailedAttempts, sourceKey } from '../../src/limits/attempts.js';
import { dropPrefix, REDIS_URL, testPrefix, throwawayRedis } from '../helpers/redis.js';
import { postToken, startTestServer, type TestClient, type TestServer } from '../helpers/server.js';

/**
 * INTERFACE.md's 429 row: too many failed attempts for a client id or a source address. The thresholds are
 * settings; by default the documented ones: 10 failures per client id + source in 5 minutes (blocked 5
 * minutes), 100 per source (blocked 15 minutes).
 */

/** The defaults of TESSERA_ATTEMPTS_CLIENT_* and TESSERA_ATTEMPTS_SOURCE_*. */
const { attemptsPerClient: PER_CLIENT_AND_SOURCE, attemptsPerSource: PER_SOURCE } = loadConfig({});
const DEFAULTS = { perClientAndSource: PER_CLIENT_AND_SOURCE, perSource: PER_SOURCE };

const API = 'https://api.example.com';
const TOO_MANY = { error: 'invalid_request', error_description: 'too many failed attempts; try again later' };

const attempt = (t: TestServer, c: TestClient, source: string, secret = c.secret) =>
  postToken(
    t.url,
    { grant_type: 'client_credentials', client_id: c.id, client_secret: secret, audience: API },
    { headers: { 'x-forwarded-for': source } },
  );

describe('FailedAttempts', () => {
  it('by default: 10 failures per client id + source in 5 minutes block 5 minutes, 100 per source block 15', () => {
    expect(DEFAULTS).toEqual({
      perClientAndSource: { failures: 10, windowSeconds: 300, blockSeconds: 300 },
      perSource: { failures: 100, windowSeconds: 300, blockSeconds: 900 },
    });
  });

  it('blocks a client id + source after the limit, for the block time, and nothing else', async () => {
    let now = 1_000_000;
    const limits = new FailedAttempts({ ...DEFAULTS, now: () => now });
    for (let i = 0; i < PER_CLIENT_AND_SOURCE.failures - 1; i++) await limits.failed('svc', '198.51.100.1');
    expect(limits.blockedFor('svc', '198.51.100.1')).toBe(0);
    await limits.failed('svc', '198.51.100.1');
    expect(limits.blockedFor('svc', '198.51.100.1')).toBe(PER_CLIENT_AND_SOURCE.blockSeconds);
    // Another address, another client from the same address: not blocked.
    expect(limits.blockedFor('svc', '198.51.100.2')).toBe(0);
    expect(limits.blockedFor('other', '198.51.100.1')).toBe(0);
    now += PER_CLIENT_AND_SOURCE.blockSeconds * 1000 - 1500;
    expect(limits.blockedFor('svc', '198.51.100.1')).toBe(2);
    now += 1500;
    expect(limits.blockedFor('svc', '198.51.100.1')).toBe(0);
  });

  it('blocks a source spraying client ids after the per-source limit', async () => {
    const limits = new FailedAttempts(DEFAULTS);
    for (let i = 0; i < PER_SOURCE.failures; i++) await limits.failed(`id-${i}`, '203.0.113.9');
    expect(limits.blockedFor('anyone', '203.0.113.9')).toBe(PER_SOURCE.blockSeconds);
    expect(limits.blockedFor(undefined, '203.0.113.9')).toBe(PER_SOURCE.blockSeconds);
    expect(limits.blockedFor('anyone', '203.0.113.10')).toBe(0);
  });

  it('counts and blocks by the thresholds it is given', async () => {
    let now = 1_000_000;
    const limits = new FailedAttempts({
      perClientAndSource: { failures: 2, windowSeconds: 10, blockSeconds: 7 },
      perSource: { failures: 4, windowSeconds: 60, blockSeconds: 30 },
      now: () => now,
    });
    await limits.failed('svc', '198.51.100.1');
    expect(limits.blockedFor('svc', '198.51.100.1')).toBe(0);
    await limits.failed('svc', '198.51.100.1');
    expect(limits.blockedFor('svc', '198.51.100.1')).toBe(7);
    expect(limits.blockedFor('other', '198.51.100.1')).toBe(0);
    await limits.failed('a', '198.51.100.1');
    expect(limits.blockedFor('other', '198.51.100.1')).toBe(0);
    await limits.failed('b', '198.51.100.1');
    expect(limits.blockedFor('other', '198.51.100.1')).toBe(30);
    expect(limits.blockedFor(undefined, '198.51.100.1')).toBe(30);
    now += 30_000;
    expect(limits.blockedFor('svc', '198.51.100.1')).toBe(0);
  });
});

describe('sourceKey', () => {
  it('counts IPv4 as it is, IPv6 by its /64, IPv4-mapped IPv6 as IPv4', () => {
    expect(sourceKey('198.51.100.7')).toBe('198.51.100.7');
    expect(sourceKey('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(sourceKey('2001:db8:1:2::9')).toBe('2001:db8:1:2::/64');
    expect(sourceKey('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(sourceKey('::1')).toBe('0:0:0:0::/64');
    expect(sourceKey('::ffff:198.51.100.7')).toBe('198.51.100.7');
  });
});

describe('429 at the token endpoint (in memory)', () => {
  let t: TestServer;
  let client: TestClient;
  beforeAll(async () => {
    t = await startTestServer({ TESSERA_TRUST_PROXY: 'loopback' });
    await t.addAudience(API);
    client = await t.createClient([API]);
  });
  afterAll(async () => t.close());

  it('ten wrong secrets from one address: then 429 for wrong ones from there, while the right secret still works', async () => {
    for (let i = 0; i < 10; i++) expect((await attempt(t, client, '198.51.100.1', 'wrong')).status).toBe(401);
    const blocked = await attempt(t, client, '198.51.100.1', 'wrong');
    expect({ status: blocked.status, body: blocked.body }).toEqual({ status: 429, body: TOO_MANY });
    expect(blocked.headers.get('retry-after')).toBe('300');
    expect(blocked.headers.get('cache-control')).toBe('no-store');
    expect(blocked.headers.get('pragma')).toBe('no-cache');
    expect(blocked.headers.get('www-authenticate')).toBeNull();
    // Nobody sharing the address can lock the client out: its exact secret is let through, here and elsewhere.
    expect((await attempt(t, client, '198.51.100.1')).status).toBe(200);
    expect((await attempt(t, client, '198.51.100.2')).status).toBe(200);
    // An unknown id from the blocked pair is not blocked by that pair.
    const other = { id: 'someone-else', secret: 'x', record: client.record };
    expect((await attempt(t, other, '198.51.100.1')).status).toBe(401);
  });

  it('a hundred failures with made-up ids from one address: 429 for every failure from there, not for the right secret', async () => {
    for (let i = 0; i < 100; i++) {
      const fake = { id: `guess-${i}`, secret: 'x', record: client.record };
      expect((await attempt(t, fake, '203.0.113.5')).status).toBe(401);
    }
    const blocked = await attempt(t, client, '203.0.113.5', 'wrong');
    expect({ status: blocked.status, body: blocked.body }).toEqual({ status: 429, body: TOO_MANY });
    expect(blocked.headers.get('retry-after')).toBe('900');
    expect((await attempt(t, client, '203.0.113.5')).status).toBe(200);
    expect((await attempt(t, client, '203.0.113.6', 'wrong')).status).toBe(401);
  });

  it('malformed Basic headers count against their address', async () => {
    const send = () =>
      postToken(
        t.url,
        { grant_type: 'client_credentials', audience: API },
        { headers: { authorization: 'Basic !!!', 'x-forwarded-for': '203.0.113.77' } },
      );
    for (let i = 0; i < 100; i++) expect((await send()).status).toBe(401);
    expect((await send()).status).toBe(429);
  });
});

describe('429 at the token endpoint with the limits set (TESSERA_ATTEMPTS_*)', () => {
  let t: TestServer;
  let client: TestClient;
  beforeAll(async () => {
    t = await startTestServer({
      TESSERA_TRUST_PROXY: 'loopback',
      TESSERA_ATTEMPTS_CLIENT_MAX: '3',
      TESSERA_ATTEMPTS_CLIENT_WINDOW: '1',
      TESSERA_ATTEMPTS_CLIENT_BLOCK: '45s',
      TESSERA_ATTEMPTS_SOURCE_MAX: '6',
      TESSERA_ATTEMPTS_SOURCE_WINDOW: '1m',
      TESSERA_ATTEMPTS_SOURCE_BLOCK: '2m',
    });
    await t.addAudience(API);
    client = await t.createClient([API]);
  });
  afterAll(async () => t.close());

  it('three wrong secrets within a second block the pair for 45 s; failures further apart than the window do not add up', async () => {
    // Five failures from this address in all: under its own limit (six), so the pair's block is the one seen.
    expect([t.config.attemptsPerClient, t.config.attemptsPerSource]).toEqual([
      { failures: 3, windowSeconds: 1, blockSeconds: 45 },
      { failures: 6, windowSeconds: 60, blockSeconds: 120 },
    ]);
    const source = '198.51.100.90';
    for (let i = 0; i < 2; i++) expect((await attempt(t, client, source, 'wrong')).status).toBe(401);
    // The window (1 s) ends: the count starts again.
    await new Promise((r) => setTimeout(r, 1200));
    for (let i = 0; i < 3; i++) expect((await attempt(t, client, source, 'wrong')).status).toBe(401);
    const blocked = await attempt(t, client, source, 'wrong');
    expect({ status: blocked.status, body: blocked.body }).toEqual({ status: 429, body: TOO_MANY });
    expect(blocked.headers.get('retry-after')).toBe('45');
    expect((await attempt(t, client, source)).status).toBe(200);
  });

  it('six failures with made-up ids from one address block it for 2 minutes', async () => {
    for (let i = 0; i < 6; i++) {
      const fake = { id: `guess-${i}`, secret: 'x', record: client.record };
      expect((await attempt(t, fake, '203.0.113.90')).status).toBe(401);
    }
    const blocked = await attempt(t, client, '203.0.113.90', 'wrong');
    expect({ status: blocked.status, body: blocked.body }).toEqual({ status: 429, body: TOO_MANY });
    expect(blocked.headers.get('retry-after')).toBe('120');
    expect((await attempt(t, client, '203.0.113.91', 'wrong')).status).toBe(401);
  });
});

describe('shared through Redis by every instance', () => {
  const prefix = testPrefix();
  let a: TestServer;
  let b: TestServer;
  let client: TestClient;
  beforeAll(async () => {
    const env = {
      TESSERA_TRUST_PROXY: 'loopback',
      TESSERA_REDIS_URL: REDIS_URL,
      TESSERA_REDIS_PREFIX: prefix,
    };
    a = await startTestServer(env);
    b = await startTestServer(env);
    // Two stores here (SQLite each), so the same client is created in both with the same id and secret.
    await a.addAudience(API);
    await b.addAudience(API);
    client = await a.createClient([API]);
    await b.server.runtime.store.createClient({
      id: client.id,
      name: 'same',
      secretDigest: client.record.secretDigest,
      tokenTtl: null,
      audiences: [API],
    });
    await b.sync();
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await dropPrefix(prefix);
  });

  it('failures at A and at B add up: the tenth, wherever it lands, blocks', async () => {
    for (let i = 0; i < 6; i++) expect((await attempt(a, client, '198.51.100.50', 'wrong')).status).toBe(401);
    for (let i = 0; i < 4; i++) expect((await attempt(b, client, '198.51.100.50', 'wrong')).status).toBe(401);
    await new Promise((r) => setTimeout(r, 100)); // counting is not on the answer's path
    expect((await attempt(b, client, '198.51.100.50', 'wrong')).status).toBe(429);
    // A learns of the block at its next failure, at the latest.
    expect((await attempt(a, client, '198.51.100.50', 'wrong')).status).toBe(401);
    await new Promise((r) => setTimeout(r, 100));
    expect((await attempt(a, client, '198.51.100.50', 'wrong')).status).toBe(429);
    expect((await attempt(a, client, '198.51.100.50')).status).toBe(200);
  });
});

describe('Redis going away and coming back', () => {
  it('counts in memory meanwhile, logs it, keeps serving, and goes back to Redis', async () => {
    const redis = await throwawayRedis();
    await redis.start();
    const lines: string[] = [];
    const t = await startTestServer(
      { TESSERA_TRUST_PROXY: 'loopback', TESSERA_REDIS_URL: redis.url, TESSERA_LOG_LEVEL: 'info' },
      (line) => lines.push(line),
    );
    try {
      await t.addAudience(API);
      const client = await t.createClient([API]);
      expect((await attempt(t, client, '198.51.100.80')).status).toBe(200);

      await redis.stop();
      // Still serving: good credentials 200, bad ones 401, and the limit still applies (in memory).
      expect((await attempt(t, client, '198.51.100.80')).status).toBe(200);
      for (let i = 0; i < 10; i++)
        expect((await attempt(t, client, '198.51.100.81', 'wrong')).status).toBe(401);
      await new Promise((r) => setTimeout(r, 100));
      expect((await attempt(t, client, '198.51.100.81', 'wrong')).status).toBe(429);
      expect(lines.some((l) => l.includes(REDIS_OUTAGE.down))).toBe(true);

      await redis.start();
      for (let i = 0; i < 60 && !lines.some((l) => l.includes(REDIS_OUTAGE.up)); i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(lines.some((l) => l.includes(REDIS_OUTAGE.up))).toBe(true);
      expect((await attempt(t, client, '198.51.100.80')).status).toBe(200);
    } finally {
      await t.close();
      await redis.stop();
    }
  }, 30_000);
});
