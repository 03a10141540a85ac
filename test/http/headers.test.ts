import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Response hygiene: security headers on every answer, whatever the endpoint or outcome. */

const SECURITY = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
};

describe('security headers', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => t.close());

  it.each([
    ['POST', '/oauth/token', 400, 'no-store'],
    ['GET', '/oauth/token', 405, 'no-store'],
    ['GET', '/.well-known/oauth-authorization-server', 200, 'public, max-age=60'],
    ['GET', '/.well-known/jwks.json', 200, 'public, max-age=1800'],
    ['GET', '/healthz', 200, 'no-store'],
    ['GET', '/readyz', 200, 'no-store'],
    ['GET', '/nowhere', 404, 'no-store'],
  ])('%s %s: %d with the security headers and cache-control %s', async (method, path, status, cache) => {
    const response = await fetch(t.url + path, { method });
    expect(response.status).toBe(status);
    for (const [name, value] of Object.entries(SECURITY)) expect(response.headers.get(name)).toBe(value);
    expect(response.headers.get('cache-control')).toBe(cache);
    // HSTS only when the issuer is https (this one is http://localhost).
    expect(response.headers.get('strict-transport-security')).toBeNull();
    expect(response.headers.get('x-powered-by')).toBeNull();
  });

  it('HSTS when the issuer is https', async () => {
    const secure = await startTestServer({ TESSERA_ISSUER: 'https://auth.example.com' });
    try {
      const response = await fetch(`${secure.server.address}/healthz`);
      expect(response.headers.get('strict-transport-security')).toBe('max-age=31536000');
    } finally {
      await secure.close();
    }
  });
});
