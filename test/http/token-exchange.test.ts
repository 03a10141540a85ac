/**
 * Token exchange (RFC 8693; INTERFACE.md, "Token exchange") end to end: a real server on a real socket, set up
 * through the management layer (grants with token_exchange, audiences with resource_server_client_ids), answers
 * checked with their exact status, headers and bodies, tokens verified with jose against the JWKS, introspected,
 * and exchanged by openid-client's genericGrantRequest.
 */
import {
  calculateJwkThumbprint,
  createRemoteJWKSet,
  decodeJwt,
  exportJWK,
  generateKeyPair,
  jwtVerify,
  SignJWT,
  type JWTPayload,
} from 'jose';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audiences, audit, clients, type ManagementContext } from '../../src/management/index.js';
import { managementOf } from '../helpers/management.js';
import { ACCESS_TOKEN, EXCHANGE, exchangeParams, issuedToken } from '../helpers/provision.js';
import { postToken, startTestServer, type TestServer } from '../helpers/server.js';

const JSON_TYPE = 'application/json; charset=utf-8';

// The caller calls FRONT (served by bravo); bravo calls MIDDLE (served by charlie); charlie calls BACK.
const FRONT = 'https://front.example.com';
const MIDDLE = 'https://middle.example.com';
const BACK = 'https://back.example.com';
const LOOP = 'https://loop.example.com'; // served by looper, which may exchange into it: chains of any length

let t: TestServer;
let ctx: ManagementContext;
interface Made {
  id: string;
  secret: string;
}
let caller: Made;
let bravo: Made;
let charlie: Made;
let xray: Made; // may exchange into MIDDLE, but serves no audience
let looper: Made;
let introspector: Made;

async function made(input: Parameters<typeof clients.createClient>[1]): Promise<Made> {
  const { client: record, secret } = await clients.createClient(ctx, input);
  return { id: record.id, secret: secret! };
}

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t, 'test');
  // The caller's tokens live an hour, so a token exchanged from one (1800 s by default) is never cut short by its
  // subject's exp when the exchange falls in the next second: the cap itself is tested in the domain tests.
  await audiences.addAudience(ctx, { url: FRONT, scopes: [{ name: 'front:read' }], tokenTtl: 3600 });
  await audiences.addAudience(ctx, {
    url: MIDDLE,
    scopes: [{ name: 'middle:read' }, { name: 'middle:write' }, { name: 'middle:admin' }],
  });
  await audiences.addAudience(ctx, { url: BACK, scopes: [{ name: 'back:read' }] });
  await audiences.addAudience(ctx, { url: LOOP });
  caller = await made({ name: 'caller', grants: [FRONT, LOOP], scopes: { [FRONT]: ['front:read'] } });
  bravo = await made({
    name: 'bravo',
    grants: [MIDDLE],
    scopes: { [MIDDLE]: ['middle:read', 'middle:write'] },
    grantClaims: { [MIDDLE]: { tenant: 'acme' } },
    grantTokenExchange: [MIDDLE],
  });
  charlie = await made({
    name: 'charlie',
    grants: [BACK],
    scopes: { [BACK]: ['back:read'] },
    grantTokenExchange: [BACK],
  });
  xray = await made({
    name: 'xray',
    grants: [MIDDLE],
    scopes: { [MIDDLE]: ['middle:read'] },
    grantTokenExchange: [MIDDLE],
  });
  looper = await made({ name: 'looper', grants: [LOOP], grantTokenExchange: [LOOP] });
  introspector = await made({ name: 'introspector', adminScopes: ['tokens:introspect'] });
  await audiences.updateAudience(ctx, FRONT, { resourceServerClientIds: [bravo.id] });
  await audiences.updateAudience(ctx, MIDDLE, { resourceServerClientIds: [charlie.id] });
  await audiences.updateAudience(ctx, LOOP, { resourceServerClientIds: [looper.id] });
  await t.sync();
});
afterAll(async () => {
  await t?.close();
});

/** A client credentials token. */
const tokenOf = (who: Made, audience: string): Promise<string> => issuedToken(t.url, who, audience);

