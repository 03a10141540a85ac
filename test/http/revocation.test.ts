/**
 * Revocation (RFC 7009) and introspection (RFC 7662) on a real server (INTERFACE.md, "Revocation and
 * introspection"): real clients (oauth4webapi, openid-client) unchanged, and every rule with its exact status,
 * headers and body: what is active and how it is answered, each thing that makes a token inactive, who may ask,
 * client authentication and its limits as at the token endpoint, revoke-tokens to the second, disabling and
 * deleting, and no store operation per introspection.
 */
import { decodeJwt, exportJWK, generateKeyPair, SignJWT } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWT_BEARER } from '../../src/domain/client-auth/index.js';
import { adminAudienceUrl } from '../../src/management/builtin.js';
import { EVERY_SCOPE } from '../../src/management/context.js';
import { audiences, clients, grants, type ManagementContext } from '../../src/management/index.js';
import { adminCall } from '../helpers/admin.js';
import { testClock } from '../helpers/clock.js';
import { tokenParams } from '../helpers/provision.js';
import { basic, postToken, startTestServer, type TestServer } from '../helpers/server.js';

const API = 'https://api.example.com';
const INACTIVE = '{"active":false}';
const INVALID_CLIENT = { error: 'invalid_client', error_description: 'client authentication failed' };
const CHALLENGE = 'Basic realm="tessera"';

interface Caller {
  id: string;
  secret: string;
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers, checked member by member
  body: any;
}

let t: TestServer;
let ctx: ManagementContext;
/** The server's clock: the wall clock, or a moment a test holds it at. */
const wall = testClock();
let held: number | undefined;
const now = () => held ?? wall.now();

let app: Caller;
let other: Caller;
let bare: Caller;
let rs: Caller;
let ops: Caller;

async function newClient(input: Parameters<typeof clients.createClient>[1]): Promise<Caller> {
  const { client: created, secret } = await clients.createClient(ctx, input);
  await t.sync();
  return { id: created.id, secret: secret! };
}

async function post(path: string, params: Record<string, string>, headers: Record<string, string> = {}) {
  const response = await fetch(t.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(params).toString(),
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    body: text === '' ? undefined : (JSON.parse(text) as unknown),
  } as Answer;
}

const introspect = (token: string, as: Caller = rs) =>
  post('/oauth/introspect', { token }, { authorization: basic(as.id, as.secret) });
const revoke = (as: Caller, token: string, extra: Record<string, string> = {}) =>
  post('/oauth/revoke', { token, ...extra }, { authorization: basic(as.id, as.secret) });

async function tokenOf(c: Caller, audience = API): Promise<string> {
  const answer = await postToken(t.url, tokenParams(c.id, c.secret, audience));
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.access_token as string;
}

async function expectActive(token: string): Promise<void> {
  const answer = await introspect(token);
  expect(answer.status).toBe(200);
  expect(answer.body.active, answer.text).toBe(true);
}

async function expectInactive(token: string): Promise<void> {
  const answer = await introspect(token);
  expect({ status: answer.status, text: answer.text }).toEqual({ status: 200, text: INACTIVE });
}

function expectNoStore(headers: Headers): void {
  expect(headers.get('cache-control')).toBe('no-store');
  expect(headers.get('pragma')).toBe('no-cache');
}

/** Holds the server's clock at `at` (ms) while `run` runs. */
async function at<T>(ms: number, run: () => Promise<T>): Promise<T> {
  held = ms;
  try {
    return await run();
  } finally {
    held = undefined;
  }
}

beforeAll(async () => {
  // Refusals are many here, from one address: the failed-attempt limits have a test and a server of their own.
  t = await startTestServer(
    { TESSERA_ATTEMPTS_SOURCE_MAX: '100000', TESSERA_ATTEMPTS_CLIENT_MAX: '100000' },
    undefined,
    { now },
  );
  ctx = { store: t.server.runtime.store, config: t.config, actor: 'cli:test', holds: EVERY_SCOPE, now };
  await audiences.addAudience(ctx, {
    url: API,
    scopes: [{ name: 'orders:read' }, { name: 'orders:write' }],
  });
  app = await newClient({ name: 'app', grants: [API], scopes: { [API]: ['orders:write', 'orders:read'] } });
  other = await newClient({ name: 'other', grants: [API], scopes: { [API]: ['orders:read'] } });
  bare = await newClient({ name: 'bare', grants: [API] });
  // A resource server: a client whose only admin grant is tokens:introspect (INTERFACE.md).
  rs = await newClient({ name: 'orders api', adminScopes: ['tokens:introspect'] });
  ops = await newClient({ name: 'ops', adminScopes: ['clients:read', 'clients:write'] });
}, 60_000);

