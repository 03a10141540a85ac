import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { decodeJwt, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDIS_OUTAGE } from '../../src/limits/breaker.js';
import { loadConfig } from '../../src/config/index.js';
import { JWT_BEARER, type PublicJwks } from '../../src/domain/client-auth/index.js';
import { digestSecret, generateClientId, generateSecret } from '../../src/domain/secrets.js';
import { FailedAttempts, sourceKey } from '../../src/limits/attempts.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { writeKeyClient } from '../helpers/key-client.js';
import { provisionClient, type Provisioned } from '../helpers/provision.js';
import { dropPrefix, REDIS_URL, testPrefix, throwawayRedis } from '../helpers/redis.js';
import {
  postToken,
  startTestServer,
  startTwoInstances,
  startWithClient,
  tempDir,
  type TestClient,
  type TestServer,
} from '../helpers/server.js';
import { sleep } from '../helpers/wait.js';

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
    ({ t, client } = await startWithClient(API, { TESSERA_TRUST_PROXY: 'loopback' }));
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

/**
 * INTERFACE.md: a blocked caller never locks out a client that presents its exact credential, even one this
 * process has not looked up (it caches its token for 30 minutes: the cache forgot it, or the process is new).
 * The server holds every client id (read-model/client-ids.ts): a registered id is looked up and checked as usual,
 * any other id is a 429 with no store operation.
 */