/** A token exchange by `actor` of `subject` for `audience`, the answer with the headers a test cares about. */
async function exchange(
  actor: Made,
  subject: string,
  audience: string,
  extra: Record<string, string> = {},
  init: { headers?: Record<string, string>; json?: boolean } = {},
) {
  const r = await postToken(t.url, { ...exchangeParams(actor, subject, audience), ...extra }, init);
  return {
    status: r.status,
    body: r.body,
    headers: {
      'content-type': r.headers.get('content-type'),
      'cache-control': r.headers.get('cache-control'),
      pragma: r.headers.get('pragma'),
    },
  };
}

const NO_STORE = { 'content-type': JSON_TYPE, 'cache-control': 'no-store', pragma: 'no-cache' };
const refusal = (error: string, description: string) => ({
  status: 400,
  body: { error, error_description: description },
  headers: NO_STORE,
});
const INACTIVE_SUBJECT = refusal(
  'invalid_request',
  'subject_token is not an active access token of this server',
);

async function verified(token: string): Promise<JWTPayload> {
  const jwks = createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`));
  const { payload, protectedHeader } = await jwtVerify(token, jwks, { issuer: t.url, typ: 'at+jwt' });
  expect(protectedHeader.typ).toBe('at+jwt');
  return payload;
}

async function introspect(token: string): Promise<Record<string, unknown>> {
  const r = await fetch(`${t.url}/oauth/introspect`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token, client_id: introspector.id, client_secret: introspector.secret }),
  });
  expect(r.status).toBe(200);
  return (await r.json()) as Record<string, unknown>;
}

async function auditTrail(type: 'token.exchanged' | 'token.refused', clientId: string) {
  await t.server.runtime.audit.flush();
  const events = await ctx.store.queryAuditEvents({ types: [type], clientId, limit: 50 });
  return events.map((e) => ({ audience: e.audience, reason: e.reason })).reverse();
}

describe('token exchange over HTTP', () => {
  it('a chain of three services: the caller → bravo → charlie, act nested, each token verified by jose', async () => {
    const fromCaller = await tokenOf(caller, FRONT);

    const atMiddle = await exchange(bravo, fromCaller, MIDDLE);
    expect(atMiddle).toEqual({
      status: 200,
      body: {
        access_token: expect.any(String),
        issued_token_type: ACCESS_TOKEN,
        token_type: 'Bearer',
        expires_in: 1800,
        scope: 'middle:read middle:write',
      },
      headers: NO_STORE,
    });
    const first = atMiddle.body.access_token as string;
    const claims = await verified(first);
    expect(claims).toEqual({
      iss: t.url,
      sub: caller.id,
      aud: MIDDLE,
      client_id: bravo.id,
      iat: expect.any(Number),
      exp: (claims.iat as number) + 1800,
      jti: expect.any(String),
      scope: 'middle:read middle:write',
      act: { sub: bravo.id },
      tenant: 'acme',
    });
    const subject = decodeJwt(fromCaller);
    expect(subject.exp! - subject.iat!).toBe(3600);
    expect(claims.exp).toBeLessThanOrEqual(subject.exp!);

    const atBack = await exchange(charlie, first, BACK);
    expect(atBack).toEqual({
      status: 200,
      body: {
        access_token: expect.any(String),
        issued_token_type: ACCESS_TOKEN,
        token_type: 'Bearer',
        expires_in: expect.any(Number),
        scope: 'back:read',
      },
      headers: NO_STORE,
    });
    const second = await verified(atBack.body.access_token as string);
    expect(second).toMatchObject({
      sub: caller.id,
      aud: BACK,
      client_id: charlie.id,
      scope: 'back:read',
      act: { sub: charlie.id, act: { sub: bravo.id } },
    });
    expect(second.exp).toBeLessThanOrEqual(claims.exp!);
    expect(atBack.body.expires_in).toBe(second.exp! - second.iat!);

    // Introspection answers the exchanged token as any other (client_id the actor, sub the caller), with act.
    expect(await introspect(atBack.body.access_token as string)).toEqual({
      active: true,
      scope: 'back:read',
      client_id: charlie.id,
      sub: caller.id,
      aud: BACK,
      iss: t.url,
      exp: second.exp,
      iat: second.iat,
      jti: second.jti,
      token_type: 'Bearer',
      act: { sub: charlie.id, act: { sub: bravo.id } },
    });
    // The audit trail: the subject, the actor chain, the target.
    expect(await auditTrail('token.exchanged', bravo.id)).toContainEqual({
      audience: MIDDLE,
      reason: `sub ${caller.id} act ${bravo.id}`,
    });
    expect(await auditTrail('token.exchanged', charlie.id)).toContainEqual({
      audience: BACK,
      reason: `sub ${caller.id} act ${bravo.id}>${charlie.id}`,
    });
  });

  it("an exchange counts as an issued token: the console's per-minute counts, the audit trail's issued outcome", async () => {
    const fromCaller = await tokenOf(caller, FRONT);
    await t.server.runtime.audit.flush();
    const since = Date.now() - 120_000;
    const sum = async () => {
      await t.server.runtime.audit.flush();
      const counts = await ctx.store.tokenCounts(since, Date.now() + 60_000);
      return counts.reduce<[number, number]>((a, c) => [a[0] + c.issued, a[1] + c.refused], [0, 0]);
    };
    const before = await sum();
    const r = await exchange(bravo, fromCaller, MIDDLE);
    expect(r.status).toBe(200);
    expect(await sum()).toEqual([before[0] + 1, before[1]]);
    const issued = await audit.queryAudit(ctx, { outcome: 'issued', clientId: bravo.id });
    expect(issued[0]).toMatchObject({
      type: 'token.exchanged',
      clientId: bravo.id,
      audience: MIDDLE,
      jti: decodeJwt(r.body.access_token as string).jti,
      reason: `sub ${caller.id} act ${bravo.id}`,
    });
  });

  it('the same as JSON, with resource for the target and the ...:jwt subject_token_type', async () => {
    const fromCaller = await tokenOf(caller, FRONT);
    const r = await exchange(
      bravo,
      fromCaller,
      '',
      { resource: MIDDLE, subject_token_type: 'urn:ietf:params:oauth:token-type:jwt', scope: 'middle:read' },
      { json: true },
    );
    expect(r).toEqual({
      status: 200,
      body: {
        access_token: expect.any(String),
        issued_token_type: ACCESS_TOKEN,
        token_type: 'Bearer',
        expires_in: 1800,
        scope: 'middle:read',
      },
      headers: NO_STORE,
    });
  });

  it('a revoked subject token is refused', async () => {
    const fromCaller = await tokenOf(caller, FRONT);
    const revoked = await fetch(`${t.url}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: fromCaller, client_id: caller.id, client_secret: caller.secret }),
    });
    expect(revoked.status).toBe(200);
    expect(await exchange(bravo, fromCaller, MIDDLE)).toEqual(INACTIVE_SUBJECT);
    expect((await auditTrail('token.refused', bravo.id)).at(-1)).toEqual({
      audience: MIDDLE,
      reason: 'invalid_request: subject_token: revoked',
    });
    // A client the token was not meant for is not told that it is revoked.
    expect(await exchange(xray, fromCaller, MIDDLE)).toEqual(
      refusal('unauthorized_client', "this client is not a resource server of the subject_token's audience"),
    );
  });

  it('a caller disabled a moment ago: its token is refused, and so is a token exchanged for it earlier', async () => {
    const other = await made({ name: 'disabled-later', grants: [FRONT] });
    await t.sync();
    const fromOther = await tokenOf(other, FRONT);
    const held = await exchange(bravo, fromOther, MIDDLE);
    expect(held.status).toBe(200);
    const exchanged = held.body.access_token as string;

    await clients.setEnabled(ctx, other.id, false);
    await t.sync();
    expect(await exchange(bravo, fromOther, MIDDLE)).toEqual(INACTIVE_SUBJECT);
    // The token bravo holds for it: client_id bravo, sub the disabled caller. Never a token for it.
    expect(await exchange(charlie, exchanged, BACK)).toEqual(INACTIVE_SUBJECT);
    expect((await auditTrail('token.refused', charlie.id)).at(-1)).toEqual({
      audience: BACK,
      reason: 'invalid_request: subject_token: its subject client is disabled or deleted',
    });
    // Introspection says the same of it.
    expect(await introspect(exchanged)).toEqual({ active: false });
  });

  it('an actor that is not a resource server of the subject token’s audience is refused', async () => {
    const fromCaller = await tokenOf(caller, FRONT);
    expect(await exchange(xray, fromCaller, MIDDLE)).toEqual(
      refusal('unauthorized_client', "this client is not a resource server of the subject_token's audience"),
    );
    // charlie may exchange into BACK, but the caller's token for FRONT was never charlie's.
    expect(await exchange(charlie, fromCaller, BACK)).toEqual(
      refusal('unauthorized_client', "this client is not a resource server of the subject_token's audience"),
    );
  });

  it('scopes never wider than the actor’s grant; targets only its own, with exchange allowed', async () => {
    const fromCaller = await tokenOf(caller, FRONT);
    // middle:admin is MIDDLE's, but not granted to bravo; front:read is the caller's, at another API.
    expect(await exchange(bravo, fromCaller, MIDDLE, { scope: 'middle:read middle:admin' })).toEqual(
      refusal('invalid_scope', 'scope middle:admin is not granted to this client for this audience'),
    );
    expect(await exchange(bravo, fromCaller, MIDDLE, { scope: 'front:read' })).toEqual(
      refusal('invalid_scope', 'scope front:read is not granted to this client for this audience'),
    );
    expect(await exchange(bravo, fromCaller, BACK)).toEqual(
      refusal('invalid_target', 'the requested audience is not granted to this client'),
    );
    expect(await exchange(bravo, fromCaller, 'https://unknown.example.com')).toEqual(
      refusal('invalid_target', 'the requested audience is not registered'),
    );
    // A grant without token_exchange: the caller's own of LOOP, once the caller is a resource server of FRONT.
    const toFront = await tokenOf(caller, FRONT);
    await audiences.updateAudience(ctx, FRONT, { resourceServerClientIds: [bravo.id, caller.id] });
    await t.sync();
    expect(await exchange(caller, toFront, LOOP)).toEqual(
      refusal(
        'unauthorized_client',
        "token exchange is not enabled on this client's grant for the requested audience",
      ),
    );
    await audiences.updateAudience(ctx, FRONT, { resourceServerClientIds: [bravo.id] });
    await t.sync();
  });

  it('an actor_token of another client is refused; the actor’s own is accepted', async () => {
    const fromCaller = await tokenOf(caller, FRONT);
    const charlies = await tokenOf(charlie, BACK);
    expect(
      await exchange(bravo, fromCaller, MIDDLE, { actor_token: charlies, actor_token_type: ACCESS_TOKEN }),
    ).toEqual(refusal('invalid_request', 'actor_token is not a token of the authenticated client'));
    expect((await auditTrail('token.refused', bravo.id)).at(-1)?.reason).toBe(
      `invalid_request: actor_token: a token of ${charlie.id}`,
    );
    const own = await tokenOf(bravo, MIDDLE);
    expect(
      (await exchange(bravo, fromCaller, MIDDLE, { actor_token: own, actor_token_type: ACCESS_TOKEN }))
        .status,
    ).toBe(200);
  });

  it('parameters: each once, types as the contract says', async () => {
    const fromCaller = await tokenOf(caller, FRONT);
    const body = new URLSearchParams({
      grant_type: EXCHANGE,
      client_id: bravo.id,
      client_secret: bravo.secret,
      subject_token: fromCaller,
      subject_token_type: ACCESS_TOKEN,
      audience: MIDDLE,
    });
    body.append('subject_token', fromCaller);
    const twice = await postToken(t.url, body.toString(), {
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect([twice.status, twice.body]).toEqual([
      400,
      { error: 'invalid_request', error_description: 'parameter subject_token is sent more than once' },
    ]);
    expect(
      await exchange(bravo, fromCaller, MIDDLE, {
        requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token',
      }),
    ).toEqual(refusal('invalid_request', `requested_token_type must be ${ACCESS_TOKEN}`));
    expect(
      await exchange(bravo, fromCaller, MIDDLE, {
        subject_token_type: 'urn:ietf:params:oauth:token-type:id_token',
      }),
    ).toEqual(refusal('invalid_request', `subject_token_type must be ${ACCESS_TOKEN}`));
    // Credentials before anything else.
    expect(await exchange({ id: bravo.id, secret: 'wrong' }, 'junk', 'nowhere')).toEqual({
      status: 401,
      body: { error: 'invalid_client', error_description: 'client authentication failed' },
      headers: NO_STORE,
    });
  });

  it('chains stop at 5 actors: a subject token whose act nests 5 is refused', async () => {
    let subject = await tokenOf(caller, LOOP);
    for (let i = 1; i <= 5; i++) {
      const r = await exchange(looper, subject, LOOP);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      subject = r.body.access_token as string;
    }
    expect(decodeJwt(subject).act).toEqual({
      sub: looper.id,
      act: { sub: looper.id, act: { sub: looper.id, act: { sub: looper.id, act: { sub: looper.id } } } },
    });
    expect(await exchange(looper, subject, LOOP)).toEqual(
      refusal('invalid_request', 'subject_token already nests 5 actors (act); a chain stops at 5'),
    );
  });

  it('DPoP: an exchange with a proof gets a token bound to its key (cnf.jkt, token_type DPoP)', async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
    const jwk = await exportJWK(publicKey);
    const proof = await new SignJWT({
      htm: 'POST',
      htu: `${t.url}/oauth/token`,
      iat: Math.floor(Date.now() / 1000),
      jti: `exchange-${Date.now()}`,
    })
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk })
      .sign(privateKey);
    const fromCaller = await tokenOf(caller, FRONT);
    const r = await exchange(bravo, fromCaller, MIDDLE, {}, { headers: { dpop: proof } });
    expect(r).toEqual({
      status: 200,
      body: {
        access_token: expect.any(String),
        issued_token_type: ACCESS_TOKEN,
        token_type: 'DPoP',
        expires_in: 1800,
        scope: 'middle:read middle:write',
      },
      headers: NO_STORE,
    });
    const claims = await verified(r.body.access_token as string);
    expect(claims.cnf).toEqual({ jkt: await calculateJwkThumbprint(jwk, 'sha256') });
    expect(claims.act).toEqual({ sub: bravo.id });
    expect(await introspect(r.body.access_token as string)).toMatchObject({
      active: true,
      token_type: 'DPoP',
      cnf: { jkt: await calculateJwkThumbprint(jwk, 'sha256') },
    });
  });

  it("openid-client's genericGrantRequest does a real exchange; a refusal surfaces as its error", async () => {
    const config = await client.discovery(
      new URL(t.url),
      bravo.id,
      bravo.secret,
      client.ClientSecretPost(bravo.secret),
      { execute: [client.allowInsecureRequests] },
    );
    expect(config.serverMetadata().grant_types_supported).toEqual(['client_credentials', EXCHANGE]);
    const fromCaller = await tokenOf(caller, FRONT);
    const answer = await client.genericGrantRequest(config, EXCHANGE, {
      subject_token: fromCaller,
      subject_token_type: ACCESS_TOKEN,
      audience: MIDDLE,
      scope: 'middle:read',
    });
    expect(answer).toMatchObject({
      issued_token_type: ACCESS_TOKEN,
      token_type: 'bearer',
      expires_in: 1800,
      scope: 'middle:read',
    });
    expect(await verified(answer.access_token)).toMatchObject({
      sub: caller.id,
      client_id: bravo.id,
      aud: MIDDLE,
      act: { sub: bravo.id },
    });
    const error = await client
      .genericGrantRequest(config, EXCHANGE, {
        subject_token: fromCaller,
        subject_token_type: ACCESS_TOKEN,
        audience: BACK,
      })
      .then(
        () => undefined,
        (e: unknown) => e as { error?: string; error_description?: string },
      );
    expect(error).toMatchObject({
      error: 'invalid_target',
      error_description: 'the requested audience is not granted to this client',
    });
  });
});