afterAll(async () => {
  await t?.close();
});

describe('discovery', () => {
  it('lists both endpoints with the token endpoint’s client authentication methods', async () => {
    const metadata = (await (
      await fetch(`${t.url}/.well-known/oauth-authorization-server`)
    ).json()) as Record<string, unknown>;
    expect(metadata).toMatchObject({
      revocation_endpoint: `${t.url}/oauth/revoke`,
      introspection_endpoint: `${t.url}/oauth/introspect`,
      revocation_endpoint_auth_methods_supported: metadata.token_endpoint_auth_methods_supported,
      introspection_endpoint_auth_methods_supported: metadata.token_endpoint_auth_methods_supported,
      revocation_endpoint_auth_signing_alg_values_supported:
        metadata.token_endpoint_auth_signing_alg_values_supported,
      introspection_endpoint_auth_signing_alg_values_supported:
        metadata.token_endpoint_auth_signing_alg_values_supported,
    });
  });
});

describe('POST /oauth/introspect', () => {
  it('an active token: exactly its claims in RFC 7662’s order, as JSON not to be stored', async () => {
    const token = await tokenOf(app);
    const { iat, exp, jti } = decodeJwt(token);
    const answer = await introspect(token);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expectNoStore(answer.headers);
    expect(answer.text).toBe(
      JSON.stringify({
        active: true,
        scope: 'orders:read orders:write',
        client_id: app.id,
        sub: app.id,
        aud: API,
        iss: t.url,
        exp,
        iat,
        jti,
        token_type: 'Bearer',
      }),
    );
  });

  it('a token without scopes has no scope member; nbf and cnf are answered when a token has them', async () => {
    const token = await tokenOf(bare);
    expect(Object.keys((await introspect(token)).body)).toEqual([
      'active',
      'client_id',
      'sub',
      'aud',
      'iss',
      'exp',
      'iat',
      'jti',
      'token_type',
    ]);
    // A DPoP-bound token (RFC 9449 §6: cnf.jkt), as the DPoP step will sign it.
    const iat = Math.floor(now() / 1000);
    const claims = {
      iss: t.url,
      sub: bare.id,
      aud: API,
      client_id: bare.id,
      iat,
      nbf: iat,
      exp: iat + 60,
      jti: 'bound-1',
      cnf: { jkt: '0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I' },
    };
    const bound = await t.server.runtime.keyring.sign(claims, 'ES256');
    expect((await introspect(bound)).text).toBe(
      JSON.stringify({
        active: true,
        client_id: bare.id,
        sub: bare.id,
        aud: API,
        iss: t.url,
        exp: iat + 60,
        iat,
        nbf: iat,
        jti: 'bound-1',
        token_type: 'DPoP',
        cnf: claims.cnf,
      }),
    );
  });

  it('answers exactly {"active":false} for what is not an active token of this server', async () => {
    const token = await tokenOf(app);
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const sign = (claims: Record<string, unknown>) => t.server.runtime.keyring.sign(claims, 'ES256');
    const iat = Math.floor(now() / 1000);
    const base = { sub: app.id, aud: API, client_id: app.id, iat, exp: iat + 60, jti: 'x' };
    // The same kid and claims, signed by a key that is not this server's.
    const { privateKey } = await generateKeyPair('ES256');
    const forged = await new SignJWT(decodeJwt(token))
      .setProtectedHeader(JSON.parse(Buffer.from(header, 'base64url').toString()) as { alg: string })
      .sign(privateKey);
    const none = `${Buffer.from('{"alg":"none","typ":"at+jwt"}').toString('base64url')}.${payload}.`;
    const inactive = [
      'not a token',
      `${header}.${payload}`,
      `${header}.${payload}.${signature.slice(0, -4)}AAAA`,
      forged,
      none,
      await sign({ ...base, iss: 'https://another.example.com' }),
      await sign({ ...base, iss: t.url, exp: iat - 1 }),
      await sign({ ...base, iss: t.url, client_id: 'nobody', sub: 'nobody' }),
      await sign({ ...base, iss: t.url, client_id: undefined }),
    ];
    for (const presented of inactive) {
      const answer = await introspect(presented);
      expect({ status: answer.status, text: answer.text }, presented).toEqual({
        status: 200,
        text: INACTIVE,
      });
      expectNoStore(answer.headers);
    }
    await expectActive(token);
  });

  it('no clock leeway for its own tokens: active a millisecond before exp, inactive from exp', async () => {
    const short = await newClient({ name: 'short', grants: [API], tokenTtl: 60 });
    const token = await tokenOf(short);
    const { exp } = decodeJwt(token);
    await at(exp! * 1000 - 1, () => expectActive(token));
    await at(exp! * 1000, () => expectInactive(token));
  });

  it('the caller: a wrong, unknown or missing credential is 401 invalid_client with the Basic challenge', async () => {
    const token = await tokenOf(app);
    const refusals: [Record<string, string>, Record<string, string>][] = [
      [{ token }, { authorization: basic(rs.id, 'wrong-secret-wrong-secret-wrong-secret') }],
      [{ token }, { authorization: basic('nobody', rs.secret) }],
      [{ token }, {}],
      [{ token, client_id: rs.id }, {}],
      [{ token }, { authorization: 'Basic !!!' }],
      [{ token, client_id: rs.id, client_secret: 'wrong' }, {}],
    ];
    for (const [params, headers] of refusals) {
      const answer = await post('/oauth/introspect', params, headers);
      expect({ status: answer.status, body: answer.body }, JSON.stringify([params, headers])).toEqual({
        status: 401,
        body: INVALID_CLIENT,
      });
      expect(answer.headers.get('www-authenticate')).toBe(CHALLENGE);
      expectNoStore(answer.headers);
    }
  });

  it('a client without the admin scope tokens:introspect is 403, and so is one whose scope was taken away', async () => {
    const token = await tokenOf(app);
    const forbidden = {
      error: 'insufficient_scope',
      error_description: 'this client lacks the admin scope tokens:introspect',
    };
    for (const caller of [app, ops]) {
      const answer = await introspect(token, caller);
      expect({ status: answer.status, body: answer.body }).toEqual({ status: 403, body: forbidden });
      expectNoStore(answer.headers);
      expect(answer.headers.get('www-authenticate')).toBeNull();
    }
    const second = await newClient({ name: 'rs 2', adminScopes: ['tokens:introspect'] });
    expect((await introspect(token, second)).body.active).toBe(true);
    await grants.setGrantScopes(ctx, second.id, adminAudienceUrl(t.config), []);
    await t.sync();
    expect((await introspect(token, second)).body).toEqual(forbidden);
  });

  it('every client authentication method; either body encoding; token required; POST only', async () => {
    const token = await tokenOf(app);
    const post1 = await post('/oauth/introspect', { token, client_id: rs.id, client_secret: rs.secret });
    expect(post1.body.active).toBe(true);
    const json = await fetch(`${t.url}/oauth/introspect`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: basic(rs.id, rs.secret) },
      body: JSON.stringify({ token }),
    });
    expect(((await json.json()) as { active: boolean }).active).toBe(true);
    const missing = await post('/oauth/introspect', {}, { authorization: basic(rs.id, rs.secret) });
    expect({ status: missing.status, body: missing.body }).toEqual({
      status: 400,
      body: { error: 'invalid_request', error_description: 'token is required' },
    });
    const got = await fetch(`${t.url}/oauth/introspect?token=${token}`);
    expect(got.status).toBe(405);
    expect(got.headers.get('allow')).toBe('POST');
  });

  it('answers from memory: no store operation per call', async () => {
    const token = await tokenOf(app);
    const revoked = await tokenOf(other);
    expect((await revoke(other, revoked)).status).toBe(200);
    // The caller is in the cache once it has called.
    await expectActive(token);
    const before = await storeOperations();
    // Not vacuous: the metrics count the lookups of the clients this server has read so far.
    expect(before['findClients ok']).toBeGreaterThan(0);
    for (let i = 0; i < 50; i++) {
      expect((await introspect(token)).body.active).toBe(true);
      expect((await introspect(revoked)).text).toBe(INACTIVE);
      expect((await introspect('junk')).text).toBe(INACTIVE);
    }
    expect(await storeOperations()).toEqual(before);
  });
});