describe('a blocked address and clients this process has not looked up (every client id in memory)', () => {
  const ATTACKER = '203.0.113.200';
  let dir: string;
  let cli: Store; // the same SQLite file, as the CLI or another instance writes it
  let t: TestServer;
  let good: Provisioned;
  let unused: Provisioned; // never asks for a token: deleted before it does
  let key: { privateKey: CryptoKey; jwk: JWK };
  let keyId: string;

  /** Counts of the running server's store operations by name (its store is wrapped by the metrics). */
  async function storeOps(operation: string): Promise<number> {
    const text = await (await fetch(`${t.url}/metrics`)).text();
    const line = text
      .split('\n')
      .find((l) =>
        l.startsWith(`tessera_store_operation_duration_seconds_count{operation="${operation}",outcome="ok"}`),
      );
    return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
  }

  const post = (clientId: string, secret: string, source = ATTACKER) =>
    postToken(
      t.url,
      { grant_type: 'client_credentials', client_id: clientId, client_secret: secret, audience: API },
      { headers: { 'x-forwarded-for': source } },
    );

  async function assertion(signWith: CryptoKey, id = keyId): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({
      iss: id,
      sub: id,
      aud: `${t.url}/oauth/token`,
      iat: now,
      exp: now + 60,
      jti: randomUUID(),
    })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .sign(signWith);
  }
  const postAssertion = (jwt: string, source = ATTACKER) =>
    postToken(
      t.url,
      {
        grant_type: 'client_credentials',
        client_assertion_type: JWT_BEARER,
        client_assertion: jwt,
        audience: API,
      },
      { headers: { 'x-forwarded-for': source } },
    );

  /** A 429 exactly as a blocked address gets it: 15 minutes' block, counted from the hundredth failure. */
  function expectBlocked(answer: Awaited<ReturnType<typeof postToken>>): void {
    expect({ status: answer.status, body: answer.body }).toEqual({ status: 429, body: TOO_MANY });
    expect(answer.headers.get('retry-after')).toMatch(/^(8[5-9]\d|900)$/);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    expect(answer.headers.get('www-authenticate')).toBeNull();
  }

  /** A 200 with a token for `clientId`. */
  function expectToken(answer: Awaited<ReturnType<typeof postToken>>, clientId: string): void {
    expect(answer.status).toBe(200);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    expect(answer.body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 1800 });
    expect(decodeJwt(answer.body.access_token as string)).toMatchObject({
      sub: clientId,
      client_id: clientId,
      aud: API,
    });
  }

  beforeAll(async () => {
    // The clients exist before the server starts: it knows their ids (read at start), not the clients.
    dir = tempDir();
    cli = openSqliteStore(path.join(dir, 'tessera.db'));
    good = await provisionClient(cli, API, 'good');
    unused = { ...good, id: generateClientId(), secret: generateSecret() };
    await cli.createClient({
      id: unused.id,
      name: 'unused',
      secretDigest: digestSecret(unused.secret),
      tokenTtl: null,
      audiences: [API],
    });
    const pair = await generateKeyPair('ES256', { extractable: true });
    key = { privateKey: pair.privateKey, jwk: { ...(await exportJWK(pair.publicKey)), kid: 'k1' } };
    keyId = await writeKeyClient(cli, {
      name: 'key client',
      audiences: [API],
      jwks: { keys: [key.jwk] } as PublicJwks,
    });
    // The feed is read when the test says so (t.sync()) or when a request needs it, not by the timer.
    t = await startTestServer({
      TESSERA_TRUST_PROXY: 'loopback',
      TESSERA_DATA_DIR: dir,
      TESSERA_CHANGE_POLL_MS: '10000',
    });
    expect(t.server.runtime.directory.idStats()?.ids).toBe(3);
    // A hundred failures with made-up ids block the address for 15 minutes.
    for (let i = 0; i < 100; i++) expect((await post(generateClientId(), 'x')).status).toBe(401);
    expectBlocked(await post(generateClientId(), 'x'));
  });
  afterAll(async () => {
    await t.close();
    await cli.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a client with its exact secret, never looked up by this process: one lookup, then its token from the blocked address', async () => {
    const lookups = await storeOps('findClients');
    expect(t.server.runtime.directory.peekClient(good.id)).toBeUndefined();
    expectToken(await post(good.id, good.secret), good.id);
    expect((await storeOps('findClients')) - lookups).toBe(1);
    // Now held in memory: a wrong secret for it is a 429 from memory, and its secret another token.
    expectBlocked(await post(good.id, 'not-the-secret'));
    expectToken(await post(good.id, good.secret), good.id);
    expect((await storeOps('findClients')) - lookups).toBe(1);
  });

  it('a wrong secret of a client not looked up yet, and unknown ids: 429, and an unknown id costs no store operation', async () => {
    const { directory } = t.server.runtime;
    const fresh = { ...good, id: generateClientId(), secret: generateSecret() };
    await cli.createClient({
      id: fresh.id,
      name: 'fresh',
      secretDigest: digestSecret(fresh.secret),
      tokenTtl: null,
      audiences: [API],
    });
    await t.sync();
    expectBlocked(await post(fresh.id, 'not-the-secret'));

    const lookups = await storeOps('findClients');
    const feedReads = await storeOps('changesSince');
    const stats = { ...directory.stats };
    for (let i = 0; i < 50; i++) expectBlocked(await post(generateClientId(), generateSecret()));
    expectBlocked(await post('c0ffee00c0ffee00c0ffee00c0ffee00', 'x'));
    // No lookup, no read of the feed, not even a look at the cache's unknown ids: the set answered.
    expect(await storeOps('findClients')).toBe(lookups);
    expect(await storeOps('changesSince')).toBe(feedReads);
    expect(directory.stats).toEqual(stats);
    // The wrong secret did not block the client's own secret from there.
    expectToken(await post(fresh.id, fresh.secret), fresh.id);
  });

  it('a private_key_jwt client never looked up: its token from the blocked address; a bad assertion is 429', async () => {
    const lookups = await storeOps('findClients');
    const other = await generateKeyPair('ES256');
    expectBlocked(await postAssertion(await assertion(other.privateKey)));
    expect((await storeOps('findClients')) - lookups).toBe(1);
    expectToken(await postAssertion(await assertion(key.privateKey)), keyId);
    expectBlocked(await postAssertion(await assertion(key.privateKey, generateClientId())));
    expect((await storeOps('findClients')) - lookups).toBe(1);
  });

  it('a client created through the store while the server runs: its first request works at once; from the blocked address once the feed is read', async () => {
    const created = async (name: string) => {
      const made = { ...good, id: generateClientId(), secret: generateSecret() };
      await cli.createClient({
        id: made.id,
        name,
        secretDigest: digestSecret(made.secret),
        tokenTtl: null,
        audiences: [API],
      });
      return made;
    };
    // Not blocked: its id is not in the set yet, so the feed is read once, and there it is.
    const first = await created('first');
    expectToken(await post(first.id, first.secret, '198.51.100.120'), first.id);
    // Blocked: the feed read by the timer (here: sync) brings its id, and it is looked up and let through.
    const second = await created('second');
    await t.sync();
    expectToken(await post(second.id, second.secret), second.id);
    // Until the feed is read, a blocked address gets 429 for it: no store operation for an id the set lacks
    // (TESSERA_CHANGE_POLL_MS, half a second by default, is the most it waits).
    const third = await created('third');
    expectBlocked(await post(third.id, third.secret));
    await t.sync();
    expectToken(await post(third.id, third.secret), third.id);
  });

  it("a deleted client's id is refused: 429 from the blocked address, 401 elsewhere, with its old secret", async () => {
    await cli.deleteClient(unused.id);
    await cli.deleteClient(good.id); // held in memory (it got tokens above): the feed takes it out
    await t.sync();
    for (const gone of [unused, good]) {
      expectBlocked(await post(gone.id, gone.secret));
      const elsewhere = await post(gone.id, gone.secret, '198.51.100.121');
      expect({ status: elsewhere.status, body: elsewhere.body }).toEqual({
        status: 401,
        body: { error: 'invalid_client', error_description: 'client authentication failed' },
      });
    }
  });
});

