import { readdirSync, rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { exitWithin, spawnServe, tesseraEnv } from '../helpers/process.js';
import {
  freePort,
  postToken,
  startWithClient,
  tempDir,
  type TestClient,
  type TestServer,
} from '../helpers/server.js';
import { sleep } from '../helpers/wait.js';

/**
 * Whose address the failed-attempt limits count (README, "Failed attempts"; src/limits/attempts.ts): the
 * socket's, unless TESSERA_TRUST_PROXY names the proxy the request came through, and then the address that
 * proxy wrote in X-Forwarded-For. Every server here listens on 127.0.0.1, so the socket address of every
 * request is 127.0.0.1, and only the setting decides whether X-Forwarded-For counts.
 *
 * The per-source limit is used (100 failures in 5 minutes block the source for 15), with made-up client ids,
 * each once, so that the per-client-and-source limit (10) never comes into it. Counters are in memory: each
 * server is its own (no Redis).
 */

const API = 'https://api.example.com';
const TOO_MANY = { error: 'invalid_request', error_description: 'too many failed attempts; try again later' };
const INVALID_CLIENT = { error: 'invalid_client', error_description: 'client authentication failed' };

let guesses = 0;
/** A token request with a client id never used before (so only the per-source limit counts it). */
const guess = (t: TestServer, forwardedFor?: string) =>
  postToken(
    t.url,
    {
      grant_type: 'client_credentials',
      client_id: `made-up-${++guesses}`,
      client_secret: 'wrong',
      audience: API,
    },
    { headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } },
  );

const own = (t: TestServer, c: TestClient, forwardedFor: string, secret = c.secret) =>
  postToken(
    t.url,
    { grant_type: 'client_credentials', client_id: c.id, client_secret: secret, audience: API },
    { headers: { 'x-forwarded-for': forwardedFor } },
  );

/** The answer's status and body, and its Retry-After when it has one. */
const summary = (answer: Awaited<ReturnType<typeof postToken>>) => ({
  status: answer.status,
  body: answer.body,
  retryAfter: answer.headers.get('retry-after'),
});
/** The per-source limit: TESSERA_ATTEMPTS_SOURCE_*, at their defaults (100 failures in 5 minutes, 15 minutes). */
const PER_SOURCE = loadConfig({}).attemptsPerSource;
const refused = { status: 401, body: INVALID_CLIENT, retryAfter: null };
const blocked = { status: 429, body: TOO_MANY, retryAfter: String(PER_SOURCE.blockSeconds) };

// A trust list that does not hold 127.0.0.1 is no trust for these requests: the header is ignored as when
// the setting is unset. The second one also shows that every kind of entry the settings accept is one
// Fastify's trustProxy (proxy-addr) takes: the server starts with it.
describe.each([
  ['unset', {}],
  [
    'a list without the proxy the requests come from',
    {
      TESSERA_TRUST_PROXY:
        '10.0.0.0/8, 192.0.2.7, fd00::/8, ::ffff:10.0.0.0/104, fe80::1%eth0, linklocal, uniquelocal',
    },
  ],
])('TESSERA_TRUST_PROXY %s: X-Forwarded-For is ignored', (_name, env: Record<string, string>) => {
  let t: TestServer;
  let client: TestClient;
  beforeAll(async () => {
    ({ t, client } = await startWithClient(API, env));
    // A first token puts the client in the server's memory, where INTERFACE.md lets its exact secret
    // through even from a blocked address.
    expect((await own(t, client, '192.0.2.1')).status).toBe(200);
  });
  afterAll(async () => t?.close());

  it(`${PER_SOURCE.failures} failures under as many X-Forwarded-For addresses block 127.0.0.1, whatever the header says next`, async () => {
    for (let i = 0; i < PER_SOURCE.failures; i++) {
      expect(summary(await guess(t, `198.51.100.${i}`)), `failure ${i + 1}`).toEqual(refused);
    }
    // Counting is not on the answer's path: the block may land a moment after the last failure's answer.
    await sleep(100);
    expect(summary(await guess(t, '203.0.113.1'))).toEqual(blocked);
    expect(summary(await guess(t))).toEqual(blocked);
    expect(summary(await own(t, client, '203.0.113.2', 'wrong'))).toEqual(blocked);
    // A client's exact secret is never blocked (INTERFACE.md: a blocked caller never locks out a client).
    expect((await own(t, client, '203.0.113.3')).status).toBe(200);
  });
});