/**
 * The store operations the server made so far, by operation (its metrics), but those of its timers: the change
 * feed's poll, the audit trail's writer, secrets' last-used times (written at most once a minute, in batches).
 */
async function storeOperations(): Promise<Record<string, number>> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const counts: Record<string, number> = {};
  const TIMERS =
    /^(changesSince|latestChange|pruneChanges|appendAuditEvents|markSecretsUsed|spoolPosition|forgetSpoolSegments|prune\w+)$/;
  for (const match of text.matchAll(
    /^tessera_store_operation_duration_seconds_count\{operation="(\w+)",outcome="(\w+)"\} (\d+)$/gm,
  ))
    if (!TIMERS.test(match[1]!)) counts[`${match[1]} ${match[2]}`] = Number(match[3]);
  return counts;
}

describe('POST /oauth/revoke', () => {
  it("revokes the caller's token: 200, no body, not stored; inactive at introspection and at the admin API", async () => {
    const token = await tokenOf(app);
    const answer = await revoke(app, token);
    expect({ status: answer.status, text: answer.text }).toEqual({ status: 200, text: '' });
    expect(answer.headers.get('content-length')).toBe('0');
    expect(answer.headers.get('content-type')).toBeNull();
    expectNoStore(answer.headers);
    await expectInactive(token);

    // An admin token revoked is refused by the admin API too.
    const opsToken = await tokenOf(ops, adminAudienceUrl(t.config));
    expect((await adminCall(t, { token: opsToken }, 'GET', '/clients?limit=1')).status).toBe(200);
    expect((await revoke(ops, opsToken)).status).toBe(200);
    const refused = await adminCall(t, { token: opsToken }, 'GET', '/clients?limit=1');
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toBe(
      'Bearer error="invalid_token", error_description="the access token has been revoked"',
    );

    const { jti, exp } = decodeJwt(token);
    const [event] = await t.server.runtime.store.queryAuditEvents({
      types: ['token.revoked'],
      clientId: app.id,
      limit: 10,
    });
    expect(event).toMatchObject({
      type: 'token.revoked',
      actor: `client:${app.id}`,
      target: jti,
      clientId: app.id,
      source: '127.0.0.1',
      changes: { exp: new Date(exp! * 1000).toISOString() },
    });
  });

  it('token_type_hint: access_token or an unknown hint revokes; refresh_token is 400 unsupported_token_type, nothing revoked', async () => {
    for (const hint of ['access_token', 'jwt']) {
      const token = await tokenOf(app);
      expect((await revoke(app, token, { token_type_hint: hint })).status).toBe(200);
      await expectInactive(token);
    }
    const token = await tokenOf(app);
    for (const presented of [token, 'not a token']) {
      const answer = await revoke(app, presented, { token_type_hint: 'refresh_token' });
      expect({ status: answer.status, body: answer.body }).toEqual({
        status: 400,
        body: {
          error: 'unsupported_token_type',
          error_description: 'this server issues and revokes access tokens only',
        },
      });
      expectNoStore(answer.headers);
    }
    await expectActive(token);
  });

  it("200 and nothing revoked: not a token, expired, another client's (which stays active), revoked already", async () => {
    const mine = await tokenOf(app);
    const theirs = await tokenOf(other);
    const events = async () =>
      (await t.server.runtime.store.queryAuditEvents({ types: ['token.revoked'], limit: 1000 })).length;
    const before = await events();
    for (const presented of ['not a token', theirs, mine.slice(0, -2) + 'AA']) {
      const answer = await revoke(app, presented);
      expect({ status: answer.status, text: answer.text }).toEqual({ status: 200, text: '' });
    }
    await expectActive(theirs);
    await expectActive(mine);
    expect(await events()).toBe(before);
    expect((await revoke(app, mine)).status).toBe(200);
    expect((await revoke(app, mine)).status).toBe(200);
    expect(await events()).toBe(before + 1);
    const short = await newClient({ name: 'short', grants: [API], tokenTtl: 60 });
    const expiring = await tokenOf(short);
    const { exp } = decodeJwt(expiring);
    expect((await at(exp! * 1000, () => revoke(short, expiring))).status).toBe(200);
    expect(await events()).toBe(before + 1);
  });

  it('client authentication exactly as at the token endpoint; token required', async () => {
    const token = await tokenOf(app);
    for (const headers of [
      { authorization: basic(app.id, 'wrong-secret-wrong-secret-wrong-secret') },
      { authorization: basic('nobody', app.secret) },
      { authorization: 'Basic !!!' },
    ]) {
      const answer = await post('/oauth/revoke', { token }, headers);
      expect({ status: answer.status, body: answer.body }).toEqual({ status: 401, body: INVALID_CLIENT });
      expect(answer.headers.get('www-authenticate')).toBe(CHALLENGE);
    }
    const cases: [Record<string, string>, Record<string, string>, string][] = [
      [{ token }, {}, 'client_id is required'],
      [{ token, client_id: app.id }, {}, 'client_secret is required'],
      [
        { token, client_id: app.id, client_secret: app.secret },
        { authorization: basic(app.id, app.secret) },
        'use one client authentication method: HTTP Basic or client_secret in the body, not both',
      ],
      [{}, { authorization: basic(app.id, app.secret) }, 'token is required'],
    ];
    for (const [params, headers, description] of cases) {
      const answer = await post('/oauth/revoke', params, headers);
      expect({ status: answer.status, body: answer.body }).toEqual({
        status: 400,
        body: { error: 'invalid_request', error_description: description },
      });
    }
    await expectActive(token);
    const got = await fetch(`${t.url}/oauth/revoke`);
    expect(got.status).toBe(405);
    expect(got.headers.get('allow')).toBe('POST');
  });
});

