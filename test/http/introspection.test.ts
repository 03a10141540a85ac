/**
 * Introspection (RFC 7662) on a real server (INTERFACE.md, "Revocation and introspection"), with discovery: every
 * rule with its exact status, headers and body: what is active and how it is answered, each thing that makes a
 * token inactive, who may ask and how, and no store operation per call. Revocation, real clients and the ends of
 * a client's tokens are in revocation.test.ts.
 */
import { decodeJwt, generateKeyPair, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { adminAudienceUrl } from '../../src/management/builtin.js';
import { grants } from '../../src/management/index.js';
import { basic } from '../helpers/server.js';
import {
  API,
  app,
  at,
  bare,
  CHALLENGE,
  ctx,
  expectActive,
  expectInactive,
  expectNoStore,
  INACTIVE,
  INVALID_CLIENT,
  introspect,
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
