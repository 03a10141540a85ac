import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropPrefix, REDIS_URL, testPrefix } from '../helpers/redis.js';
import { postToken, startTestServer, type TestClient, type TestServer } from '../helpers/server.js';

/** Per-client issuance quotas: a client that does not cache its tokens cannot flood the service. */

const API = 'https://api.example.com';
const ask = (t: TestServer, c: TestClient) =>
  postToken(t.url, {
    grant_type: 'client_credentials',
    client_id: c.id,
    client_secret: c.secret,
    audience: API,
  });

describe('issuance quotas', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
    await t.addAudience(API);
  });
  afterAll(async () => t.close());

  it('a client with 3 tokens a minute gets 3, then 429 with Retry-After; others are not affected', async () => {
    const limited = await t.createClient([API]);
    await t.server.runtime.store.setClientQuota(limited.id, { perMinute: 3, perDay: null });
    await t.sync();
    const free = await t.createClient([API]);
    for (let i = 0; i < 3; i++) expect((await ask(t, limited)).status).toBe(200);
    const refused = await ask(t, limited);
    expect({ status: refused.status, body: refused.body }).toEqual({
      status: 429,
      body: {
        error: 'invalid_request',
        error_description: 'token quota exceeded for this client; reuse your token until it expires',
      },
    });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers.get('cache-control')).toBe('no-store');
    for (let i = 0; i < 10; i++) expect((await ask(t, free)).status).toBe(200);
  });

  it('a per-day quota, and removing a quota lifts it within a second', async () => {
    const daily = await t.createClient([API]);
    await t.server.runtime.store.setClientQuota(daily.id, { perMinute: null, perDay: 2 });
    await t.sync();
    expect((await ask(t, daily)).status).toBe(200);
    expect((await ask(t, daily)).status).toBe(200);
    const refused = await ask(t, daily);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(86_000);
    await t.server.runtime.store.setClientQuota(daily.id, { perMinute: null, perDay: null });
    await t.sync();
    expect((await ask(t, daily)).status).toBe(200);
  });
});

describe('issuance quotas across instances (Redis)', () => {
  const prefix = testPrefix();
  let a: TestServer;
  let b: TestServer;
  let client: TestClient;
  beforeAll(async () => {
    const env = { TESSERA_REDIS_URL: REDIS_URL, TESSERA_REDIS_PREFIX: prefix };
    a = await startTestServer(env);
    b = await startTestServer(env);
    await a.addAudience(API);
    await b.addAudience(API);
    client = await a.createClient([API]);
    await a.server.runtime.store.setClientQuota(client.id, { perMinute: 4, perDay: null });
    await a.sync();
    // Two SQLite stores here: the same client in both, as PostgreSQL would share it.
    await b.server.runtime.store.createClient({
      id: client.id,
      name: 'same',
      secretDigest: client.record.secretDigest,
      tokenTtl: null,
      quotaPerMinute: 4,
      audiences: [API],
    });
    await b.sync();
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await dropPrefix(prefix);
  });

  it('tokens from A and from B count against one quota', async () => {
    expect((await ask(a, client)).status).toBe(200);
    expect((await ask(b, client)).status).toBe(200);
    expect((await ask(a, client)).status).toBe(200);
    expect((await ask(b, client)).status).toBe(200);
    expect((await ask(a, client)).status).toBe(429);
    expect((await ask(b, client)).status).toBe(429);
  });
});
