/**
 * The admin API as an RFC 9449 §7 DPoP resource server (INTERFACE.md, DPoP: "Tessera's own endpoints that take
 * its tokens honour the binding"; src/http/admin/auth.ts, src/domain/presented-token.ts), on a real socket,
 * each test once without nonces and once with TESSERA_DPOP_NONCE=true:
 * - openid-client's and oauth4webapi's DPoP handles, unchanged: a DPoP-bound admin token from the token
 *   endpoint, then GET and POST /admin/v1/clients with it (in nonce mode the libraries are answered
 *   use_dpop_nonce first, by the token endpoint and by the admin API, and retry with the nonce);
 * - proofs made by hand with jose: every refusal with its exact status, challenge, DPoP-Nonce, content type
 *   and problem body (a bound token as Bearer, no proof, wrong ath, htm, htu, another key, a replayed jti, an
 *   unbound token with the DPoP scheme, a scope missing for a DPoP caller);
 * - nonce mode alone: use_dpop_nonce with its DPoP-Nonce, the retry, and a request for a nonce not counted as a
 *   failed authentication.
 */
import { ath, clean, holder, signProof, type Holder } from '../helpers/dpop.js';
import { calculateJwkThumbprint, decodeJwt, exportJWK } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqlitePath } from '../../src/config/index.js';
import { ADMIN_SCOPES, adminAudienceUrl, ensureAdminAudience } from '../../src/management/builtin.js';
import { clients, type ManagementContext } from '../../src/management/index.js';
import { tokenParams } from '../helpers/provision.js';
import { openSocket, readResponse } from '../helpers/raw-http.js';
import { NO_BLOCKING, postToken, startTestServer, type TestServer } from '../helpers/server.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { managementOf } from '../helpers/management.js';

const ALGS = 'ES256 ES384 RS256 PS256 EdDSA Ed25519';
const PROBLEM_JSON = 'application/problem+json; charset=utf-8';
const JSON_UTF8 = 'application/json; charset=utf-8';
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const insecure = { [oauth.allowInsecureRequests]: true } as const;

// --- keys and proofs made by hand ---

/** The nonce the server gives now (undefined without TESSERA_DPOP_NONCE). */
const nonceOf = (t: TestServer): string | undefined => t.server.runtime.tokens.dpopNonce();

let jtis = 0;
/**
 * A proof for `method` on `url` (htu: the URL without query and fragment) with `token`'s ath and the server's
 * current nonce, if it has one; `claims` and `header` over it (undefined removes a member).
 */
function proof(
  t: TestServer,
  h: Holder,
  method: string,
  url: string,
  token: string | undefined,
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  const u = new URL(url);
  return signProof(
    h,
    {
      htm: method,
      htu: `${u.origin}${u.pathname}`,
      iat: Math.floor(Date.now() / 1000),
      jti: `admin-dpop-${++jtis}-${Date.now()}`,
      ath: token === undefined ? undefined : ath(token),
      nonce: nonceOf(t),
      ...claims,
    },
    { alg: 'ES256', ...header },
  );
}

// --- admin clients and their tokens ---

const ctxOf = (t: TestServer): ManagementContext => managementOf(t, 'test');

/** An admin client with these scopes (dpop_bound_access_tokens unless `bound` is false). */
async function adminClientOf(
  t: TestServer,
  scopes: readonly string[] = ADMIN_SCOPES,
  bound = true,
): Promise<{ id: string; secret: string }> {
  const ctx = ctxOf(t);
  await ensureAdminAudience(ctx);
  const url = adminAudienceUrl(t.config);
  const { client: made, secret } = await clients.createClient(ctx, {
    name: bound ? 'dpop admin' : 'bearer admin',
    grants: [url],
    scopes: { [url]: [...scopes] },
    dpopBoundAccessTokens: bound,
  });
  await t.sync();
  return { id: made.id, secret: secret! };
}

/** A DPoP-bound admin token of a new bound admin client, its proof by `h` (with the nonce if one is needed). */
async function boundToken(
  t: TestServer,
  h: Holder,
  scopes: readonly string[] = ADMIN_SCOPES,
): Promise<{ id: string; token: string }> {
  const { id, secret } = await adminClientOf(t, scopes);
  const dpop = await proof(t, h, 'POST', `${t.url}/oauth/token`, undefined);
  const answer = await postToken(t.url, tokenParams(id, secret, adminAudienceUrl(t.config)), {
    headers: { dpop },
  });
  expect(answer.status).toBe(200);
  expect(answer.body).toMatchObject({ token_type: 'DPoP', scope: [...scopes].sort().join(' ') });
  const token = answer.body.access_token as string;
  expect(decodeJwt(token).cnf).toEqual({ jkt: h.jkt });
  return { id, token };
}

