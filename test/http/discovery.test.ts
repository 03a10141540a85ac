/**
 * The published documents: RFC 8414 metadata at both well-known URLs, the JWKS, health and readiness,
 * and what other methods and unknown paths get. Exact statuses, headers and bodies.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_SCOPE_NAMES, ASSERTION_SIGNING_ALGS, DPOP_SIGNING_ALGS } from '../helpers/expected.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const METADATA_PATHS = [
  '/.well-known/oauth-authorization-server',
  '/.well-known/openid-configuration',
] as const;
const JWKS_PATH = '/.well-known/jwks.json';
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth'];

let t: TestServer;

/** Added out of order on purpose: the published list is sorted. */
const AUDIENCES = ['https://api.sandbox.example.com', 'https://api.example.com', 'https://a.example.com/v2'];

function expectedMetadata(audiences: string[]): Record<string, unknown> {
  return {
    issuer: t.url,
    token_endpoint: t.url + '/oauth/token',
    jwks_uri: t.url + '/.well-known/jwks.json',
    grant_types_supported: ['client_credentials', 'urn:ietf:params:oauth:grant-type:token-exchange'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'private_key_jwt'],
    token_endpoint_auth_signing_alg_values_supported: [...ASSERTION_SIGNING_ALGS],
    revocation_endpoint: t.url + '/oauth/revoke',
    revocation_endpoint_auth_methods_supported: [
      'client_secret_basic',
      'client_secret_post',
      'private_key_jwt',
    ],
    revocation_endpoint_auth_signing_alg_values_supported: [...ASSERTION_SIGNING_ALGS],
    introspection_endpoint: t.url + '/oauth/introspect',
    introspection_endpoint_auth_methods_supported: [
      'client_secret_basic',
      'client_secret_post',
      'private_key_jwt',
    ],
    introspection_endpoint_auth_signing_alg_values_supported: [...ASSERTION_SIGNING_ALGS],
    response_types_supported: [],
    // The admin API's own audience is registered from the server's first start on.
    audiences_supported: [...audiences, `${t.url}/admin/v1`].sort(),
    // Every audience's scopes: here those of the admin API's audience.
    scopes_supported: [...ADMIN_SCOPE_NAMES],
    dpop_signing_alg_values_supported: [...DPOP_SIGNING_ALGS],
  };
}

beforeAll(async () => {
  t = await startTestServer();
  for (const url of AUDIENCES) await t.addAudience(url);
});

afterAll(async () => {
  await t?.close();
});

describe('authorization server metadata (RFC 8414)', () => {
  for (const path of METADATA_PATHS) {
    it(`GET ${path} is the exact metadata document`, async () => {
      const r = await fetch(t.url + path);
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(r.headers.get('cache-control')).toBe('public, max-age=60');
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(await r.json()).toEqual(expectedMetadata(AUDIENCES));
    });

    it(`HEAD ${path} answers 200 with the headers and no body`, async () => {
      const r = await fetch(t.url + path, { method: 'HEAD' });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(r.headers.get('cache-control')).toBe('public, max-age=60');
      expect(await r.text()).toBe('');
    });

    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      it(`${method} ${path} is 405 with Allow: GET, HEAD`, async () => {
        const r = await fetch(t.url + path, { method });
        expect(r.status).toBe(405);
        expect(r.headers.get('allow')).toBe('GET, HEAD');
        expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
        expect(await r.json()).toEqual({
          error: 'invalid_request',
          error_description: 'method not allowed; use GET or HEAD',
        });
      });
    }
  }

  it('both well-known URLs serve byte-identical documents', async () => {
    const [a, b] = await Promise.all(METADATA_PATHS.map(async (p) => (await fetch(t.url + p)).text()));
    expect(a).toBe(b);
  });

  it('a newly added audience appears in audiences_supported, in order', async () => {
    await t.addAudience('https://b.example.com');
    for (const path of METADATA_PATHS) {
      const body = (await (await fetch(t.url + path)).json()) as Record<string, unknown>;
      expect(body).toEqual(expectedMetadata([...AUDIENCES, 'https://b.example.com']));
    }
  });
});

