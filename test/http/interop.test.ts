/**
 * Interoperability: Tessera against the client and resource-server libraries people actually use:
 * openid-client 6, oauth4webapi 3, jose 6 (createRemoteJWKSet + jwtVerify) and Auth0's
 * express-oauth2-jwt-bearer. Every test talks to a real server on a real socket.
 */
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { auth } from 'express-oauth2-jwt-bearer';
import {
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  errors as joseErrors,
  generateKeyPair,
  jwtVerify,
  SignJWT,
  type JSONWebKeySet,
} from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issuedToken, tokenParams } from '../helpers/provision.js';
import { postToken, startTestServer, type TestClient, type TestServer } from '../helpers/server.js';

const SANDBOX = 'https://api.sandbox.example.com';
const PROD = 'https://api.prod.example.com';
const OTHER = 'https://api.other.example.com';
const RS = 'https://rs256.example.com';
const PS = 'https://ps256.example.com';
const ED = 'https://eddsa.example.com';
const SHORT = 'https://short-lived.example.com';
/** One API per non-default algorithm, each behind its own express-oauth2-jwt-bearer instance. */
const ALG_APIS = {
  RS256: 'https://rs256-api.example.com',
  PS256: 'https://ps256-api.example.com',
  EdDSA: 'https://eddsa-api.example.com',
} as const;
const ALL_ALGS = ['ES256', 'RS256', 'PS256', 'EdDSA'];

let t: TestServer;
let issuer: string;
/** Granted SANDBOX and PROD, not OTHER. */
let c: TestClient;

interface Metadata {
  issuer: string;
  token_endpoint: string;
  jwks_uri: string;
  [key: string]: unknown;
}

async function fetchMetadata(): Promise<Metadata> {
  const r = await fetch(`${issuer}/.well-known/oauth-authorization-server`);
  expect(r.status).toBe(200);
  return (await r.json()) as Metadata;
}

/** A token by client_secret_post, the way curl users get one. */
const token = (who: TestClient, audience: string): Promise<string> => issuedToken(issuer, who, audience);

beforeAll(async () => {
  t = await startTestServer();
  issuer = t.url;
  await t.addAudience(SANDBOX, { name: 'Sandbox' });
  await t.addAudience(PROD, { name: 'Production' });
  await t.addAudience(OTHER);
  c = await t.createClient([SANDBOX, PROD]);
});

afterAll(async () => {
  await t?.close();
});

