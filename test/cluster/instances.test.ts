import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedDatabaseEnv, startInstances } from '../helpers/instances.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { startServe, tesseraOk, type Serve } from '../helpers/process.js';
import { freePort, postToken } from '../helpers/server.js';
import { sleep, waitFor } from '../helpers/wait.js';

/**
 * Three Tessera processes on one fresh PostgreSQL database, as behind a load balancer: they sign with the
 * same keys, publish the same JWKS, and honour a change made anywhere within one second.
 */

const ISSUER = 'https://auth.tessera.test';
const API = 'https://api.example.com';
const OTHER = 'https://other.example.com';
const PUBLISH_AHEAD = 4; // seconds: a rotated key signs 4 s after it is published (JWKS max-age 2 s)

describe('three instances on one PostgreSQL', () => {
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let instances: Serve[] = [];
  let client: { id: string; secret: string };

  const token = (instance: Serve, extra: Record<string, string> = {}) =>
    postToken(instance.url, {
      grant_type: 'client_credentials',
      client_id: client.id,
      client_secret: client.secret,
      audience: API,
      ...extra,
    });
  const jwks = async (instance: Serve) =>
    (await (await fetch(`${instance.url}/.well-known/jwks.json`)).json()) as {
      keys: { kid: string; alg: string }[];
    };
  /** Time until `check` holds on every instance, each polled every 20 ms. */
  const everywhere = async (check: (instance: Serve) => Promise<boolean>, timeoutMs = 1000) =>
    Math.max(...(await Promise.all(instances.map((i) => waitFor(() => check(i), timeoutMs, 20)))));

  beforeAll(async () => {
    db = await createTestDatabase();
    env = sharedDatabaseEnv(db.url, ISSUER, {
      TESSERA_KEY_PUBLISH_AHEAD: String(PUBLISH_AHEAD),
      // `everywhere` asks every 20 ms while a change spreads: each 401 meanwhile (a client disabled, then enabled
      // again) is a failed attempt, and ten would block the address and client for the tests that follow.
      TESSERA_ATTEMPTS_SOURCE_MAX: '100000',
      TESSERA_ATTEMPTS_CLIENT_MAX: '100000',
    });
    // All three start at once on the empty database: migrations and first keys must not be done twice.
    instances = await startInstances(env, 3);
    await tesseraOk(env, 'audience', 'add', API);
    await tesseraOk(env, 'audience', 'add', OTHER);
    const created = await tesseraOk(env, 'client', 'create', '--name', 'svc', '--grant', API, '--json');
    client = { id: created.json.client_id, secret: created.json.client_secret };
    await everywhere(async (i) => (await token(i)).status === 200);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop('SIGKILL')));
    await db?.drop();
  });

  it('ran the migrations and made one key per algorithm, once', async () => {
    const keys = (await tesseraOk(env, 'keys', 'list', '--json')).json as { alg: string; status: string }[];
    expect(keys.map((k) => `${k.alg} ${k.status}`).sort()).toEqual([
      'ES256 active',
      'EdDSA active',
      'PS256 active',
      'RS256 active',
    ]);
  });

  it('every instance publishes the same JWKS', async () => {
    const [a, b, c] = await Promise.all(instances.map(jwks));
    expect(b).toEqual(a);
    expect(c).toEqual(a);
  });

  it('a token from A verifies with the JWKS fetched from B (and C)', async () => {
    const [a, b, c] = instances as [Serve, Serve, Serve];
    const answer = await token(a);
    expect(answer.status).toBe(200);
    for (const other of [b, c]) {
      const keySet = createRemoteJWKSet(new URL(`${other.url}/.well-known/jwks.json`));
      const { payload } = await jwtVerify(answer.body.access_token as string, keySet, {
        issuer: ISSUER,
        audience: API,
        typ: 'at+jwt',
      });
      expect(payload.client_id).toBe(client.id);
    }
  });

  it('a client disabled through the CLI is refused by every instance within one second, and enabled again', async () => {
    await tesseraOk(env, 'client', 'disable', client.id);
    expect(await everywhere(async (i) => (await token(i)).status === 401)).toBeLessThan(1000);
    await tesseraOk(env, 'client', 'enable', client.id);
    expect(await everywhere(async (i) => (await token(i)).status === 200)).toBeLessThan(1000);
  });

  it('a rotated secret: the old one is refused everywhere within one second, the new one works', async () => {
    const rotated = await tesseraOk(env, 'client', 'rotate-secret', client.id, '--json');
    const old = client.secret;
    client = { id: client.id, secret: rotated.json.client_secret };
    expect(
      await everywhere(
        async (i) =>
          (await token(i, { client_secret: old })).status === 401 && (await token(i)).status === 200,
      ),
    ).toBeLessThan(1000);
  });

  it('a removed grant and a removed audience are honoured everywhere within one second', async () => {
    await tesseraOk(env, 'grant', 'add', client.id, OTHER);
    expect(await everywhere(async (i) => (await token(i, { audience: OTHER })).status === 200)).toBeLessThan(
      1000,
    );
    await tesseraOk(env, 'grant', 'remove', client.id, OTHER);
    expect(
      await everywhere(async (i) => (await token(i, { audience: OTHER })).body.error === 'invalid_target'),
    ).toBeLessThan(1000);
    await tesseraOk(env, 'grant', 'add', client.id, OTHER);
    await everywhere(async (i) => (await token(i, { audience: OTHER })).status === 200);
    await tesseraOk(env, 'audience', 'remove', OTHER);
    expect(
      await everywhere(
        async (i) =>
          (await token(i, { audience: OTHER })).body.error_description ===
          'the requested audience is not registered',
      ),
    ).toBeLessThan(1000);
  });

  it('a deleted client is refused everywhere within one second', async () => {
    const temp = await tesseraOk(env, 'client', 'create', '--name', 'temp', '--grant', API, '--json');
    const body = { client_id: temp.json.client_id, client_secret: temp.json.client_secret };
    await everywhere(async (i) => (await token(i, body)).status === 200);
    await tesseraOk(env, 'client', 'delete', temp.json.client_id);
    expect(await everywhere(async (i) => (await token(i, body)).status === 401)).toBeLessThan(1000);
  });

  it('key rotation: published everywhere first, signing everywhere once due, earlier tokens still verify', async () => {
    const kidOf = (t: string) => decodeProtectedHeader(t).kid;
    const before = await token(instances[0]!);
    const oldKid = kidOf(before.body.access_token as string);

    const rotated = await tesseraOk(env, 'keys', 'rotate', '--alg', 'ES256', '--json');
    const next = rotated.json[0] as { kid: string; activates_at: string; retiring: string[] };
    expect(next.retiring).toEqual([oldKid]);
    const activatesAt = Date.parse(next.activates_at);

    // Within a second every instance publishes the next key, and still signs with the old one.
    expect(await everywhere(async (i) => (await jwks(i)).keys.some((k) => k.kid === next.kid))).toBeLessThan(
      1000,
    );
    expect(Date.now()).toBeLessThan(activatesAt);
    for (const i of instances) expect(kidOf((await token(i)).body.access_token as string)).toBe(oldKid);
    // The JWKS may be cached for half the publication lead: the key is known to caches before it signs.
    const cacheControl = (await fetch(`${instances[1]!.url}/.well-known/jwks.json`)).headers.get(
      'cache-control',
    );
    expect(cacheControl).toBe(`public, max-age=${PUBLISH_AHEAD / 2}`);

    // Once due, every instance signs with the new key (clocks of one machine: within the poll interval).
    await sleep(Math.max(0, activatesAt - Date.now()));
    expect(
      await everywhere(async (i) => kidOf((await token(i)).body.access_token as string) === next.kid),
    ).toBeLessThan(1000);

    // The token signed before the rotation still verifies against every instance's JWKS.
    for (const i of instances) {
      const keySet = createRemoteJWKSet(new URL(`${i.url}/.well-known/jwks.json`));
      await expect(
        jwtVerify(before.body.access_token as string, keySet, { issuer: ISSUER, audience: API }),
      ).resolves.toBeDefined();
      expect((await jwks(i)).keys.map((k) => k.kid)).toEqual(expect.arrayContaining([oldKid, next.kid]));
    }
    const keys = (await tesseraOk(env, 'keys', 'list', '--json')).json as { kid: string; status: string }[];
    expect(keys.find((k) => k.kid === oldKid)?.status).toBe('retired');
    expect(keys.find((k) => k.kid === next.kid)?.status).toBe('active');
  }, 20_000);

  it('an instance that starts later signs with the same active keys', async () => {
    const late = await startServe({ ...env, TESSERA_PORT: String(await freePort()) });
    try {
      expect(await jwks(late)).toEqual(await jwks(instances[0]!));
      const a = decodeProtectedHeader((await token(instances[0]!)).body.access_token as string).kid;
      const l = decodeProtectedHeader((await token(late)).body.access_token as string).kid;
      expect(l).toBe(a);
    } finally {
      await late.stop('SIGKILL');
    }
  });
});