describe('real clients, unchanged', () => {
  const insecure = { [oauth.allowInsecureRequests]: true } as const;

  it('oauth4webapi: introspectionRequest and revocationRequest with a secret and with private_key_jwt', async () => {
    const issuer = new URL(t.url);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
    expect(as.revocation_endpoint).toBe(`${t.url}/oauth/revoke`);
    const token = await tokenOf(app);
    const introspected = await oauth.processIntrospectionResponse(
      as,
      { client_id: rs.id },
      await oauth.introspectionRequest(
        as,
        { client_id: rs.id },
        oauth.ClientSecretBasic(rs.secret),
        token,
        insecure,
      ),
    );
    expect(introspected).toMatchObject({
      active: true,
      client_id: app.id,
      scope: 'orders:read orders:write',
    });
    await oauth.processRevocationResponse(
      await oauth.revocationRequest(as, { client_id: app.id }, oauth.ClientSecretPost(app.secret), token, {
        ...insecure,
        additionalParameters: { token_type_hint: 'access_token' },
      }),
    );
    const after = await oauth.processIntrospectionResponse(
      as,
      { client_id: rs.id },
      await oauth.introspectionRequest(
        as,
        { client_id: rs.id },
        oauth.ClientSecretPost(rs.secret),
        token,
        insecure,
      ),
    );
    expect(after).toEqual({ active: false });

    // A private_key_jwt client revokes its own token with an assertion (aud: the issuer, as oauth4webapi makes it).
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'o4w', alg: 'ES256' };
    const keyed = await clients.createClient(ctx, {
      name: 'keyed',
      grants: [API],
      authMethod: 'private_key_jwt',
      jwks: { keys: [jwk] },
    });
    await t.sync();
    const auth = oauth.PrivateKeyJwt({ key: privateKey, kid: 'o4w' });
    const issued = await oauth.processClientCredentialsResponse(
      as,
      { client_id: keyed.client.id },
      await oauth.clientCredentialsGrantRequest(
        as,
        { client_id: keyed.client.id },
        auth,
        new URLSearchParams({ audience: API }),
        insecure,
      ),
    );
    await expectActive(issued.access_token);
    await oauth.processRevocationResponse(
      await oauth.revocationRequest(as, { client_id: keyed.client.id }, auth, issued.access_token, insecure),
    );
    await expectInactive(issued.access_token);
    // The same assertion twice: a replay, refused at revocation as at the token endpoint.
    const assertion = await new SignJWT({ jti: 'once' })
      .setProtectedHeader({ alg: 'ES256', kid: 'o4w' })
      .setIssuer(keyed.client.id)
      .setSubject(keyed.client.id)
      .setAudience(t.url)
      .setIssuedAt()
      .setExpirationTime('1m')
      .sign(privateKey);
    const params = {
      token: 'x',
      client_id: keyed.client.id,
      client_assertion_type: JWT_BEARER,
      client_assertion: assertion,
    };
    expect((await post('/oauth/revoke', params)).status).toBe(200);
    const replayed = await post('/oauth/revoke', params);
    expect({ status: replayed.status, body: replayed.body }).toEqual({ status: 401, body: INVALID_CLIENT });
  });

  it('openid-client: tokenIntrospection and tokenRevocation', async () => {
    const token = await tokenOf(app);
    const asRs = await client.discovery(
      new URL(t.url),
      rs.id,
      rs.secret,
      client.ClientSecretBasic(rs.secret),
      {
        execute: [client.allowInsecureRequests],
      },
    );
    const introspected = await client.tokenIntrospection(asRs, token);
    expect(introspected).toMatchObject({
      active: true,
      client_id: app.id,
      sub: app.id,
      aud: API,
      iss: t.url,
    });
    const asApp = await client.discovery(
      new URL(t.url),
      app.id,
      app.secret,
      client.ClientSecretPost(app.secret),
      {
        execute: [client.allowInsecureRequests],
      },
    );
    await client.tokenRevocation(asApp, token);
    expect(await client.tokenIntrospection(asRs, token)).toEqual({ active: false });
  });
});

