/**
 * DPoP at the token endpoint on a real socket (INTERFACE.md, "DPoP: sender-constrained tokens"; RFC 9449):
 * oauth4webapi's and openid-client's DPoP unchanged, with and without TESSERA_DPOP_NONCE (the libraries retry
 * use_dpop_nonce themselves); every refusal with its exact status, body and headers, and its reason in the
 * audit trail; what a refusal costs (a failed attempt, but not a request for a nonce); a client bound to DPoP;
 * a Bearer client unaffected; and resource servers that check the proof against the token's cnf.jkt, with
 * jose as the README shows and with express-oauth2-jwt-bearer.
 */
import { holder, signProof, type Holder } from '../helpers/dpop.js';
import { createHash } from 'node:crypto';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { auth } from 'express-oauth2-jwt-bearer';
import {
  calculateJwkThumbprint,
  createRemoteJWKSet,
  decodeJwt,
  EmbeddedJWK,
  exportJWK,
  jwtVerify,
  type JWTPayload,
} from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSocket, readResponse, tokenRequest } from '../helpers/raw-http.js';
import {
  NO_BLOCKING,
  postToken,
  startTestServer,
  type TestClient,
  type TestServer,
} from '../helpers/server.js';

const API = 'https://api.example.com';
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };
const insecure = { [oauth.allowInsecureRequests]: true } as const;

// --- proofs made by hand, for the refusals ---

let jtis = 0;
/** A proof for `t`'s token endpoint, now; `claims` and `header` over it (undefined removes a member). */
function proof(
  t: TestServer,
  h: Holder,
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  return signProof(
    h,
    {
      htm: 'POST',
      htu: `${t.url}/oauth/token`,
      iat: Math.floor(Date.now() / 1000),
      jti: `http-${++jtis}-${Date.now()}`,
      ...claims,
    },
    { alg: 'ES256', ...header },
  );
}

const form = (c: TestClient) => ({
  grant_type: 'client_credentials',
  client_id: c.id,
  client_secret: c.secret,
  audience: API,
});

/** The answer's status, body and the headers a test cares about. */
async function send(t: TestServer, c: TestClient, dpop?: string) {
  const r = await postToken(t.url, form(c), dpop === undefined ? {} : { headers: { dpop } });
  return {
    status: r.status,
    body: r.body,
    headers: {
      'cache-control': r.headers.get('cache-control'),
      pragma: r.headers.get('pragma'),
      ...(r.headers.has('dpop-nonce') ? { 'dpop-nonce': r.headers.get('dpop-nonce') } : {}),
    },
  };
}

const refused = (description: string) => ({
  status: 400,
  body: { error: 'invalid_dpop_proof', error_description: description },
  headers: NO_STORE,
});

/** The token events of a client, oldest first, as `type: reason`. */
async function events(t: TestServer, clientId: string): Promise<string[]> {
  await t.server.runtime.audit.flush();
  const found = await t.server.runtime.store.queryAuditEvents({ limit: 100, clientId });
  return found.reverse().map((e) => `${e.type}: ${e.reason ?? ''}`);
}

// --- a resource server that checks DPoP with jose, as the README shows ---

/**
 * The README's check (section "Binding tokens to a key"): the access token by the JWKS, the proof by its own
 * key, then htm, htu, ath and the thumbprint. Returns the token's claims, or throws.
 */
async function verifyDpopRequest(
  issuer: string,
  audience: string,
  jwks: ReturnType<typeof createRemoteJWKSet>,
  request: { method: string; url: string; authorization?: string | undefined; dpop?: string | undefined },
): Promise<JWTPayload> {
  const [scheme, accessToken] = (request.authorization ?? '').split(' ');
  if (scheme !== 'DPoP' || !accessToken || !request.dpop) throw new Error('DPoP token and proof required');
  const { payload: claims } = await jwtVerify(accessToken, jwks, { issuer, audience, typ: 'at+jwt' });
  const { payload: proofClaims, protectedHeader } = await jwtVerify(request.dpop, EmbeddedJWK, {
    typ: 'dpop+jwt',
    algorithms: ['ES256', 'ES384', 'RS256', 'PS256', 'EdDSA', 'Ed25519'],
    maxTokenAge: '60s',
  });
  const url = new URL(request.url);
  if (proofClaims.htm !== request.method) throw new Error('htm does not match');
  if (proofClaims.htu !== `${url.origin}${url.pathname}`) throw new Error('htu does not match');
  if (proofClaims.ath !== createHash('sha256').update(accessToken).digest('base64url'))
    throw new Error('ath does not match');
  const cnf = claims.cnf as { jkt?: string } | undefined;
  if (cnf?.jkt !== (await calculateJwkThumbprint(protectedHeader.jwk!, 'sha256')))
    throw new Error('the proof is not signed by the key the token is bound to');
  return claims;
}

