/**
 * Workload identity federation across instances (INTERFACE.md, "Workload identity federation"): two real
 * `tessera serve` processes on one PostgreSQL, without Redis and with it. A federated credential removed from a
 * client is refused by the other instance within a second (the change feed's `client` change), the client's
 * other credential still working; a `once` token used at one instance is refused at the other, and of the
 * same token sent to both at once exactly one is accepted; its jti is recorded under the client and the
 * issuer, in Redis when there is one, else in the store.
 *
 * The client is written to the store the instances share, as the management layer writes it (the admin API
 * and the CLI of federated credentials are other faces over the same write). The issuers' keys are inline (a
 * private Kubernetes cluster's way): no fetch is involved here.
 *
 * The instances load dist/, so `npm run build` must have run (`npm test` does).
 */
import { randomUUID } from 'node:crypto';
import {
  decodeJwt,
  exportJWK,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_LIFETIME,
  JWT_BEARER,
  newFederatedCredentialId,
  type FederatedCredential,
} from '../../src/domain/client-auth/index.js';
import { AssertionReplay, redisKeyOf } from '../../src/limits/replay.js';
import { openPostgresStore } from '../../src/store/postgres.js';
import type { Store } from '../../src/store/types.js';
import {
  complaints,
  startPostgresPair,
  stopPostgresPair,
  tokenEvents as tokenEventsOf,
  type PostgresPair,
} from '../helpers/instances.js';
import { writeKeyClient } from '../helpers/key-client.js';
import type { TestDatabase } from '../helpers/postgres.js';
import { tesseraOk, type Serve } from '../helpers/process.js';
import { testPrefix } from '../helpers/redis.js';
import { NO_BLOCKING, postToken } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const ISSUER = 'https://auth.tessera.test';
const API = 'https://api.example.com';
const REFUSED = { error: 'invalid_client', error_description: 'client authentication failed' };
const PROD = 'https://kubernetes.prod.acme.example';
const STAGING = 'https://kubernetes.staging.acme.example';
const SUBJECT = 'system:serviceaccount:billing:billing';
/** How many requests carry the same `once` token at once, to both instances. */
const AT_ONCE = 20;

interface Cluster {
  privateKey: CryptoKey;
  jwk: JWK;
}

/** A Kubernetes cluster's service-account signing key (RS256), published inline. */
async function cluster(kid: string): Promise<Cluster> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

function credential(issuer: string, keys: Cluster, once = false): FederatedCredential {
  const at = new Date().toISOString();
  return {
    id: newFederatedCredentialId(),
    name: `${issuer} billing`,
    issuer,
    jwks: { keys: [keys.jwk] },
    jwksUri: null,
    subject: SUBJECT,
    audience: ISSUER,
    claims: {},
    maxLifetime: DEFAULT_MAX_LIFETIME,
    once,
    createdAt: at,
    updatedAt: at,
  };
}

/** A projected service-account token of the cluster `issuer`, for Tessera. */
function projected(issuer: string, keys: Cluster, claims: JWTPayload = {}): Promise<string> {
  const iat = Math.floor(Date.now() / 1000);
  return new SignJWT({
    aud: [ISSUER],
    exp: iat + 600,
    iat,
    nbf: iat,
    iss: issuer,
    jti: randomUUID(),
    'kubernetes.io': { namespace: 'billing', serviceaccount: { name: 'billing', uid: randomUUID() } },
    sub: SUBJECT,
    ...claims,
  })
    .setProtectedHeader({ alg: 'RS256', kid: keys.jwk.kid! })
    .sign(keys.privateKey);
}

const request = (instance: Serve, clientId: string, jwt: string) =>
  postToken(instance.url, {
    grant_type: 'client_credentials',
    client_id: clientId,
    client_assertion_type: JWT_BEARER,
    client_assertion: jwt,
    audience: API,
  });

type Answer = Awaited<ReturnType<typeof request>>;

function expectIssued(answer: Answer, clientId: string): void {
  expect({ status: answer.status, body: answer.body }).toEqual({
    status: 200,
    body: { access_token: expect.any(String), token_type: 'Bearer', expires_in: 1800 },
  });
  expect(decodeJwt(answer.body.access_token as string)).toMatchObject({
    iss: ISSUER,
    sub: clientId,
    client_id: clientId,
    aud: API,
  });
}

function expectRefused(answer: Answer): void {
  expect({ status: answer.status, body: answer.body }).toEqual({ status: 401, body: REFUSED });
  expect(answer.headers.get('www-authenticate')).toBe('Basic realm="tessera"');
}

