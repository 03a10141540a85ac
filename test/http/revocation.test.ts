/**
 * Revocation (RFC 7009) on a real server (INTERFACE.md, "Revocation and introspection"): every rule with its exact
 * status, headers and body; real clients (oauth4webapi, openid-client) unchanged for both endpoints; revoke-tokens
 * to the second, disabling and deleting; client authentication and its limits as at the token endpoint.
 */
import { decodeJwt, exportJWK, generateKeyPair, SignJWT } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { afterAll, describe, expect, it } from 'vitest';
import { JWT_BEARER } from '../../src/domain/client-auth/index.js';
import { adminAudienceUrl } from '../../src/management/builtin.js';
import { audiences, clients } from '../../src/management/index.js';
import { tokenParams } from '../helpers/provision.js';
import { adminCall } from '../helpers/admin.js';
import { managementOf } from '../helpers/management.js';
import { basic, postToken, startTestServer, type TestServer } from '../helpers/server.js';
import {
  API,
  app,
  at,
  CHALLENGE,
  ctx,
  expectActive,
  expectInactive,
  expectNoStore,
  INACTIVE,
  INVALID_CLIENT,
  newClient,
  now,
  ops,
  other,
  post,
  revoke,
  rs,
  setUpServer,
  t,
  tokenOf,
} from '../helpers/revocation.js';

setUpServer();

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
      'Bearer error="invalid_token", error_description="the access token has been revoked", DPoP algs="ES256 ES384 RS256 PS256 EdDSA Ed25519"',
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

describe('a change made through the admin API is in effect at that instance when its answer arrives', () => {
  // The feed is read every 10 s here: only the admin API's own catch-up can make these changes seen in time.
  let slow: TestServer;
  let slowCtx: typeof ctx;
  const make = async (input: Parameters<typeof clients.createClient>[1]) => {
    const { client: created, secret } = await clients.createClient(slowCtx, input);
    return { id: created.id, secret: secret! };
  };
  const tokenAt = async (as: { id: string; secret: string }, audience = API) => {
    const answer = await postToken(slow.url, tokenParams(as.id, as.secret, audience));
    return { status: answer.status, token: answer.body.access_token as string, body: answer.body };
  };

  afterAll(() => slow?.close());

  it('revoke-tokens, then an introspection at once: inactive; a client deleted: its secret refused at once', async () => {
    slow = await startTestServer({ TESSERA_CHANGE_POLL_MS: '10000' });
    slowCtx = managementOf(slow);
    await audiences.addAudience(slowCtx, { url: API });
    const svc = await make({ name: 'svc', grants: [API] });
    const gone = await make({ name: 'gone', grants: [API] });
    const checker = await make({ name: 'rs', adminScopes: ['tokens:introspect'] });
    const operator = await make({ name: 'ops', adminScopes: ['clients:read', 'clients:write'] });
    await slow.sync();

    const { token } = await tokenAt(svc);
    const introspected = async () => {
      const response = await fetch(`${slow.url}/oauth/introspect`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: basic(checker.id, checker.secret),
        },
        body: new URLSearchParams({ token }).toString(),
      });
      return { status: response.status, text: await response.text() };
    };
    expect((await introspected()).text).toMatch(/^\{"active":true,/);
    expect((await tokenAt(gone)).status).toBe(200);

    const admin = { token: (await tokenAt(operator, adminAudienceUrl(slow.config))).token };
    // Back to back with the answers, no sync and no wait between them.
    expect((await adminCall(slow, admin, 'POST', `/clients/${svc.id}/revoke-tokens`)).status).toBe(200);
    expect(await introspected()).toEqual({ status: 200, text: INACTIVE });
    expect((await adminCall(slow, admin, 'DELETE', `/clients/${gone.id}`)).status).toBe(204);
    const refused = await tokenAt(gone);
    expect({ status: refused.status, body: refused.body }).toEqual({ status: 401, body: INVALID_CLIENT });
  });
});