/** A Bearer (unbound) admin token of a new admin client without dpop_bound_access_tokens. */
async function unboundToken(t: TestServer): Promise<string> {
  const { id, secret } = await adminClientOf(t, ADMIN_SCOPES, false);
  const answer = await postToken(t.url, tokenParams(id, secret, adminAudienceUrl(t.config)));
  expect(answer.status).toBe(200);
  expect(answer.body.token_type).toBe('Bearer');
  return answer.body.access_token as string;
}

// --- calls and the answers expected ---

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** The headers a test checks exactly: only those the answer has. */
function headersOf(response: Response): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of ['content-type', 'cache-control', 'www-authenticate', 'dpop-nonce', 'retry-after']) {
    const value = response.headers.get(name);
    if (value !== null) picked[name] = value;
  }
  return picked;
}

async function answerOf(response: Response): Promise<Answer> {
  const text = await response.text();
  return {
    status: response.status,
    headers: headersOf(response),
    body: text === '' ? undefined : (JSON.parse(text) as unknown),
  };
}

/** One admin API call (`path` under /admin/v1) with these Authorization and DPoP headers. */
async function adminCall(
  t: TestServer,
  method: string,
  path: string,
  headers: { authorization?: string; dpop?: string } = {},
  body?: unknown,
): Promise<Answer> {
  const sent: Record<string, string> = clean(headers) as Record<string, string>;
  if (body !== undefined) sent['content-type'] = 'application/json';
  const response = await fetch(`${t.url}/admin/v1${path}`, {
    method,
    headers: sent,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return answerOf(response);
}

/** A bound token's call with a fresh, good proof by `h`. */
async function dpopCall(
  t: TestServer,
  h: Holder,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<Answer> {
  const dpop = await proof(t, h, method, `${t.url}/admin/v1${path}`, token);
  return adminCall(t, method, path, { authorization: `DPoP ${token}`, dpop }, body);
}

const problemBody = (status: number, code: string, detail: string) => ({
  type: `urn:tessera:problem:${code}`,
  title: status === 401 ? 'Unauthorized' : status === 403 ? 'Forbidden' : 'Too Many Requests',
  status,
  detail,
});

/** The challenges of a 401 whose error is on the DPoP scheme (auth.ts, adminChallenge). */
const dpopChallenge = (error: string, description: string) =>
  `Bearer, DPoP error="${error}", error_description="${description}", algs="${ALGS}"`;
/** The challenges of a 401 whose error is on the Bearer scheme. */
const bearerChallenge = (error: string, description: string) =>
  `Bearer error="${error}", error_description="${description}", DPoP algs="${ALGS}"`;

/**
 * A 401 refusal as the admin API answers it; `dpopScheme`: the request used Authorization: DPoP, so in nonce
 * mode the answer carries the nonce to use next (admin/index.ts).
 */
function refusal(
  t: TestServer,
  challenge: string,
  code: string,
  detail: string,
  dpopScheme: boolean,
): Answer {
  const nonce = nonceOf(t);
  return {
    status: 401,
    headers: {
      'content-type': PROBLEM_JSON,
      'cache-control': 'no-store',
      'www-authenticate': challenge,
      ...(dpopScheme && nonce !== undefined ? { 'dpop-nonce': nonce } : {}),
    },
    body: problemBody(401, code, detail),
  };
}

/** The headers of a success answered to a DPoP caller. */
const okHeaders = (t: TestServer): Record<string, string> => {
  const nonce = nonceOf(t);
  return {
    'content-type': JSON_UTF8,
    'cache-control': 'no-store',
    ...(nonce === undefined ? {} : { 'dpop-nonce': nonce }),
  };
};

// --- the servers ---

/** Without nonces, and with TESSERA_DPOP_NONCE=true. */
const servers: Record<'plain' | 'nonce', TestServer | undefined> = { plain: undefined, nonce: undefined };
/** TESSERA_DPOP_NONCE=true and at most 3 failed authentications per address. */
let strict: TestServer;

beforeAll(async () => {
  [servers.plain, servers.nonce, strict] = await Promise.all([
    startTestServer(NO_BLOCKING),
    startTestServer({ ...NO_BLOCKING, TESSERA_DPOP_NONCE: 'true' }),
    startTestServer({
      TESSERA_DPOP_NONCE: 'true',
      TESSERA_ATTEMPTS_SOURCE_MAX: '3',
      TESSERA_ATTEMPTS_CLIENT_MAX: '100000',
    }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([servers.plain?.close(), servers.nonce?.close(), strict?.close()]);
});

describe.each([
  { mode: 'without nonces', key: 'plain' as const, nonces: false },
  { mode: 'with TESSERA_DPOP_NONCE=true', key: 'nonce' as const, nonces: true },
])('the admin API takes DPoP-bound tokens, $mode', ({ key, nonces }) => {
  const server = (): TestServer => servers[key]!;

  it('the server is in the mode this block says', () => {
    expect(server().config.dpopNonce).toBe(nonces);
    expect(nonceOf(server()) === undefined).toBe(!nonces);
  });

  describe('real clients, unchanged', () => {
    it('openid-client: getDPoPHandle, clientCredentialsGrant, then GET and POST /clients with fetchProtectedResource', async () => {
      const t = server();
      const admin = await adminClientOf(t);
      const config = await client.discovery(
        new URL(t.url),
        admin.id,
        admin.secret,
        client.ClientSecretPost(admin.secret),
        { execute: [client.allowInsecureRequests] },
      );
      // Every request the library makes from here on, as `METHOD path status`.
      const seen: string[] = [];
      config[client.customFetch] = async (url, options) => {
        const response = await fetch(url, options as RequestInit);
        seen.push(`${options.method} ${new URL(url).pathname} ${response.status}`);
        return response;
      };
      const keyPair = await client.randomDPoPKeyPair();
      const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey), 'sha256');
      const DPoP = client.getDPoPHandle(config, keyPair);
      const granted = await client.clientCredentialsGrant(
        config,
        { audience: adminAudienceUrl(t.config) },
        { DPoP },
      );
      expect(granted.token_type).toBe('dpop');
      expect(granted.access_token).toMatch(JWT);
      expect(decodeJwt(granted.access_token).cnf).toEqual({ jkt });

      const listed = await client.fetchProtectedResource(
        config,
        granted.access_token,
        new URL(`${t.url}/admin/v1/clients?limit=100`),
        'GET',
        null,
        new Headers(),
        { DPoP },
      );
      const list = await answerOf(listed);
      expect({ status: list.status, headers: list.headers }).toEqual({ status: 200, headers: okHeaders(t) });
      const items = (list.body as { items: { client_id: string; dpop_bound_access_tokens: boolean }[] })
        .items;
      expect(items.find((c) => c.client_id === admin.id)).toMatchObject({ dpop_bound_access_tokens: true });

      // A POST with a new handle of the same key: it has no nonce yet, so in nonce mode the admin API asks for
      // one and the library retries by itself.
      const created = await client.fetchProtectedResource(
        config,
        granted.access_token,
        new URL(`${t.url}/admin/v1/clients`),
        'POST',
        JSON.stringify({ name: 'made with openid-client' }),
        new Headers({ 'content-type': 'application/json' }),
        { DPoP: client.getDPoPHandle(config, keyPair) },
      );
      const made = await answerOf(created);
      expect({ status: made.status, headers: made.headers }).toEqual({ status: 201, headers: okHeaders(t) });
      expect(made.body).toMatchObject({ name: 'made with openid-client', dpop_bound_access_tokens: false });
      const madeId = (made.body as { client_id: string }).client_id;
      expect(created.headers.get('location')).toBe(`${t.url}/admin/v1/clients/${madeId}`);

      expect(seen).toEqual(
        nonces
          ? [
              'POST /oauth/token 400',
              'POST /oauth/token 200',
              'GET /admin/v1/clients 200',
              'POST /admin/v1/clients 401',
              'POST /admin/v1/clients 201',
            ]
          : ['POST /oauth/token 200', 'GET /admin/v1/clients 200', 'POST /admin/v1/clients 201'],
      );
    });

    it('oauth4webapi: DPoP(), clientCredentialsGrantRequest, processClientCredentialsResponse, then GET and POST /clients with protectedResourceRequest', async () => {
      const t = server();
      const admin = await adminClientOf(t);
      const issuer = new URL(t.url);
      const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
      const oc: oauth.Client = { client_id: admin.id };
      const keyPair = await oauth.generateKeyPair('ES256');
      const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey), 'sha256');
      const seen: string[] = [];
      const options = (DPoP: oauth.DPoPHandle) => ({
        DPoP,
        ...insecure,
        [oauth.customFetch]: async (url: string, init: oauth.CustomFetchOptions<string, unknown>) => {
          const response = await fetch(url, init as RequestInit);
          seen.push(`${init.method} ${new URL(url).pathname} ${response.status}`);
          return response;
        },
      });
      /** oauth4webapi's documented pattern: retry once on a nonce error (the handle has cached the nonce). */
      const retryingNonce = async <T>(attempt: () => Promise<T>): Promise<T> => {
        try {
          return await attempt();
        } catch (error) {
          expect(nonces, String(error)).toBe(true);
          expect(oauth.isDPoPNonceError(error)).toBe(true);
          return attempt();
        }
      };

      const DPoP = oauth.DPoP(oc, keyPair);
      const granted = await retryingNonce(async () =>
        oauth.processClientCredentialsResponse(
          as,
          oc,
          await oauth.clientCredentialsGrantRequest(
            as,
            oc,
            oauth.ClientSecretBasic(admin.secret),
            { audience: adminAudienceUrl(t.config) },
            options(DPoP),
          ),
        ),
      );
      expect(granted.token_type).toBe('dpop');
      expect(decodeJwt(granted.access_token).cnf).toEqual({ jkt });

      const listed = await retryingNonce(() =>
        oauth.protectedResourceRequest(
          granted.access_token,
          'GET',
          new URL(`${t.url}/admin/v1/clients`),
          undefined,
          undefined,
          options(DPoP),
        ),
      );
      const list = await answerOf(listed);
      expect({ status: list.status, headers: list.headers }).toEqual({ status: 200, headers: okHeaders(t) });
      expect((list.body as { items: { client_id: string }[] }).items.map((c) => c.client_id)).toContain(
        admin.id,
      );

      // A new handle of the same key, without the nonce: in nonce mode the admin API's challenge is what
      // oauth4webapi recognizes as a nonce error (scheme dpop, error use_dpop_nonce).
      const fresh = oauth.DPoP(oc, keyPair);
      const post = () =>
        oauth.protectedResourceRequest(
          granted.access_token,
          'POST',
          new URL(`${t.url}/admin/v1/clients`),
          new Headers({ 'content-type': 'application/json' }),
          JSON.stringify({ name: 'made with oauth4webapi' }),
          options(fresh),
        );
      let created: Response;
      if (nonces) {
        const error = await post().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(oauth.WWWAuthenticateChallengeError);
        expect(oauth.isDPoPNonceError(error)).toBe(true);
        expect((error as oauth.WWWAuthenticateChallengeError).cause).toEqual([
          { scheme: 'bearer', parameters: {} },
          {
            scheme: 'dpop',
            parameters: {
              error: 'use_dpop_nonce',
              error_description: 'this API requires a nonce in the DPoP proof',
              algs: ALGS,
            },
          },
        ]);
        created = await post();
      } else created = await post();
      const made = await answerOf(created);
      expect({ status: made.status, headers: made.headers }).toEqual({ status: 201, headers: okHeaders(t) });
      expect(made.body).toMatchObject({ name: 'made with oauth4webapi' });

      expect(seen).toEqual(
        nonces
          ? [
              'POST /oauth/token 400',
              'POST /oauth/token 200',
              'GET /admin/v1/clients 200',
              'POST /admin/v1/clients 401',
              'POST /admin/v1/clients 201',
            ]
          : ['POST /oauth/token 200', 'GET /admin/v1/clients 200', 'POST /admin/v1/clients 201'],
      );
    });
  });

  describe('proofs made by hand (jose)', () => {
    let h: Holder;
    let token: string;
    const url = (path = '/clients') => `${server().url}/admin/v1${path}`;

    beforeAll(async () => {
      h = await holder();
      ({ token } = await boundToken(server(), h));
    });

    it('a good proof: 200; the scheme is case-insensitive; htu ignores the query', async () => {
      const t = server();
      const ok = await dpopCall(t, h, token, 'GET', '/clients');
      expect({ status: ok.status, headers: ok.headers }).toEqual({ status: 200, headers: okHeaders(t) });
      const lower = await adminCall(t, 'GET', '/keys', {
        authorization: `dpop ${token}`,
        dpop: await proof(t, h, 'GET', url('/keys'), token),
      });
      expect(lower.status).toBe(200);
      const query = await adminCall(t, 'GET', '/clients?limit=1', {
        authorization: `DPoP ${token}`,
        dpop: await proof(t, h, 'GET', url('/clients'), token),
      });
      expect(query.status).toBe(200);
      expect((query.body as { items: unknown[] }).items).toHaveLength(1);
    });

    it('htm is the request method: a HEAD needs a HEAD proof', async () => {
      const t = server();
      const head = await adminCall(t, 'HEAD', '/clients', {
        authorization: `DPoP ${token}`,
        dpop: await proof(t, h, 'HEAD', url(), token),
      });
      expect({ status: head.status, headers: head.headers }).toEqual({ status: 200, headers: okHeaders(t) });
      const detail = 'DPoP proof htm must be HEAD';
      const refused = await adminCall(t, 'HEAD', '/clients', {
        authorization: `DPoP ${token}`,
        dpop: await proof(t, h, 'GET', url(), token),
      });
      const expected = refusal(
        t,
        dpopChallenge('invalid_dpop_proof', detail),
        'invalid_dpop_proof',
        detail,
        true,
      );
      expect({ status: refused.status, headers: refused.headers }).toEqual({
        status: expected.status,
        headers: expected.headers,
      });
    });

    it('htu compared after RFC 3986 normalization only: scheme and host case, percent-encodings', async () => {
      const t = server();
      const { port } = t.config;
      for (const htu of [
        `HTTP://LOCALHOST:${port}/admin/v1/clients`,
        `http://localhost:${port}/admin/v1/%63lients`,
        `http://localhost:${port}/admin/v1/clients?other=query#and-fragment`,
      ])
        expect(
          (
            await adminCall(t, 'GET', '/clients', {
              authorization: `DPoP ${token}`,
              dpop: await proof(t, h, 'GET', url(), token, { htu }),
            })
          ).status,
          htu,
        ).toBe(200);
      // Not a normalization: another host spelling, a trailing slash, another port.
      const detail = 'DPoP proof htu is not the URL of this request';
      for (const htu of [
        `http://127.0.0.1:${port}/admin/v1/clients`,
        `http://localhost:${port}/admin/v1/clients/`,
        `http://localhost:${port + 1}/admin/v1/clients`,
        `https://localhost:${port}/admin/v1/clients`,
      ])
        expect(
          await adminCall(t, 'GET', '/clients', {
            authorization: `DPoP ${token}`,
            dpop: await proof(t, h, 'GET', url(), token, { htu }),
          }),
          htu,
        ).toEqual(
          refusal(t, dpopChallenge('invalid_dpop_proof', detail), 'invalid_dpop_proof', detail, true),
        );
    });

    it('two DPoP headers, or an empty one: 401 invalid_dpop_proof', async () => {
      const t = server();
      const empty = 'DPoP proof is not a JWT';
      expect(await adminCall(t, 'GET', '/clients', { authorization: `DPoP ${token}`, dpop: '' })).toEqual(
        refusal(t, dpopChallenge('invalid_dpop_proof', empty), 'invalid_dpop_proof', empty, true),
      );
      const socket = await openSocket(t.config.port);
      try {
        const pending = readResponse(socket);
        const [one, two] = [await proof(t, h, 'GET', url(), token), await proof(t, h, 'GET', url(), token)];
        socket.write(
          `GET /admin/v1/clients HTTP/1.1\r\nHost: localhost:${t.config.port}\r\n` +
            `Authorization: DPoP ${token}\r\nDPoP: ${one}\r\nDPoP: ${two}\r\nConnection: close\r\n\r\n`,
        );
        const r = await pending;
        const detail = 'send one DPoP header with one proof';
        const expected = refusal(
          t,
          dpopChallenge('invalid_dpop_proof', detail),
          'invalid_dpop_proof',
          detail,
          true,
        );
        expect({
          status: r.status,
          headers: Object.fromEntries(Object.entries(expected.headers).map(([k]) => [k, r.headers[k]])),
          body: JSON.parse(r.body) as unknown,
        }).toEqual(expected);
      } finally {
        socket.destroy();
      }
    });

    it('a nonce the server never gave: ignored without TESSERA_DPOP_NONCE, use_dpop_nonce with it', async () => {
      const t = server();
      const answer = await adminCall(t, 'GET', '/clients', {
        authorization: `DPoP ${token}`,
        dpop: await proof(t, h, 'GET', url(), token, { nonce: 'made-up' }),
      });
      const detail = 'this API requires a nonce in the DPoP proof';
      if (nonces)
        expect(answer).toEqual(
          refusal(t, dpopChallenge('use_dpop_nonce', detail), 'use_dpop_nonce', detail, true),
        );
      else
        expect({ status: answer.status, headers: answer.headers }).toEqual({
          status: 200,
          headers: okHeaders(t),
        });
    });

    it('a bound token of a client disabled since: 401 invalid_token on the DPoP challenge, proof or none', async () => {
      const t = server();
      const owner = await holder();
      const disabled = await boundToken(t, owner);
      expect((await dpopCall(t, owner, disabled.token, 'GET', '/clients')).status).toBe(200);
      await clients.setEnabled(ctxOf(t), disabled.id, false);
      await t.sync();
      const detail = 'the client of this token is disabled or deleted';
      const expected = refusal(t, dpopChallenge('invalid_token', detail), 'invalid_token', detail, true);
      expect(await dpopCall(t, owner, disabled.token, 'GET', '/clients')).toEqual(expected);
      expect(await adminCall(t, 'GET', '/clients', { authorization: `DPoP ${disabled.token}` })).toEqual(
        expected,
      );
      // As Bearer: the same refusal, on the Bearer challenge (the token is refused before its binding is).
      expect(await adminCall(t, 'GET', '/clients', { authorization: `Bearer ${disabled.token}` })).toEqual(
        refusal(t, bearerChallenge('invalid_token', detail), 'invalid_token', detail, false),
      );
    });

    it('the bound token as Bearer: 401 invalid_token, the error on the DPoP challenge; with a proof too', async () => {
      const t = server();
      const detail = 'the access token is bound to a DPoP key: present it with the DPoP scheme and a proof';
      const expected = refusal(t, dpopChallenge('invalid_token', detail), 'invalid_token', detail, false);
      expect(await adminCall(t, 'GET', '/clients', { authorization: `Bearer ${token}` })).toEqual(expected);
      const withProof = await adminCall(t, 'GET', '/clients', {
        authorization: `Bearer ${token}`,
        dpop: await proof(t, h, 'GET', url(), token),
      });
      expect(withProof).toEqual(expected);
    });

    it('the DPoP scheme without a DPoP header: 401 invalid_dpop_proof', async () => {
      const t = server();
      const detail = 'a DPoP proof is required with a DPoP-bound token';
      expect(await adminCall(t, 'GET', '/clients', { authorization: `DPoP ${token}` })).toEqual(
        refusal(t, dpopChallenge('invalid_dpop_proof', detail), 'invalid_dpop_proof', detail, true),
      );
    });

    it('a proof of something else: wrong or missing ath, wrong htm, wrong htu, stale iat, a token-endpoint proof', async () => {
      const t = server();
      const other = await boundToken(t, await holder());
      const cases: [string, string][] = [
        ['DPoP proof ath is not the hash of the access token', await proof(t, h, 'GET', url(), other.token)],
        ['DPoP proof ath is not the hash of the access token', await proof(t, h, 'GET', url(), undefined)],
        [
          'DPoP proof ath is not the hash of the access token',
          await proof(t, h, 'GET', url(), token, { ath: ath(token).slice(1) }),
        ],
        ['DPoP proof htm must be GET', await proof(t, h, 'POST', url(), token)],
        ['DPoP proof htm must be GET', await proof(t, h, 'get', url(), token)],
        ['DPoP proof htu is not the URL of this request', await proof(t, h, 'GET', url('/keys'), token)],
        [
          'DPoP proof htu is not the URL of this request',
          await proof(t, h, 'GET', `https://elsewhere.example/admin/v1/clients`, token),
        ],
        [
          'DPoP proof iat is not within 60 seconds of now',
          await proof(t, h, 'GET', url(), token, { iat: Math.floor(Date.now() / 1000) - 120 }),
        ],
        // What the token endpoint took is no proof for the admin API.
        ['DPoP proof htm must be GET', await proof(t, h, 'POST', `${t.url}/oauth/token`, undefined)],
      ];
      for (const [detail, dpop] of cases)
        expect(
          await adminCall(t, 'GET', '/clients', { authorization: `DPoP ${token}`, dpop }),
          detail,
        ).toEqual(
          refusal(t, dpopChallenge('invalid_dpop_proof', detail), 'invalid_dpop_proof', detail, true),
        );
      // None of them used the token up: a good proof still works.
      expect((await dpopCall(t, h, token, 'GET', '/clients')).status).toBe(200);
    });

    it('a proof by another key than cnf.jkt: 401 invalid_token', async () => {
      const t = server();
      const thief = await holder();
      const detail = 'the DPoP proof is signed by another key than the token is bound to';
      expect(
        await adminCall(t, 'GET', '/clients', {
          authorization: `DPoP ${token}`,
          dpop: await proof(t, thief, 'GET', url(), token),
        }),
      ).toEqual(refusal(t, dpopChallenge('invalid_token', detail), 'invalid_token', detail, true));
    });

    it('a proof used once: the same proof again is refused, on the same and on another route', async () => {
      const t = server();
      const dpop = await proof(t, h, 'GET', url(), token);
      const first = await adminCall(t, 'GET', '/clients', { authorization: `DPoP ${token}`, dpop });
      expect(first.status).toBe(200);
      const detail = 'DPoP proof jti was already used';
      const replayed = refusal(
        t,
        dpopChallenge('invalid_dpop_proof', detail),
        'invalid_dpop_proof',
        detail,
        true,
      );
      expect(await adminCall(t, 'GET', '/clients', { authorization: `DPoP ${token}`, dpop })).toEqual(
        replayed,
      );
      expect(await adminCall(t, 'GET', '/clients', { authorization: `DPoP ${token}`, dpop })).toEqual(
        replayed,
      );
      // A new proof with the same jti: refused too (the jti, not the proof's text, is single-use).
      const { jti } = decodeJwt(dpop);
      expect(
        await adminCall(t, 'GET', '/clients', {
          authorization: `DPoP ${token}`,
          dpop: await proof(t, h, 'GET', url(), token, { jti }),
        }),
      ).toEqual(replayed);
    });

    it('an unbound token: 200 as Bearer; with the DPoP scheme 401 invalid_token, proof or none', async () => {
      const t = server();
      const bearer = await unboundToken(t);
      const ok = await adminCall(t, 'GET', '/clients', { authorization: `Bearer ${bearer}` });
      // A Bearer caller is not a DPoP caller: no DPoP-Nonce even in nonce mode.
      expect({ status: ok.status, headers: ok.headers }).toEqual({
        status: 200,
        headers: { 'content-type': JSON_UTF8, 'cache-control': 'no-store' },
      });
      const detail = 'the access token is not bound to a DPoP key: present it as Bearer';
      const expected = refusal(t, dpopChallenge('invalid_token', detail), 'invalid_token', detail, true);
      expect(await adminCall(t, 'GET', '/clients', { authorization: `DPoP ${bearer}` })).toEqual(expected);
      expect(
        await adminCall(t, 'GET', '/clients', {
          authorization: `DPoP ${bearer}`,
          dpop: await proof(t, h, 'GET', url(), bearer),
        }),
      ).toEqual(expected);
    });

    it('no token, or not one of this server, with the DPoP scheme: 401 invalid_token on the DPoP challenge', async () => {
      const t = server();
      const detail = 'the access token is not valid for this API';
      expect(
        await adminCall(t, 'GET', '/clients', {
          authorization: 'DPoP not-a-jwt',
          dpop: await proof(t, h, 'GET', url(), 'not-a-jwt'),
        }),
      ).toEqual(refusal(t, dpopChallenge('invalid_token', detail), 'invalid_token', detail, true));
      const none = 'an access token is required (Authorization: Bearer or DPoP)';
      expect(
        await adminCall(t, 'GET', '/clients', { dpop: await proof(t, h, 'GET', url(), undefined) }),
      ).toEqual(refusal(t, bearerChallenge('invalid_token', none), 'invalid_token', none, false));
    });

    it('a DPoP caller without the scope: 403 insufficient_scope on a DPoP challenge', async () => {
      const t = server();
      const reader = await holder();
      const { token: readOnly } = await boundToken(t, reader, ['clients:read']);
      expect((await dpopCall(t, reader, readOnly, 'GET', '/clients')).status).toBe(200);
      const nonce = nonceOf(t);
      expect(await dpopCall(t, reader, readOnly, 'POST', '/clients', { name: 'not allowed' })).toEqual({
        status: 403,
        headers: {
          'content-type': PROBLEM_JSON,
          'cache-control': 'no-store',
          'www-authenticate': `DPoP error="insufficient_scope", scope="clients:write", algs="${ALGS}"`,
          ...(nonce === undefined ? {} : { 'dpop-nonce': nonce }),
        },
        body: problemBody(403, 'insufficient_scope', 'this call needs the scope clients:write'),
      });
    });
  });
});

describe('TESSERA_DPOP_NONCE=true: the admin API asks for its nonce (RFC 9449 §9)', () => {
  const USE_NONCE = 'this API requires a nonce in the DPoP proof';
  const t = (): TestServer => servers.nonce!;

  /** use_dpop_nonce as the admin API answers it, with the nonce to use. */
  const askForNonce = (s: TestServer): Answer => ({
    status: 401,
    headers: {
      'content-type': PROBLEM_JSON,
      'cache-control': 'no-store',
      'www-authenticate': dpopChallenge('use_dpop_nonce', USE_NONCE),
      'dpop-nonce': nonceOf(s)!,
    },
    body: problemBody(401, 'use_dpop_nonce', USE_NONCE),
  });

  it('a proof without the nonce: 401 use_dpop_nonce with DPoP-Nonce; the retry with it: 200 with DPoP-Nonce', async () => {
    const s = t();
    const h = await holder();
    const { token } = await boundToken(s, h);
    const url = `${s.url}/admin/v1/clients`;
    const first = await adminCall(s, 'GET', '/clients', {
      authorization: `DPoP ${token}`,
      dpop: await proof(s, h, 'GET', url, token, { nonce: undefined }),
    });
    expect(first).toEqual(askForNonce(s));
    const retry = await adminCall(s, 'GET', '/clients', {
      authorization: `DPoP ${token}`,
      dpop: await proof(s, h, 'GET', url, token, { nonce: first.headers['dpop-nonce'] }),
    });
    expect({ status: retry.status, headers: retry.headers }).toEqual({ status: 200, headers: okHeaders(s) });
  });

  it('a nonce that is not the server’s: 401 use_dpop_nonce too', async () => {
    const s = t();
    const h = await holder();
    const { token } = await boundToken(s, h);
    for (const nonce of ['not-the-nonce', '', 42])
      expect(
        await adminCall(s, 'GET', '/clients', {
          authorization: `DPoP ${token}`,
          dpop: await proof(s, h, 'GET', `${s.url}/admin/v1/clients`, token, { nonce }),
        }),
        String(nonce),
      ).toEqual(askForNonce(s));
  });

  it('the proof is checked before its nonce: a wrong htm without a nonce is invalid_dpop_proof', async () => {
    const s = t();
    const h = await holder();
    const { token } = await boundToken(s, h);
    const detail = 'DPoP proof htm must be GET';
    expect(
      await adminCall(s, 'GET', '/clients', {
        authorization: `DPoP ${token}`,
        dpop: await proof(s, h, 'PUT', `${s.url}/admin/v1/clients`, token, { nonce: undefined }),
      }),
    ).toEqual(refusal(s, dpopChallenge('invalid_dpop_proof', detail), 'invalid_dpop_proof', detail, true));
  });

  it('a request for a nonce is no failed authentication; a refused proof is one (3 per address here)', async () => {
    const s = strict;
    const h = await holder();
    const { token } = await boundToken(s, h);
    const url = `${s.url}/admin/v1/clients`;
    const noNonce = async () =>
      adminCall(s, 'GET', '/clients', {
        authorization: `DPoP ${token}`,
        dpop: await proof(s, h, 'GET', url, token, { nonce: undefined }),
      });
    for (let i = 0; i < 5; i++) expect(await noNonce(), `request ${i + 1}`).toEqual(askForNonce(s));
    // Five requests for a nonce over a limit of three: none counted.
    const detail = 'DPoP proof htm must be GET';
    const refused = refusal(
      s,
      dpopChallenge('invalid_dpop_proof', detail),
      'invalid_dpop_proof',
      detail,
      true,
    );
    const badProof = async () =>
      adminCall(s, 'GET', '/clients', {
        authorization: `DPoP ${token}`,
        dpop: await proof(s, h, 'DELETE', url, token),
      });
    for (let i = 0; i < 3; i++) expect(await badProof(), `refusal ${i + 1}`).toEqual(refused);
    // Three refused proofs: the address is blocked.
    const blocked = await badProof();
    expect(blocked.status).toBe(429);
    expect(blocked.headers['retry-after']).toMatch(/^[1-9][0-9]*$/);
    expect(blocked.body).toEqual(
      problemBody(
        429,
        'too_many_attempts',
        'too many failed authentications from this address; try again later',
      ),
    );
    // Blocked, a request for a nonce is still answered with the nonce, and a good proof still gets in.
    expect(await noNonce()).toEqual(askForNonce(s));
    expect((await dpopCall(s, h, token, 'GET', '/clients')).status).toBe(200);
  });

  it('the audit trail sums refused DPoP calls (admin.auth_failed, admin.forbidden); requests for a nonce are not among them', async () => {
    const own = await startTestServer({ ...NO_BLOCKING, TESSERA_DPOP_NONCE: 'true' });
    try {
      const h = await holder();
      const { id, token } = await boundToken(own, h, ['clients:read']);
      const url = `${own.url}/admin/v1/clients`;
      const send = async (authorization: string, claims: Record<string, unknown>, method = 'GET') =>
        (
          await adminCall(
            own,
            method,
            '/clients',
            {
              authorization,
              dpop: await proof(own, h, method === 'POST' ? 'POST' : 'GET', url, token, claims),
            },
            method === 'POST' ? { name: 'x' } : undefined,
          )
        ).status;
      // Three requests for a nonce: no refusal.
      for (let i = 0; i < 3; i++) expect(await send(`DPoP ${token}`, { nonce: undefined })).toBe(401);
      // Three refused authentications and one refused authorization.
      expect(await send(`DPoP ${token}`, { htm: 'PUT' })).toBe(401);
      expect(await send(`DPoP ${token}`, { ath: 'x' })).toBe(401);
      expect(await send(`Bearer ${token}`, {})).toBe(401);
      expect(await send(`DPoP ${token}`, {}, 'POST')).toBe(403);
      expect(await send(`DPoP ${token}`, {})).toBe(200);
      // Closing records the minute's sums (as the minute's end does).
      await own.server.close();
      const store = openSqliteStore(sqlitePath(own.config));
      try {
        const events = await store.queryAuditEvents({
          limit: 10,
          types: ['admin.auth_failed', 'admin.forbidden'],
        });
        // Summed per minute: a minute's end in between splits a sum in two.
        const summed = (type: string) => {
          const of = events.filter((e) => e.type === type);
          return {
            count: of.reduce((n, e) => n + (e.count ?? 1), 0),
            sources: [...new Set(of.map((e) => e.source))],
            clients: [...new Set(of.map((e) => e.clientId))],
            reasons: [...new Set(of.flatMap((e) => (e.reason ?? '').split('; ')))].sort(),
          };
        };
        expect(summed('admin.auth_failed')).toEqual({
          count: 3,
          sources: ['127.0.0.1'],
          clients: [id],
          reasons: [
            'GET /admin/v1/clients: DPoP proof ath is not the hash of the access token',
            'GET /admin/v1/clients: DPoP proof htm must be GET',
            'GET /admin/v1/clients: the access token is bound to a DPoP key: present it with the DPoP scheme and a proof',
          ],
        });
        expect(summed('admin.forbidden')).toEqual({
          count: 1,
          sources: ['127.0.0.1'],
          clients: [id],
          reasons: ['POST /admin/v1/clients: this call needs the scope clients:write'],
        });
      } finally {
        await store.close();
      }
    } finally {
      await own.close();
    }
  });
});
