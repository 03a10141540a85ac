import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { postToken, startTestServer, type TestServer } from '../helpers/server.js';

describe('smoke', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => t.close());

  it('issues a token', async () => {
    await t.addAudience('https://api.example.com');
    const c = await t.createClient(['https://api.example.com']);
    const r = await postToken(t.url, {
      grant_type: 'client_credentials',
      client_id: c.id,
      client_secret: c.secret,
      audience: 'https://api.example.com',
    });
    expect(r.status).toBe(200);
    expect(decodeProtectedHeader(r.body.access_token as string).typ).toBe('at+jwt');
    expect(decodeJwt(r.body.access_token as string).aud).toBe('https://api.example.com');
  });
});