describe('JWKS', () => {
  it('GET is a public-only key set with the JWK Set media type and a cache lifetime', async () => {
    const r = await fetch(t.url + JWKS_PATH);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/jwk-set+json; charset=utf-8');
    expect(r.headers.get('cache-control')).toBe('public, max-age=1800'); // half of TESSERA_KEY_PUBLISH_AHEAD
    const body = (await r.json()) as { keys: Record<string, unknown>[] };
    expect(Object.keys(body)).toEqual(['keys']);
    // The default algorithm has exactly one published key (more only during a rotation).
    const es256 = body.keys.filter((k) => k.alg === 'ES256');
    expect(es256).toHaveLength(1);
    const [key] = es256;
    expect(Object.keys(key!).sort()).toEqual(['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y']);
    expect(key).toEqual({
      kty: 'EC',
      crv: 'P-256',
      x: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      y: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      kid: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), // RFC 7638 SHA-256 thumbprint
      alg: 'ES256',
      use: 'sig',
    });
  });

  it('keys of every algorithm carry only public members', async () => {
    await t.addAudience('https://rsa.example.com', { signingAlg: 'RS256' });
    await t.addAudience('https://pss.example.com', { signingAlg: 'PS256' });
    await t.addAudience('https://ed.example.com', { signingAlg: 'EdDSA' });
    const body = (await (await fetch(t.url + JWKS_PATH)).json()) as { keys: Record<string, unknown>[] };
    expect(body.keys.map((k) => k.alg).sort()).toEqual(['ES256', 'EdDSA', 'PS256', 'RS256']);
    for (const key of body.keys) {
      for (const member of PRIVATE_MEMBERS)
        expect(key, `${String(key.alg)} ${member}`).not.toHaveProperty(member);
      const expected =
        key.kty === 'RSA'
          ? ['alg', 'e', 'kid', 'kty', 'n', 'use']
          : key.kty === 'OKP'
            ? ['alg', 'crv', 'kid', 'kty', 'use', 'x']
            : ['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y'];
      expect(Object.keys(key).sort()).toEqual(expected);
      expect(key.use).toBe('sig');
    }
  });

  it('HEAD works', async () => {
    const r = await fetch(t.url + JWKS_PATH, { method: 'HEAD' });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/jwk-set+json; charset=utf-8');
    expect(r.headers.get('cache-control')).toBe('public, max-age=1800'); // half of TESSERA_KEY_PUBLISH_AHEAD
    expect(await r.text()).toBe('');
  });

  it('POST is 405 with Allow: GET, HEAD', async () => {
    const r = await fetch(t.url + JWKS_PATH, {
      method: 'POST',
      body: 'x=1',
      headers: { 'content-type': 'text/plain' },
    });
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toBe('GET, HEAD');
    expect(await r.json()).toEqual({
      error: 'invalid_request',
      error_description: 'method not allowed; use GET or HEAD',
    });
  });
});

describe('health and readiness', () => {
  it('GET /healthz is 200 {status: ok}', async () => {
    const r = await fetch(t.url + '/healthz');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(await r.json()).toEqual({ status: 'ok' });
  });

  it('GET /readyz is 200 with each check ok', async () => {
    const r = await fetch(t.url + '/readyz');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(await r.json()).toEqual({
      status: 'ready',
      checks: { store: 'ok', signing_key: 'ok', change_feed: 'ok' },
    });
  });

  it('HEAD /healthz works', async () => {
    const r = await fetch(t.url + '/healthz', { method: 'HEAD' });
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('');
  });
});

describe('other paths and methods', () => {
  for (const path of ['/nope', '/.well-known/nope', '/oauth/token/', '/oauth/authorize']) {
    it(`GET ${path} is a JSON 404`, async () => {
      const r = await fetch(t.url + path);
      expect(r.status).toBe(404);
      expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await r.json()).toEqual({ error: 'not_found', error_description: 'no such endpoint' });
    });
  }

  it('GET /oauth/token is 405 with Allow: POST', async () => {
    const r = await fetch(t.url + '/oauth/token');
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toBe('POST');
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(await r.json()).toEqual({
      error: 'invalid_request',
      error_description: 'method not allowed; use POST',
    });
  });
});
