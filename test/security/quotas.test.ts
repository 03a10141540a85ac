import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenParams } from '../helpers/provision.js';
import { dropPrefix, REDIS_URL, testPrefix } from '../helpers/redis.js';
import {
  postToken,
  startTestServer,
  startTwoInstances,
  type TestClient,
  type TestServer,
} from '../helpers/server.js';

/** Per-client issuance quotas: a client that does not cache its tokens cannot flood the service. */

const API = 'https://api.example.com';
const ask = (t: TestServer, c: TestClient) => postToken(t.url, tokenParams(c.id, c.secret, API));

describe('issuance quotas', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
    await t.addAudience(API);
  });
  afterAll(async () => t.close());

  it('a client with 3 tokens a minute gets 3, then 429 with Retry-After; others are not affected', async () => {
    const limited = await t.createClient([API]);
    await t.server.runtime.store.updateClient(limited.id, { quotaPerMinute: 3, quotaPerDay: null });
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
    await t.server.runtime.store.updateClient(daily.id, { quotaPerMinute: null, quotaPerDay: 2 });
    await t.sync();
    expect((await ask(t, daily)).status).toBe(200);
    expect((await ask(t, daily)).status).toBe(200);
    const refused = await ask(t, daily);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(86_000);
    await t.server.runtime.store.updateClient(daily.id, { quotaPerMinute: null, quotaPerDay: null });
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
    ({ a, b, client } = await startTwoInstances(env, API, { quotaPerMinute: 4, quotaPerDay: null }));
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