describe('openid-client 6', () => {
  const discover = (auth: client.ClientAuth, secret: string, id = c.id) =>
    client.discovery(new URL(issuer), id, secret, auth, { execute: [client.allowInsecureRequests] });

  it('discovers the server (OIDC well-known path by default) and reads the metadata', async () => {
    const config = await discover(client.ClientSecretBasic(c.secret), c.secret);
    const md = config.serverMetadata();
    expect(md.issuer).toBe(issuer);
    expect(md.token_endpoint).toBe(`${issuer}/oauth/token`);
    expect(md.jwks_uri).toBe(`${issuer}/.well-known/jwks.json`);
    expect(md.token_endpoint_auth_methods_supported).toEqual([
      'client_secret_basic',
      'client_secret_post',
      'private_key_jwt',
    ]);
    expect(md.grant_types_supported).toEqual([
      'client_credentials',
      'urn:ietf:params:oauth:grant-type:token-exchange',
    ]);
  });

  it('discovers by the RFC 8414 path too (algorithm: oauth2)', async () => {
    const config = await client.discovery(
      new URL(issuer),
      c.id,
      c.secret,
      client.ClientSecretBasic(c.secret),
      {
        execute: [client.allowInsecureRequests],
        algorithm: 'oauth2',
      },
    );
    expect(config.serverMetadata().issuer).toBe(issuer);
    const r = await client.clientCredentialsGrant(config, { audience: SANDBOX });
    expect(decodeJwt(r.access_token).aud).toBe(SANDBOX);
  });

  for (const [name, method] of [
    ['client_secret_basic', client.ClientSecretBasic],
    ['client_secret_post', client.ClientSecretPost],
  ] as const) {
    it(`clientCredentialsGrant with ${name} and { audience }`, async () => {
      const config = await discover(method(c.secret), c.secret);
      const r = await client.clientCredentialsGrant(config, { audience: SANDBOX });
      expect(r.token_type).toBe('bearer'); // oauth4webapi lower-cases it
      expect(r.expires_in).toBe(1800);
      expect(r.expiresIn()).toBeGreaterThan(1790);
      expect(r.expiresIn()).toBeLessThanOrEqual(1800);
      expect(r.refresh_token).toBeUndefined();
      expect(r.scope).toBeUndefined();
      expect(Object.keys(r).sort()).toEqual(['access_token', 'expires_in', 'token_type']);
      const claims = decodeJwt(r.access_token);
      expect(claims.aud).toBe(SANDBOX);
      expect(claims.client_id).toBe(c.id);
      expect(claims.iss).toBe(issuer);
    });

    it(`clientCredentialsGrant with ${name} and { resource } (RFC 8707)`, async () => {
      const config = await discover(method(c.secret), c.secret);
      const r = await client.clientCredentialsGrant(config, { resource: PROD });
      expect(r.token_type).toBe('bearer');
      expect(r.expires_in).toBe(1800);
      expect(decodeJwt(r.access_token).aud).toBe(PROD);
    });
  }

  it('an unregistered audience surfaces as ResponseBodyError invalid_target', async () => {
    const config = await discover(client.ClientSecretBasic(c.secret), c.secret);
    const error = await client
      .clientCredentialsGrant(config, { audience: 'https://unknown.example.com' })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(client.ResponseBodyError);
    const e = error as client.ResponseBodyError;
    expect(e.status).toBe(400);
    expect(e.error).toBe('invalid_target');
    expect(e.error_description).toBe('the requested audience is not registered');
    expect(e.cause).toEqual({
      error: 'invalid_target',
      error_description: 'the requested audience is not registered',
    });
  });

  it('an audience not granted to the client surfaces as ResponseBodyError invalid_target', async () => {
    const config = await discover(client.ClientSecretPost(c.secret), c.secret);
    const error = await client.clientCredentialsGrant(config, { resource: OTHER }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(client.ResponseBodyError);
    const e = error as client.ResponseBodyError;
    expect(e.status).toBe(400);
    expect(e.error).toBe('invalid_target');
    expect(e.error_description).toBe('the requested audience is not granted to this client');
  });

  it('a scope surfaces as ResponseBodyError invalid_scope', async () => {
    const config = await discover(client.ClientSecretPost(c.secret), c.secret);
    const error = await client.clientCredentialsGrant(config, { audience: SANDBOX, scope: 'read' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(client.ResponseBodyError);
    expect((error as client.ResponseBodyError).error).toBe('invalid_scope');
  });

  /*
   * invalid_client is a 401 with `WWW-Authenticate: Basic realm="tessera"` (INTERFACE.md; RFC 6749 §5.2
   * requires the challenge when the client used Basic). oauth4webapi checks for a challenge before it reads
   * the body, so openid-client reports every such 401 as a WWWAuthenticateChallengeError, not as a
   * ResponseBodyError; the OAuth error is still in the (unread) response body.
   */
  for (const [name, method] of [
    ['client_secret_basic', client.ClientSecretBasic],
    ['client_secret_post', client.ClientSecretPost],
  ] as const) {
    it(`a wrong secret with ${name} surfaces as a 401 challenge whose body is invalid_client`, async () => {
      const config = await discover(method('not-the-secret'), 'not-the-secret');
      const error = await client.clientCredentialsGrant(config, { audience: SANDBOX }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(client.WWWAuthenticateChallengeError);
      const e = error as client.WWWAuthenticateChallengeError;
      expect(e.status).toBe(401);
      expect(e.cause).toEqual([{ scheme: 'basic', parameters: { realm: 'tessera' } }]);
      expect(await e.response.json()).toEqual({
        error: 'invalid_client',
        error_description: 'client authentication failed',
      });
    });
  }

  it('an unknown client id gives the very same error as a wrong secret', async () => {
    const config = await discover(client.ClientSecretBasic(c.secret), c.secret, 'no-such-client');
    const error = await client.clientCredentialsGrant(config, { audience: SANDBOX }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(client.WWWAuthenticateChallengeError);
    const e = error as client.WWWAuthenticateChallengeError;
    expect(e.status).toBe(401);
    expect(await e.response.json()).toEqual({
      error: 'invalid_client',
      error_description: 'client authentication failed',
    });
  });
});

describe('oauth4webapi 3', () => {
  let as: oauth.AuthorizationServer;
  const insecure = { [oauth.allowInsecureRequests]: true } as const;

  beforeAll(async () => {
    const issuerUrl = new URL(issuer);
    as = await oauth.processDiscoveryResponse(issuerUrl, await oauth.discoveryRequest(issuerUrl, insecure));
  });

  it('discoveryRequest + processDiscoveryResponse (oidc and oauth2 algorithms) give the same metadata', async () => {
    const issuerUrl = new URL(issuer);
    const viaOauth2 = await oauth.processDiscoveryResponse(
      issuerUrl,
      await oauth.discoveryRequest(issuerUrl, { ...insecure, algorithm: 'oauth2' }),
    );
    expect(viaOauth2).toEqual(as);
    expect(as.issuer).toBe(issuer);
    expect(as.token_endpoint).toBe(`${issuer}/oauth/token`);
    expect(as.jwks_uri).toBe(`${issuer}/.well-known/jwks.json`);
  });

  for (const [name, method] of [
    ['client_secret_basic', oauth.ClientSecretBasic],
    ['client_secret_post', oauth.ClientSecretPost],
  ] as const) {
    it(`clientCredentialsGrantRequest + processClientCredentialsResponse with ${name}`, async () => {
      const oc: oauth.Client = { client_id: c.id };
      const response = await oauth.clientCredentialsGrantRequest(
        as,
        oc,
        method(c.secret),
        { audience: SANDBOX },
        insecure,
      );
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(response.headers.get('pragma')).toBe('no-cache');
      const result = await oauth.processClientCredentialsResponse(as, oc, response);
      expect(result.token_type).toBe('bearer');
      expect(result.expires_in).toBe(1800);
      expect(Object.keys(result).sort()).toEqual(['access_token', 'expires_in', 'token_type']);
      expect(decodeJwt(result.access_token)).toMatchObject({
        aud: SANDBOX,
        sub: c.id,
        client_id: c.id,
        iss: issuer,
      });
    });

    it(`${name} with resource instead of audience`, async () => {
      const oc: oauth.Client = { client_id: c.id };
      const response = await oauth.clientCredentialsGrantRequest(
        as,
        oc,
        method(c.secret),
        { resource: PROD },
        insecure,
      );
      const result = await oauth.processClientCredentialsResponse(as, oc, response);
      expect(decodeJwt(result.access_token).aud).toBe(PROD);
    });
  }

  it('an operator-chosen id with every allowed character works with Basic and post (RFC 6749 §2.3.1)', async () => {
    // Ids are limited to A-Z a-z 0-9 . _ ~ - (validateClientId), which form-encoding leaves as they are.
    const odd = await t.createClient([SANDBOX], { id: 'svc.A_b~c-9' });
    for (const method of [oauth.ClientSecretBasic, oauth.ClientSecretPost]) {
      const oc: oauth.Client = { client_id: odd.id };
      const response = await oauth.clientCredentialsGrantRequest(
        as,
        oc,
        method(odd.secret),
        { audience: SANDBOX },
        insecure,
      );
      const result = await oauth.processClientCredentialsResponse(as, oc, response);
      expect(decodeJwt(result.access_token).client_id).toBe('svc.A_b~c-9');
    }
  });

  it('invalid_target is a ResponseBodyError', async () => {
    const oc: oauth.Client = { client_id: c.id };
    const response = await oauth.clientCredentialsGrantRequest(
      as,
      oc,
      oauth.ClientSecretBasic(c.secret),
      { audience: OTHER },
      insecure,
    );
    const error = await oauth.processClientCredentialsResponse(as, oc, response).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(oauth.ResponseBodyError);
    expect((error as oauth.ResponseBodyError).error).toBe('invalid_target');
    expect((error as oauth.ResponseBodyError).status).toBe(400);
  });
});

describe('jose 6 as a resource server', () => {
  let metadata: Metadata;
  let jwks: ReturnType<typeof createRemoteJWKSet>;

  beforeAll(async () => {
    metadata = await fetchMetadata();
    jwks = createRemoteJWKSet(new URL(metadata.jwks_uri));
  });

  it('verifies a token with issuer, audience, typ at+jwt and algorithms; the claim set is exact', async () => {
    const before = Math.floor(Date.now() / 1000);
    const jwt = await token(c, SANDBOX);
    const after = Math.floor(Date.now() / 1000);
    const { payload, protectedHeader } = await jwtVerify(jwt, jwks, {
      issuer: metadata.issuer,
      audience: SANDBOX,
      typ: 'at+jwt',
      algorithms: ALL_ALGS,
      requiredClaims: ['iss', 'sub', 'aud', 'client_id', 'iat', 'exp', 'jti'],
    });
    expect(Object.keys(payload).sort()).toEqual(['aud', 'client_id', 'exp', 'iat', 'iss', 'jti', 'sub']);
    expect(payload.iss).toBe(issuer);
    expect(payload.sub).toBe(c.id);
    expect(payload.client_id).toBe(c.id);
    expect(payload.aud).toBe(SANDBOX); // a string, not an array
    expect(payload.iat).toBeGreaterThanOrEqual(before);
    expect(payload.iat).toBeLessThanOrEqual(after);
    expect(payload.exp! - payload.iat!).toBe(1800);

    const jti = payload.jti!;
    expect(jti).toMatch(/^[A-Za-z0-9_-]+$/);
    const raw = Buffer.from(jti, 'base64url');
    expect(raw.length).toBeGreaterThanOrEqual(16);
    expect(raw.toString('base64url')).toBe(jti);

    expect(Object.keys(protectedHeader).sort()).toEqual(['alg', 'kid', 'typ']);
    expect(protectedHeader).toEqual({ alg: 'ES256', kid: expect.any(String), typ: 'at+jwt' });
    const set = (await (await fetch(metadata.jwks_uri)).json()) as JSONWebKeySet;
    const key = set.keys.find((k) => k.kid === protectedHeader.kid);
    expect(key).toBeDefined();
    expect(key).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
  });

  it('jti is unique across 50 tokens', async () => {
    const tokens = await Promise.all(Array.from({ length: 50 }, () => token(c, SANDBOX)));
    const jtis = new Set<string>();
    for (const jwt of tokens) {
      const { payload } = await jwtVerify(jwt, jwks, {
        issuer,
        audience: SANDBOX,
        typ: 'at+jwt',
        algorithms: ['ES256'],
      });
      expect(Buffer.from(payload.jti!, 'base64url').length).toBeGreaterThanOrEqual(16);
      jtis.add(payload.jti!);
    }
    expect(jtis.size).toBe(50);
  });

  it('a token for another audience fails the audience check', async () => {
    const jwt = await token(c, PROD);
    const error = await jwtVerify(jwt, jwks, {
      issuer,
      audience: SANDBOX,
      typ: 'at+jwt',
      algorithms: ['ES256'],
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(joseErrors.JWTClaimValidationFailed);
    expect((error as InstanceType<typeof joseErrors.JWTClaimValidationFailed>).claim).toBe('aud');
  });

  it('the wrong issuer, typ or algorithm list is refused', async () => {
    const jwt = await token(c, SANDBOX);
    await expect(jwtVerify(jwt, jwks, { issuer: issuer + '/', audience: SANDBOX })).rejects.toBeInstanceOf(
      joseErrors.JWTClaimValidationFailed,
    );
    await expect(jwtVerify(jwt, jwks, { issuer, audience: SANDBOX, typ: 'JWT' })).rejects.toBeInstanceOf(
      joseErrors.JWTClaimValidationFailed,
    );
    await expect(
      jwtVerify(jwt, jwks, { issuer, audience: SANDBOX, algorithms: ['RS256'] }),
    ).rejects.toBeInstanceOf(joseErrors.JOSEAlgNotAllowed);
  });
});

describe('per-audience algorithms and lifetimes', () => {
  let multi: TestClient;

  beforeAll(async () => {
    await t.addAudience(RS, { signingAlg: 'RS256' });
    await t.addAudience(PS, { signingAlg: 'PS256' });
    await t.addAudience(ED, { signingAlg: 'EdDSA' });
    await t.addAudience(SHORT, { tokenTtl: 600 });
    multi = await t.createClient([SANDBOX, RS, PS, ED, SHORT]);
  });

  it('the JWKS carries one public key per algorithm in use', async () => {
    const r = await fetch(`${issuer}/.well-known/jwks.json`);
    const set = (await r.json()) as JSONWebKeySet;
    expect(set.keys.map((k) => k.alg).sort()).toEqual(['ES256', 'EdDSA', 'PS256', 'RS256']);
    const byAlg = Object.fromEntries(set.keys.map((k) => [k.alg, k]));
    expect(byAlg.RS256).toMatchObject({ kty: 'RSA', e: 'AQAB', use: 'sig' });
    expect(byAlg.PS256).toMatchObject({ kty: 'RSA', e: 'AQAB', use: 'sig' });
    expect(byAlg.EdDSA).toMatchObject({ kty: 'OKP', crv: 'Ed25519', use: 'sig' });
    expect(Buffer.from(byAlg.RS256!.n!, 'base64url').length).toBe(256); // 2048-bit modulus
    expect(new Set(set.keys.map((k) => k.kid)).size).toBe(4);
  });

  for (const [audience, alg] of [
    [RS, 'RS256'],
    [PS, 'PS256'],
    [ED, 'EdDSA'],
    [SANDBOX, 'ES256'],
  ] as const) {
    it(`${audience} gets ${alg} tokens that verify against the remote JWKS`, async () => {
      const jwt = await token(multi, audience);
      expect(decodeProtectedHeader(jwt)).toEqual({ alg, kid: expect.any(String), typ: 'at+jwt' });
      const jwks = createRemoteJWKSet(new URL(`${issuer}/.well-known/jwks.json`));
      const { payload, protectedHeader } = await jwtVerify(jwt, jwks, {
        issuer,
        audience,
        typ: 'at+jwt',
        algorithms: [alg],
      });
      expect(protectedHeader.alg).toBe(alg);
      expect(payload.exp! - payload.iat!).toBe(1800);
      // Pinned to another algorithm, the same token is refused.
      await expect(
        jwtVerify(jwt, jwks, { issuer, audience, algorithms: ALL_ALGS.filter((a) => a !== alg) }),
      ).rejects.toBeInstanceOf(joseErrors.JOSEAlgNotAllowed);
    });
  }

  it('an audience lifetime of 600 s gives expires_in 600 and exp - iat = 600', async () => {
    const r = await postToken(issuer, tokenParams(multi.id, multi.secret, SHORT));
    expect(r.status).toBe(200);
    expect(r.body.expires_in).toBe(600);
    const claims = decodeJwt(r.body.access_token as string);
    expect(claims.exp! - claims.iat!).toBe(600);
    // Other audiences of the same client keep the default.
    const other = decodeJwt(await token(multi, SANDBOX));
    expect(other.exp! - other.iat!).toBe(1800);
  });

  it('a client lifetime wins over the audience lifetime (and the default)', async () => {
    const pinned = await t.createClient([SHORT, SANDBOX], { tokenTtl: 300 });
    for (const audience of [SHORT, SANDBOX]) {
      const r = await postToken(issuer, {
        grant_type: 'client_credentials',
        client_id: pinned.id,
        client_secret: pinned.secret,
        audience,
      });
      expect(r.status).toBe(200);
      expect(r.body.expires_in).toBe(300);
      const claims = decodeJwt(r.body.access_token as string);
      expect(claims.exp! - claims.iat!).toBe(300);
    }
  });

  it('openid-client reports the per-audience lifetime', async () => {
    const config = await client.discovery(
      new URL(issuer),
      multi.id,
      multi.secret,
      client.ClientSecretBasic(multi.secret),
      {
        execute: [client.allowInsecureRequests],
      },
    );
    const r = await client.clientCredentialsGrant(config, { audience: SHORT });
    expect(r.expires_in).toBe(600);
  });
});

/*
 * A resource server that fetched the JWKS a moment ago and then sees a token signed by a key it has not
 * seen yet. jose's createRemoteJWKSet (and so express-oauth2-jwt-bearer) refetches on an unknown kid, but
 * at most once per 30 s cooldown; a key that signs the moment it is created is therefore refused for up
 * to 30 s by every resource server that fetched the JWKS just before (INTERFACE.md: the JWKS publishes
 * "the next key before it signs anything").
 */
describe('a new signing algorithm and warm resource-server caches', () => {
  it('a resource server that fetched the JWKS just before an RS256 audience was added verifies its first token', async () => {
    const fresh = await startTestServer();
    try {
      const a = 'https://a.example.com';
      const b = 'https://b.example.com';
      await fresh.addAudience(a);
      const who = await fresh.createClient([a]);
      const jwks = createRemoteJWKSet(new URL(`${fresh.url}/.well-known/jwks.json`));
      const first = await postToken(fresh.url, tokenParams(who.id, who.secret, a));
      await jwtVerify(first.body.access_token as string, jwks, { issuer: fresh.url, audience: a });

      // The operator adds an audience with another algorithm; its first token is issued at once.
      await fresh.addAudience(b, { signingAlg: 'RS256' });
      const other = await fresh.createClient([b]);
      const second = await postToken(fresh.url, tokenParams(other.id, other.secret, b));
      expect(second.status).toBe(200);
      const { protectedHeader } = await jwtVerify(second.body.access_token as string, jwks, {
        issuer: fresh.url,
        audience: b,
      });
      expect(protectedHeader.alg).toBe('RS256');
    } finally {
      await fresh.close();
    }
  });
});

describe('express-oauth2-jwt-bearer (Auth0 SDK) in front of an express 5 API', () => {
  let api: HttpServer;
  let apiUrl: string;

  /** GET /api protected for SANDBOX; GET /strict the same with the RFC 9068 profile (strict: true). */
  beforeAll(async () => {
    for (const [alg, url] of Object.entries(ALG_APIS))
      await t.addAudience(url, { signingAlg: alg as keyof typeof ALG_APIS });
    const app = express();
    app.get('/api', auth({ issuerBaseURL: issuer, audience: SANDBOX }), (req: Request, res: Response) => {
      res.json({ sub: req.auth?.payload.sub, aud: req.auth?.payload.aud, alg: req.auth?.header.alg });
    });
    app.get(
      '/strict',
      auth({ issuerBaseURL: issuer, audience: SANDBOX, strict: true }),
      (req: Request, res: Response) => {
        res.json({ sub: req.auth?.payload.sub, typ: req.auth?.header.typ });
      },
    );
    for (const [alg, url] of Object.entries(ALG_APIS)) {
      app.get(`/${alg}`, auth({ issuerBaseURL: issuer, audience: url }), (req: Request, res: Response) => {
        res.json({ alg: req.auth?.header.alg, aud: req.auth?.payload.aud });
      });
    }
    // The SDK's errors carry status and headers; show them as JSON rather than express's HTML page.
    app.use(
      (
        err: Error & { status?: number; headers?: Record<string, string>; code?: string },
        _req: Request,
        res: Response,
        _next: NextFunction,
      ) => {
        res
          .status(err.status ?? 500)
          .set(err.headers ?? {})
          .json({ error: err.code ?? null, message: err.message });
      },
    );
    api = createServer(app);
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => (api ? api.close(() => resolve()) : resolve()));
  });

  const get = async (path: string, bearer?: string) => {
    const r = await fetch(apiUrl + path, {
      headers: bearer === undefined ? {} : { authorization: `Bearer ${bearer}` },
    });
    return {
      status: r.status,
      wwwAuthenticate: r.headers.get('www-authenticate'),
      body: (await r.json()) as Record<string, unknown>,
    };
  };

  it('a Tessera token is accepted (200)', async () => {
    const r = await get('/api', await token(c, SANDBOX));
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ sub: c.id, aud: SANDBOX, alg: 'ES256' });
  });

  it('no token is 401 with a Bearer challenge', async () => {
    const r = await get('/api');
    expect(r.status).toBe(401);
    expect(r.wwwAuthenticate).toMatch(/^Bearer realm="api"/);
    expect(r.wwwAuthenticate).not.toMatch(/error=/);
  });

  it('a token for another audience is 401 invalid_token', async () => {
    const r = await get('/api', await token(c, PROD));
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('invalid_token');
    expect(r.wwwAuthenticate).toMatch(/error="invalid_token"/);
    expect(r.body.message).toBe("Unexpected 'aud' value");
  });

  it('a token signed by an unrelated key with a made-up kid is 401 invalid_token', async () => {
    const { privateKey } = await generateKeyPair('ES256');
    const now = Math.floor(Date.now() / 1000);
    const forged = await new SignJWT({ client_id: c.id })
      .setProtectedHeader({ alg: 'ES256', kid: 'not-a-tessera-kid', typ: 'at+jwt' })
      .setIssuer(issuer)
      .setSubject(c.id)
      .setAudience(SANDBOX)
      .setIssuedAt(now)
      .setExpirationTime(now + 600)
      .setJti('forged-token-id-0001')
      .sign(privateKey);
    const r = await get('/api', forged);
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('invalid_token');
  });

  it("a token signed by an unrelated key under Tessera's own kid is 401 invalid_token", async () => {
    const real = await token(c, SANDBOX);
    const { privateKey } = await generateKeyPair('ES256');
    const forged = await new SignJWT(decodeJwt(real))
      .setProtectedHeader(decodeProtectedHeader(real) as { alg: string })
      .sign(privateKey);
    const r = await get('/api', forged);
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('invalid_token');
    expect(r.body.message).toBe('signature verification failed');
  });

  it('with strict: true (the RFC 9068 profile: typ at+jwt, iat, sub, client_id, jti) a Tessera token is accepted', async () => {
    const r = await get('/strict', await token(c, SANDBOX));
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ sub: c.id, typ: 'at+jwt' });
  });

  it('with strict: true a plain JWT (typ JWT) is refused even if correctly signed claims were forged', async () => {
    const { privateKey } = await generateKeyPair('ES256');
    const now = Math.floor(Date.now() / 1000);
    const plain = await new SignJWT({ client_id: c.id })
      .setProtectedHeader({ alg: 'ES256', kid: 'other', typ: 'JWT' })
      .setIssuer(issuer)
      .setSubject(c.id)
      .setAudience(SANDBOX)
      .setIssuedAt(now)
      .setExpirationTime(now + 600)
      .sign(privateKey);
    const r = await get('/strict', plain);
    expect(r.status).toBe(401);
  });

  for (const [alg, url] of Object.entries(ALG_APIS)) {
    it(`an ${alg} audience token is accepted by an API configured for that audience`, async () => {
      const who = await t.createClient([url]);
      const r = await get(`/${alg}`, await token(who, url));
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ alg, aud: url });
    });
  }
});