describe.each([
  { name: 'without Redis', redis: false },
  { name: 'with Redis', redis: true },
])('federation: two instances on one PostgreSQL, $name', ({ redis }) => {
  let pair: PostgresPair | undefined;
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let store: Store;
  let instances: Serve[] = [];
  const prefix = testPrefix();

  beforeAll(async () => {
    pair = await startPostgresPair(ISSUER, 'tessera-federation-', NO_BLOCKING, redis ? prefix : undefined);
    ({ db, env, instances } = pair);
    await tesseraOk(env, 'audience', 'add', API);
    store = openPostgresStore(db.url, { max: 2 });
  }, 90_000);

  afterAll(async () => {
    await stopPostgresPair(pair, store);
  });

  const federatedClient = (credentials: FederatedCredential[]): Promise<string> =>
    writeKeyClient(store, { name: 'billing', audiences: [API], federatedCredentials: credentials });

  /** The token events of `clientId` once there are `count` (the spools reach the store every second). */
  const tokenEvents = (clientId: string, count: number): Promise<string[]> =>
    tokenEventsOf(env, clientId, count);

  it('a credential removed is refused by the other instance within a second; the other credential still works', async () => {
    const [a, b] = instances as [Serve, Serve];
    const prod = await cluster('prod');
    const staging = await cluster('staging');
    const removed = credential(PROD, prod);
    const kept = credential(STAGING, staging);
    const id = await federatedClient([removed, kept]);
    // Both instances hold the client, with both credentials.
    const prodToken = await projected(PROD, prod);
    for (const instance of [a, b]) {
      expectIssued(await request(instance, id, prodToken), id);
      expectIssued(await request(instance, id, await projected(STAGING, staging)), id);
    }

    await store.updateClient(id, { federatedCredentials: [kept] });
    const started = Date.now();
    const refusedAt = await Promise.all(
      [a, b].map((instance) =>
        waitFor(async () => (await request(instance, id, prodToken)).status === 401, 1000, 20),
      ),
    );
    console.log(
      `${redis ? 'Redis' : 'no Redis'}: the removed credential refused at A after ${refusedAt[0]} ms, at B after ${refusedAt[1]} ms`,
    );
    expect(Date.now() - started).toBeLessThan(1500);
    for (const ms of refusedAt) expect(ms).toBeLessThan(1000);
    for (const instance of [a, b]) {
      expectRefused(await request(instance, id, prodToken));
      expectIssued(await request(instance, id, await projected(STAGING, staging)), id);
    }
    const events = await tokenEvents(id, 8);
    expect(events.filter((e) => e.startsWith('token.refused'))).toEqual(
      expect.arrayContaining(['token.refused: invalid_client: federated: issuer not trusted by this client']),
    );
    expect(new Set(events.filter((e) => e.startsWith('token.refused')))).toEqual(
      new Set(['token.refused: invalid_client: federated: issuer not trusted by this client']),
    );
    expect(events.filter((e) => e.startsWith('token.issued'))).toEqual(
      expect.arrayContaining([
        `token.issued: federated ${removed.id} sub ${SUBJECT}`,
        `token.issued: federated ${kept.id} sub ${SUBJECT}`,
      ]),
    );
    expect(complaints(instances)).toEqual([]);
  });

  it('a once token used at A is refused at B, and at A again; its jti kept under the client and the issuer', async () => {
    const [a, b] = instances as [Serve, Serve];
    const prod = await cluster('prod-once');
    const once = credential(PROD, prod, true);
    const id = await federatedClient([once]);
    const jti = `once-${randomUUID()}`;
    const jwt = await projected(PROD, prod, { jti });
    const exp = decodeJwt(jwt).exp!;
    expectIssued(await request(a, id, jwt), id);
    expectRefused(await request(b, id, jwt));
    expectRefused(await request(a, id, jwt));

    const key = AssertionReplay.idOf(`${id} ${PROD}`, jti);
    const until = (exp + 60) * 1000;
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ expires_at: string }>(
        'SELECT expires_at FROM assertion_jtis WHERE id = $1',
        [key],
      );
      if (redis) {
        expect(rows).toEqual([]);
        const ttl = await pair!.redisClient!.pttl(redisKeyOf(prefix, key));
        expect(ttl).toBeGreaterThan(until - Date.now() - 30_000);
        expect(ttl).toBeLessThanOrEqual(until - Date.now() + 1000);
      } else expect(rows.map((r) => Number(r.expires_at))).toEqual([until]);
    } finally {
      await client.end();
    }
    expect(await tokenEvents(id, 3)).toEqual(
      [
        `token.issued: federated ${once.id} sub ${SUBJECT}`,
        'token.refused: invalid_client: federated: token replayed',
        'token.refused: invalid_client: federated: token replayed',
      ].sort(),
    );
    expect(complaints(instances)).toEqual([]);
  });

  it(`a once token sent ${AT_ONCE} times at once to A and B: exactly one token`, async () => {
    const [a, b] = instances as [Serve, Serve];
    const prod = await cluster('prod-race');
    const id = await federatedClient([credential(PROD, prod, true)]);
    // Both instances hold the client first: the race is on the jti alone.
    for (const instance of [a, b]) expectIssued(await request(instance, id, await projected(PROD, prod)), id);
    const jwt = await projected(PROD, prod);
    const answers = await Promise.all(
      Array.from({ length: AT_ONCE }, (_, i) => request(i % 2 === 0 ? a : b, id, jwt)),
    );
    const issued = answers.filter((answer) => answer.status === 200);
    expect(issued, JSON.stringify(answers.map((answer) => answer.status))).toHaveLength(1);
    expectIssued(issued[0]!, id);
    for (const answer of answers) if (answer !== issued[0]) expectRefused(answer);
    expect(complaints(instances)).toEqual([]);
  });
});