describe("ending a client's tokens at once", () => {
  it('revoke-tokens: a token issued at or before that second is inactive, one issued in a later second is not', async () => {
    const second = Math.floor(now() / 1000) + 2;
    const before = await at(second * 1000 - 500, () => tokenOf(app));
    const sameSecond = await at(second * 1000 + 100, () => tokenOf(app));
    const revoked = await at(second * 1000 + 200, async () => {
      const caller = await tokenOf(ops, adminAudienceUrl(t.config));
      return adminCall(t, { token: caller }, 'POST', `/clients/${app.id}/revoke-tokens`);
    });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toEqual({ revoked_before: new Date(second * 1000 + 200).toISOString() });
    await t.sync();
    const inTheSameSecond = await at(second * 1000 + 900, () => tokenOf(app));
    const later = await at((second + 1) * 1000, () => tokenOf(app));
    await at((second + 1) * 1000, async () => {
      await expectInactive(before);
      await expectInactive(sameSecond);
      await expectInactive(inTheSameSecond);
      await expectActive(later);
    });
    // The other clients' tokens are not touched.
    await expectActive(await tokenOf(other));
  });

  it('disabled: its tokens inactive; enabled again: still inactive, new ones active; deleted: inactive', async () => {
    const svc = await newClient({ name: 'svc', grants: [API] });
    const old = await tokenOf(svc);
    await expectActive(old);
    await clients.setEnabled(ctx, svc.id, false);
    await t.sync();
    await expectInactive(old);
    // A second later, enabled again: the old token stays inactive; a new one is active.
    await at(now() + 1000, async () => {
      await clients.setEnabled(ctx, svc.id, true);
      await t.sync();
      const fresh = await tokenOf(svc);
      await expectInactive(old);
      await expectActive(fresh);
      await clients.deleteClient(ctx, svc.id);
      await t.sync();
      await expectInactive(fresh);
    });
  });
});