/** A resource server whose /jose checks with verifyDpopRequest and /auth0 with express-oauth2-jwt-bearer. */
async function resourceServer(issuer: string): Promise<{ url: string; close(): Promise<void> }> {
  const jwks = createRemoteJWKSet(new URL(`${issuer}/.well-known/jwks.json`));
  const app = express();
  let url = '';
  app.get('/jose', (req: Request, res: Response) => {
    verifyDpopRequest(issuer, API, jwks, {
      method: req.method,
      url: url + req.originalUrl,
      authorization: req.headers.authorization,
      dpop: req.headers.dpop as string | undefined,
    }).then(
      (claims) => res.json({ sub: claims.sub, jkt: (claims.cnf as { jkt: string }).jkt }),
      (error: Error) => res.status(401).json({ error: error.message }),
    );
  });
  app.get(
    '/auth0',
    auth({ issuerBaseURL: issuer, audience: API, dpop: { enabled: true, required: true } }),
    (req: Request, res: Response) => {
      res.json({ sub: req.auth?.payload.sub, jkt: (req.auth?.payload.cnf as { jkt: string }).jkt });
    },
  );
  app.use((err: Error & { status?: number }, _req: Request, res: Response, _next: NextFunction) => {
    res.status(err.status ?? 500).json({ error: err.message });
  });
  const server: HttpServer = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// --- the servers ---

let t: TestServer;
/** With TESSERA_DPOP_NONCE=true, and a low failed-attempt limit per client. */
let n: TestServer;

beforeAll(async () => {
  [t, n] = await Promise.all([
    startTestServer(NO_BLOCKING),
    startTestServer({
      TESSERA_DPOP_NONCE: 'true',
      TESSERA_ATTEMPTS_CLIENT_MAX: '3',
      TESSERA_ATTEMPTS_SOURCE_MAX: '100000',
    }),
  ]);
  await t.addAudience(API);
  await n.addAudience(API);
}, 60_000);

afterAll(async () => {
  await Promise.all([t?.close(), n?.close()]);
});

describe('a proof binds the token', () => {
  it('200 with token_type DPoP and cnf.jkt, the thumbprint of the proof key; no DPoP-Nonce without nonces', async () => {
    const c = await t.createClient([API]);
    const h = await holder();
    const answer = await send(t, c, await proof(t, h));
    expect(answer).toEqual({
      status: 200,
      body: { access_token: expect.stringMatching(JWT), token_type: 'DPoP', expires_in: 1800 },
      headers: NO_STORE,
    });
    const claims = decodeJwt(answer.body.access_token as string);
    expect(Object.keys(claims)).toEqual(['iss', 'sub', 'aud', 'client_id', 'iat', 'exp', 'jti', 'cnf']);
    expect(claims.cnf).toEqual({ jkt: h.jkt });
    expect(await events(t, c.id)).toEqual(['token.issued: ']);
  });

  it('a Bearer client is unaffected: no proof, token_type Bearer, no cnf', async () => {
    const c = await t.createClient([API]);
    const answer = await send(t, c);
    expect(answer).toEqual({
      status: 200,
      body: { access_token: expect.stringMatching(JWT), token_type: 'Bearer', expires_in: 1800 },
      headers: NO_STORE,
    });
    expect(decodeJwt(answer.body.access_token as string)).not.toHaveProperty('cnf');
  });

  it('discovery lists dpop_signing_alg_values_supported', async () => {
    const metadata = (await (
      await fetch(`${t.url}/.well-known/oauth-authorization-server`)
    ).json()) as Record<string, unknown>;
    expect(metadata.dpop_signing_alg_values_supported).toEqual([
      'ES256',
      'ES384',
      'RS256',
      'PS256',
      'EdDSA',
      'Ed25519',
    ]);
  });
});

describe('every refusal: 400 invalid_dpop_proof, no-store, its reason audited, a failed attempt', () => {
  it('each rule of the proof', async () => {
    const c = await t.createClient([API]);
    const h = await holder();
    const publicOnly = h.jwk;
    const privateJwk = await exportJWK(h.privateKey);
    const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const body = enc({
      htm: 'POST',
      htu: `${t.url}/oauth/token`,
      iat: Math.floor(Date.now() / 1000),
      jti: 'x',
    });
    const cases: [string, string][] = [
      ['DPoP proof is not a JWT', 'not a jwt'],
      ['DPoP proof typ must be dpop+jwt', await proof(t, h, {}, { typ: 'JWT' })],
      [
        'DPoP proof alg must be one of ES256, ES384, RS256, PS256, EdDSA, Ed25519',
        `${enc({ alg: 'none', typ: 'dpop+jwt', jwk: publicOnly })}.${body}.`,
      ],
      [
        'DPoP proof alg must be one of ES256, ES384, RS256, PS256, EdDSA, Ed25519',
        `${enc({ alg: 'HS256', typ: 'dpop+jwt', jwk: publicOnly })}.${body}.c2ln`,
      ],
      ['DPoP proof header has no jwk', await proof(t, h, {}, { jwk: undefined })],
      ['DPoP proof jwk must be a public key', await proof(t, h, {}, { jwk: privateJwk })],
      ['DPoP proof signature does not verify', await proof(t, h, {}, { jwk: (await holder()).jwk })],
      ['DPoP proof htm must be POST', await proof(t, h, { htm: 'GET' })],
      [
        'DPoP proof htu is not the token endpoint URL',
        await proof(t, h, { htu: 'https://elsewhere.example/oauth/token' }),
      ],
      [
        'DPoP proof iat is not within 60 seconds of now',
        await proof(t, h, { iat: Math.floor(Date.now() / 1000) - 120 }),
      ],
      ['DPoP proof jti must be a string of 1 to 512 characters', await proof(t, h, { jti: undefined })],
      ['DPoP proof is longer than 8192 characters', 'x'.repeat(9000)],
    ];
    for (const [description, dpop] of cases)
      expect(await send(t, c, dpop), description).toEqual(refused(description));

    // A proof used once: the second time refused.
    const once = await proof(t, h);
    expect((await send(t, c, once)).status).toBe(200);
    expect(await send(t, c, once)).toEqual(refused('DPoP proof jti was already used'));

    expect(await events(t, c.id)).toEqual([
      ...cases.map(([description]) => `token.refused: invalid_dpop_proof: dpop: ${description}`),
      'token.issued: ',
      'token.refused: invalid_dpop_proof: dpop: DPoP proof jti was already used',
    ]);
  });

  it('two DPoP headers: refused, even when each is a good proof', async () => {
    const c = await t.createClient([API]);
    const h = await holder();
    const body = new URLSearchParams(form(c)).toString();
    const socket = await openSocket(t.config.port);
    try {
      const answer = readResponse(socket);
      socket.write(tokenRequest(t.config.port, body, { DPoP: await proof(t, h), dpop: await proof(t, h) }));
      const response = await answer;
      expect({ status: response.status, body: JSON.parse(response.body) as unknown }).toEqual({
        status: 400,
        body: { error: 'invalid_dpop_proof', error_description: 'send one DPoP header with one proof' },
      });
      expect(response.headers['cache-control']).toBe('no-store');
    } finally {
      socket.destroy();
    }
  });

  it('credentials first: a wrong secret with a bad proof is 401 invalid_client, nothing said of the proof', async () => {
    const c = await t.createClient([API]);
    const r = await postToken(t.url, { ...form(c), client_secret: 'wrong' }, { headers: { dpop: 'junk' } });
    expect({ status: r.status, body: r.body }).toEqual({
      status: 401,
      body: { error: 'invalid_client', error_description: 'client authentication failed' },
    });
  });

  it('a client with dpop_bound_access_tokens gets no token without a proof, and its token with one', async () => {
    const c = await t.createClient([API]);
    await t.server.runtime.store.updateClient(c.id, { dpopBoundAccessTokens: true });
    await t.sync();
    expect(await send(t, c)).toEqual(
      refused('a DPoP proof is required for this client (dpop_bound_access_tokens)'),
    );
    const answer = await send(t, c, await proof(t, await holder()));
    expect(answer.status).toBe(200);
    expect(answer.body.token_type).toBe('DPoP');
    expect(await events(t, c.id)).toEqual([
      'token.refused: invalid_dpop_proof: dpop: a DPoP proof is required for this client (dpop_bound_access_tokens)',
      'token.issued: ',
    ]);
  });

  it('refused proofs are failed attempts: past the limit a wrong secret is 429, the right one still a token', async () => {
    const c = await n.createClient([API]);
    const h = await holder();
    const nonce = () => n.server.runtime.tokens.dpopNonce()!;
    for (let i = 0; i < 3; i++)
      expect((await send(n, c, await proof(n, h, { nonce: nonce(), htm: 'PUT' }))).status).toBe(400);
    const wrong = await postToken(n.url, { ...form(c), client_secret: 'wrong' });
    expect(wrong.status).toBe(429);
    expect((await send(n, c, await proof(n, h, { nonce: nonce() }))).status).toBe(200);
  });
});

describe('TESSERA_DPOP_NONCE=true', () => {
  it('a proof without the nonce: 400 use_dpop_nonce with DPoP-Nonce, not a failed attempt; with it, the token', async () => {
    const c = await n.createClient([API]);
    const h = await holder();
    const current = n.server.runtime.tokens.dpopNonce()!;
    for (let i = 0; i < 5; i++)
      expect(await send(n, c, await proof(n, h))).toEqual({
        status: 400,
        body: {
          error: 'use_dpop_nonce',
          error_description: 'the authorization server requires a nonce in the DPoP proof',
        },
        headers: { ...NO_STORE, 'dpop-nonce': current },
      });
    // Five requests for a nonce, over a limit of three failures: none counted, so a wrong secret is a 401.
    const wrong = await postToken(n.url, { ...form(c), client_secret: 'wrong' });
    expect(wrong.status).toBe(401);
    const answer = await send(n, c, await proof(n, h, { nonce: current }));
    expect(answer).toEqual({
      status: 200,
      body: { access_token: expect.stringMatching(JWT), token_type: 'DPoP', expires_in: 1800 },
      headers: { ...NO_STORE, 'dpop-nonce': current },
    });
    expect((await events(n, c.id)).slice(-2)).toEqual([
      'token.refused: invalid_client: wrong secret',
      'token.issued: ',
    ]);
  });

  it('every answer of the token endpoint carries DPoP-Nonce; other paths do not', async () => {
    const c = await n.createClient([API]);
    const current = n.server.runtime.tokens.dpopNonce()!;
    const answers = [
      await postToken(n.url, form(c)), // a Bearer token
      await postToken(n.url, { ...form(c), client_secret: 'wrong' }), // 401
      await postToken(n.url, { client_id: c.id }), // 400 invalid_request
      await postToken(n.url, 'x', { headers: { 'content-type': 'text/plain' } }), // 415
      await postToken(n.url, 'a='.padEnd(10_000, 'b'), {
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }), // 413
      await postToken(n.url, undefined, { method: 'GET' }), // 405
    ];
    expect(answers.map((a) => [a.status, a.headers.get('dpop-nonce')])).toEqual([
      [200, current],
      [401, current],
      [400, current],
      [415, current],
      [413, current],
      [405, current],
    ]);
    const other = await fetch(`${n.url}/.well-known/jwks.json`);
    expect(other.headers.has('dpop-nonce')).toBe(false);
    // Without TESSERA_DPOP_NONCE, no answer carries one.
    expect((await postToken(t.url, {})).headers.has('dpop-nonce')).toBe(false);
  });
});

describe('real clients, unchanged', () => {
  let rs: { url: string; close(): Promise<void> };
  beforeAll(async () => {
    rs = await resourceServer(t.url);
  });
  afterAll(async () => {
    await rs?.close();
  });

  /** Calls the resource server's `path` with the token and a proof made by `DPoP`, as oauth4webapi does. */
  async function callApi(path: string, accessToken: string, DPoP: oauth.DPoPHandle) {
    const r = await oauth.protectedResourceRequest(
      accessToken,
      'GET',
      new URL(`${rs.url}${path}`),
      undefined,
      undefined,
      { DPoP, ...insecure },
    );
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  }

  it("oauth4webapi: DPoP() with clientCredentialsGrantRequest and processClientCredentialsResponse; the API checks the proof (jose and Auth0's SDK)", async () => {
    const c = await t.createClient([API]);
    const issuer = new URL(t.url);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
    expect(as.dpop_signing_alg_values_supported).toContain('ES256');
    const oc: oauth.Client = { client_id: c.id };
    const keyPair = await oauth.generateKeyPair('ES256');
    const DPoP = oauth.DPoP(oc, keyPair);
    const response = await oauth.clientCredentialsGrantRequest(
      as,
      oc,
      oauth.ClientSecretPost(c.secret),
      { audience: API },
      { DPoP, ...insecure },
    );
    const result = await oauth.processClientCredentialsResponse(as, oc, response);
    expect(result.token_type).toBe('dpop');
    const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey), 'sha256');
    expect(decodeJwt(result.access_token).cnf).toEqual({ jkt });

    // A resource server checks the proof against cnf.jkt: with jose (the README's code) and with Auth0's SDK.
    for (const path of ['/jose', '/auth0'])
      expect(await callApi(path, result.access_token, DPoP), path).toEqual({
        status: 200,
        body: { sub: c.id, jkt },
      });
    // The same token with a proof of another key: refused by both.
    const thief = oauth.DPoP(oc, await oauth.generateKeyPair('ES256'));
    expect(await callApi('/jose', result.access_token, thief)).toEqual({
      status: 401,
      body: { error: 'the proof is not signed by the key the token is bound to' },
    });
    expect((await callApi('/auth0', result.access_token, thief)).status).toBe(401);
    // Presented as a Bearer token: refused by both (Auth0's SDK answers a request without DPoP 400).
    for (const [path, status] of [
      ['/jose', 401],
      ['/auth0', 400],
    ] as const) {
      const bearer = await fetch(`${rs.url}${path}`, {
        headers: { authorization: `Bearer ${result.access_token}` },
      });
      expect(bearer.status, path).toBe(status);
    }
  });

  it('oauth4webapi with TESSERA_DPOP_NONCE: the first answer is use_dpop_nonce, the retry with the cached nonce gets the token', async () => {
    const c = await n.createClient([API]);
    const issuer = new URL(n.url);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
    const oc: oauth.Client = { client_id: c.id };
    const DPoP = oauth.DPoP(oc, await oauth.generateKeyPair('EdDSA'));
    const grant = () =>
      oauth
        .clientCredentialsGrantRequest(
          as,
          oc,
          oauth.ClientSecretBasic(c.secret),
          { audience: API },
          { DPoP, ...insecure },
        )
        .then((response) => oauth.processClientCredentialsResponse(as, oc, response));
    // The library's documented pattern: retry once on a nonce error (the handle has cached the nonce).
    const result = await grant().catch((error: unknown) => {
      expect(oauth.isDPoPNonceError(error)).toBe(true);
      return grant();
    });
    expect(result.token_type).toBe('dpop');
    expect(await events(n, c.id)).toEqual([
      'token.refused: use_dpop_nonce: dpop: proof without a nonce',
      'token.issued: ',
    ]);
    // The nonce stays cached: the next grant needs no retry.
    expect((await grant()).token_type).toBe('dpop');
  });

  for (const nonces of [false, true]) {
    it(`openid-client: getDPoPHandle and randomDPoPKeyPair with clientCredentialsGrant${nonces ? ', retrying use_dpop_nonce by itself' : ''}`, async () => {
      const s = nonces ? n : t;
      const c = await s.createClient([API]);
      const config = await client.discovery(
        new URL(s.url),
        c.id,
        c.secret,
        client.ClientSecretPost(c.secret),
        {
          execute: [client.allowInsecureRequests],
        },
      );
      const keyPair = await client.randomDPoPKeyPair();
      const DPoP = client.getDPoPHandle(config, keyPair);
      const r = await client.clientCredentialsGrant(config, { audience: API }, { DPoP });
      expect(r.token_type).toBe('dpop');
      expect(decodeJwt(r.access_token).cnf).toEqual({
        jkt: await calculateJwkThumbprint(await exportJWK(keyPair.publicKey), 'sha256'),
      });
      expect(await events(s, c.id)).toEqual(
        nonces
          ? ['token.refused: use_dpop_nonce: dpop: proof without a nonce', 'token.issued: ']
          : ['token.issued: '],
      );
    });
  }

  it('a client bound to DPoP with openid-client and no handle: the library surfaces invalid_dpop_proof', async () => {
    const c = await t.createClient([API]);
    await t.server.runtime.store.updateClient(c.id, { dpopBoundAccessTokens: true });
    await t.sync();
    const config = await client.discovery(new URL(t.url), c.id, c.secret, client.ClientSecretPost(c.secret), {
      execute: [client.allowInsecureRequests],
    });
    const error = await client.clientCredentialsGrant(config, { audience: API }).then(
      () => undefined,
      (e: unknown) => e as { error?: string; error_description?: string },
    );
    expect(error).toMatchObject({
      error: 'invalid_dpop_proof',
      error_description: 'a DPoP proof is required for this client (dpop_bound_access_tokens)',
    });
  });
});