describe.each([['loopback'], ['127.0.0.1'], ['127.0.0.0/8, ::1']])(
  'TESSERA_TRUST_PROXY=%s: the address the proxy forwards is the one counted',
  (trust) => {
    let t: TestServer;
    let client: TestClient;
    beforeAll(async () => {
      ({ t, client } = await startWithClient(API, { TESSERA_TRUST_PROXY: trust }));
      // A first token puts the client in the server's memory, where INTERFACE.md lets its exact secret
      // through even from a blocked address.
      expect((await own(t, client, '192.0.2.1')).status).toBe(200);
    });
    afterAll(async () => t?.close());

    it(`${PER_SOURCE.failures} failures forwarded for one address block that address, and no other`, async () => {
      for (let i = 0; i < PER_SOURCE.failures; i++) {
        expect(summary(await guess(t, '198.51.100.7')), `failure ${i + 1}`).toEqual(refused);
      }
      await sleep(100);
      expect(summary(await guess(t, '198.51.100.7'))).toEqual(blocked);
      expect(summary(await own(t, client, '198.51.100.7', 'wrong'))).toEqual(blocked);
      expect((await own(t, client, '198.51.100.7')).status).toBe(200);
      // Another forwarded address, and the proxy itself (no header), are not blocked.
      expect(summary(await guess(t, '198.51.100.8'))).toEqual(refused);
      expect(summary(await guess(t))).toEqual(refused);
    });

    it('what the client wrote in front of the proxy’s entry does not count: the rightmost untrusted address does', async () => {
      // A proxy appends the address it saw; anything left of it the client may have made up.
      for (let i = 0; i < PER_SOURCE.failures; i++) {
        expect(summary(await guess(t, `10.9.${i}.1, 198.51.100.20`)), `failure ${i + 1}`).toEqual(refused);
      }
      await sleep(100);
      expect(summary(await guess(t, '192.0.2.99, 198.51.100.20'))).toEqual(blocked);
      expect(summary(await guess(t, '198.51.100.20'))).toEqual(blocked);
      expect(summary(await guess(t, '198.51.100.20, 198.51.100.21'))).toEqual(refused);
    });
  },
);

describe('tessera serve with a TESSERA_TRUST_PROXY it cannot take', () => {
  it.each([
    ['true', 'TESSERA_TRUST_PROXY must list the proxies (addresses or CIDR ranges), not "true"'],
    [
      '10.0.0.0/33',
      'TESSERA_TRUST_PROXY: "10.0.0.0/33" is not an address, a CIDR range, loopback, linklocal or uniquelocal',
    ],
  ])('%s: exits 2 with the reason before it listens', async (value, message) => {
    const dir = tempDir();
    try {
      const port = await freePort();
      const serve = spawnServe(
        tesseraEnv({
          TESSERA_DATA_DIR: dir,
          TESSERA_PORT: String(port),
          TESSERA_HOST: '127.0.0.1',
          TESSERA_TRUST_PROXY: value,
        }),
      );
      const exit = await exitWithin(serve, 15_000);
      if (!exit) await serve.stop('SIGKILL');
      expect(exit).toEqual({ code: 2, signal: null });
      expect(serve.stderr()).toBe(`tessera: ${message}\n`);
      expect(serve.logs).toEqual([]);
      expect(readdirSync(dir)).toEqual([]); // nothing made: no store, no master key
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