describe('the failed-attempt limits, shared with the token endpoint', () => {
  let limited: TestServer;
  afterAll(async () => {
    await limited?.close();
  });

  it('failures at revoke count with those at the token endpoint; a blocked caller with the exact credential still gets through', async () => {
    limited = await startTestServer({ TESSERA_ATTEMPTS_CLIENT_MAX: '3' });
    await limited.addAudience(API);
    const c = await limited.createClient([API]);
    const wrong = basic(c.id, 'wrong-secret-wrong-secret-wrong-secret');
    const send = (path: string, authorization: string, params: Record<string, string>) =>
      fetch(limited.url + path, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization },
        body: new URLSearchParams(params).toString(),
      });
    for (let i = 0; i < 3; i++) expect((await send('/oauth/revoke', wrong, { token: 'x' })).status).toBe(401);
    for (const path of ['/oauth/revoke', '/oauth/introspect', '/oauth/token']) {
      const blocked = await send(path, wrong, {
        token: 'x',
        grant_type: 'client_credentials',
        audience: API,
      });
      expect(blocked.status, path).toBe(429);
      expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await blocked.json()).toEqual({
        error: 'invalid_request',
        error_description: 'too many failed attempts; try again later',
      });
    }
    const right = basic(c.id, c.secret);
    const issued = await send('/oauth/token', right, { grant_type: 'client_credentials', audience: API });
    expect(issued.status).toBe(200);
    const { access_token } = (await issued.json()) as { access_token: string };
    expect((await send('/oauth/revoke', right, { token: access_token })).status).toBe(200);
  });
});