describe('429 at the token endpoint with the limits set (TESSERA_ATTEMPTS_*)', () => {
  let t: TestServer;
  let client: TestClient;
  beforeAll(async () => {
    ({ t, client } = await startWithClient(API, {
      TESSERA_TRUST_PROXY: 'loopback',
      TESSERA_ATTEMPTS_CLIENT_MAX: '3',
      TESSERA_ATTEMPTS_CLIENT_WINDOW: '1',
      TESSERA_ATTEMPTS_CLIENT_BLOCK: '45s',
      TESSERA_ATTEMPTS_SOURCE_MAX: '6',
      TESSERA_ATTEMPTS_SOURCE_WINDOW: '1m',
      TESSERA_ATTEMPTS_SOURCE_BLOCK: '2m',
    }));
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
    await sleep(1200);
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
    ({ a, b, client } = await startTwoInstances(env, API));
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await dropPrefix(prefix);
  });

  it('failures at A and at B add up: the tenth, wherever it lands, blocks', async () => {
    for (let i = 0; i < 6; i++) expect((await attempt(a, client, '198.51.100.50', 'wrong')).status).toBe(401);
    for (let i = 0; i < 4; i++) expect((await attempt(b, client, '198.51.100.50', 'wrong')).status).toBe(401);
    await sleep(100); // counting is not on the answer's path
    expect((await attempt(b, client, '198.51.100.50', 'wrong')).status).toBe(429);
    // A learns of the block at its next failure, at the latest.
    expect((await attempt(a, client, '198.51.100.50', 'wrong')).status).toBe(401);
    await sleep(100);
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
      await sleep(100);
      expect((await attempt(t, client, '198.51.100.81', 'wrong')).status).toBe(429);
      expect(lines.some((l) => l.includes(REDIS_OUTAGE.down))).toBe(true);

      await redis.start();
      for (let i = 0; i < 60 && !lines.some((l) => l.includes(REDIS_OUTAGE.up)); i++) {
        await sleep(100);
      }
      expect(lines.some((l) => l.includes(REDIS_OUTAGE.up))).toBe(true);
      expect((await attempt(t, client, '198.51.100.80')).status).toBe(200);
    } finally {
      await t.close();
      await redis.stop();
    }
  }, 30_000);
});
