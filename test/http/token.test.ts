import { connect } from 'node:net';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenParams } from '../helpers/provision.js';
import {
  basic,
  clientsOfTokenTests,
  postToken,
  startTestServer,
  type TestClient,
  type TestServer,
} from '../helpers/server.js';
import { sleep } from '../helpers/wait.js';

/**
 * The token endpoint, black-box on a real socket: every row of INTERFACE.md's error table with its exact
 * status, headers and body, and the success answer in every encoding and authentication method.
 */

const API = 'https://api.example.com';
const OTHER = 'https://other.example.com';
const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };
const JSON_TYPE = 'application/json; charset=utf-8';
const INVALID_CLIENT = { error: 'invalid_client', error_description: 'client authentication failed' };

type Answer = Awaited<ReturnType<typeof postToken>>;

function expectError(
  answer: Answer,
  status: number,
  body: Record<string, string>,
  headers: Record<string, string> = {},
) {
  expect({ status: answer.status, body: answer.body }).toEqual({ status, body });
  expect(answer.headers.get('content-type')).toBe(JSON_TYPE);
  for (const [name, value] of Object.entries({ ...NO_STORE, ...headers }))
    expect(answer.headers.get(name)).toBe(value);
  if (status !== 401) expect(answer.headers.get('www-authenticate')).toBeNull();
}

function expectInvalidClient(answer: Answer) {
  expectError(answer, 401, INVALID_CLIENT, { 'www-authenticate': 'Basic realm="tessera"' });
}

describe('POST /oauth/token', () => {
  let t: TestServer;
  let client: TestClient;
  let disabled: TestClient;
  let form: (extra?: Record<string, string>) => Record<string, string>;

  beforeAll(async () => {
    t = await startTestServer();
    ({ client, disabled } = await clientsOfTokenTests(t, API, OTHER));
    form = (extra = {}) => ({
      grant_type: 'client_credentials',
      client_id: client.id,
      client_secret: client.secret,
      audience: API,
      ...extra,
    });
  });
  afterAll(async () => t.close());

  describe('success', () => {
    function expectToken(answer: Answer, audience = API) {
      expect(answer.status).toBe(200);
      expect(answer.headers.get('content-type')).toBe(JSON_TYPE);
      expect(answer.headers.get('cache-control')).toBe('no-store');
      expect(answer.headers.get('pragma')).toBe('no-cache');
      expect(answer.body).toEqual({
        access_token: expect.any(String),
        token_type: 'Bearer',
        expires_in: 1800,
      });
      const token = answer.body.access_token as string;
      expect(decodeProtectedHeader(token)).toEqual({ alg: 'ES256', kid: expect.any(String), typ: 'at+jwt' });
      const claims = decodeJwt(token);
      expect(claims).toEqual({
        iss: t.url,
        sub: client.id,
        aud: audience,
        client_id: client.id,
        iat: expect.any(Number),
        exp: (claims.iat as number) + 1800,
        jti: expect.stringMatching(/^[A-Za-z0-9_-]{22,}$/),
      });
    }

    it('client_secret_post, form body', async () => {
      expectToken(await postToken(t.url, form()));
    });

    it('the body is exactly the JSON of its three members, in that order, with its length', async () => {
      const response = await fetch(`${t.url}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(form()).toString(),
      });
      const text = await response.text();
      const { access_token } = JSON.parse(text) as { access_token: string };
      expect(access_token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
      expect(text).toBe(JSON.stringify({ access_token, token_type: 'Bearer', expires_in: 1800 }));
      expect(response.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
      expect(response.headers.get('content-type')).toBe(JSON_TYPE);
    });

    it('client_secret_post, form body with a charset parameter', async () => {
      const body = new URLSearchParams(form()).toString();
      expectToken(
        await postToken(t.url, body, {
          headers: { 'content-type': 'application/x-www-form-urlencoded; charset=UTF-8' },
        }),
      );
    });

    it('client_secret_post, JSON body (Auth0 style)', async () => {
      expectToken(await postToken(t.url, form(), { json: true }));
    });

    it('client_secret_post, JSON body with a charset parameter', async () => {
      expectToken(
        await postToken(t.url, JSON.stringify(form()), {
          headers: { 'content-type': 'application/json; charset=utf-8' },
        }),
      );
    });

    it('client_secret_basic, with and without the same client_id in the body', async () => {
      const headers = { authorization: basic(client.id, client.secret) };
      expectToken(await postToken(t.url, { grant_type: 'client_credentials', audience: API }, { headers }));
      expectToken(
        await postToken(
          t.url,
          { grant_type: 'client_credentials', audience: API, client_id: client.id },
          { headers },
        ),
      );
    });

    it('client_secret_basic with a lower-case scheme name', async () => {
      const headers = { authorization: basic(client.id, client.secret).replace('Basic', 'basic') };
      expectToken(await postToken(t.url, { grant_type: 'client_credentials', audience: API }, { headers }));
    });

    it('resource (RFC 8707) as a synonym of audience', async () => {
      const { audience: _ignored, ...rest } = form();
      expectToken(await postToken(t.url, { ...rest, resource: API }));
    });

    it('unknown parameters are ignored', async () => {
      expectToken(await postToken(t.url, form({ foo: 'bar', nonce: 'x' })));
      expectToken(await postToken(t.url, { ...form(), extra: ['a', 1] } as never, { json: true }));
    });

    it('each token has its own jti', async () => {
      const a = decodeJwt((await postToken(t.url, form())).body.access_token as string).jti;
      const b = decodeJwt((await postToken(t.url, form())).body.access_token as string).jti;
      expect(a).not.toBe(b);
    });
  });

  describe('401 invalid_client', () => {
    it('unknown client', async () => {
      expectInvalidClient(await postToken(t.url, form({ client_id: 'no-such-client' })));
    });

    it('wrong secret', async () => {
      expectInvalidClient(await postToken(t.url, form({ client_secret: client.secret + 'x' })));
    });

    it('secret with a NUL byte appended', async () => {
      expectInvalidClient(await postToken(t.url, form({ client_secret: client.secret + '\u0000' })));
    });

    it('disabled client, with its right secret', async () => {
      expectInvalidClient(
        await postToken(t.url, form({ client_id: disabled.id, client_secret: disabled.secret })),
      );
    });

    it('unknown client and wrong secret give byte-identical answers', async () => {
      const unknown = await fetch(`${t.url}/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams(form({ client_id: 'nobody' })),
      });
      const wrong = await fetch(`${t.url}/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams(form({ client_secret: 'wrong' })),
      });
      const strip = (h: Headers) => [...h].filter(([k]) => k !== 'date');
      expect(strip(unknown.headers)).toEqual(strip(wrong.headers));
      expect(await unknown.text()).toBe(await wrong.text());
    });

    it('wrong Basic credentials', async () => {
      const headers = { authorization: basic(client.id, 'wrong') };
      expectInvalidClient(
        await postToken(t.url, { grant_type: 'client_credentials', audience: API }, { headers }),
      );
    });

    it.each([
      ['not base64', 'Basic %%%'],
      ['base64 without a colon', 'Basic ' + Buffer.from('justanid').toString('base64')],
      ['bad percent-encoding', 'Basic ' + Buffer.from('%zz:secret').toString('base64')],
      ['empty secret', 'Basic ' + Buffer.from('id:').toString('base64')],
      ['empty credentials', 'Basic '],
      ['another scheme', 'Bearer abc'],
      ['invalid UTF-8', 'Basic ' + Buffer.from([0xff, 0xfe, 0x3a, 0x61]).toString('base64')],
    ])('malformed Basic header: %s', async (_name, authorization) => {
      expectInvalidClient(
        await postToken(
          t.url,
          { grant_type: 'client_credentials', audience: API },
          { headers: { authorization } },
        ),
      );
    });

    it('credentials are checked before anything else is revealed', async () => {
      const wrong = { client_secret: 'wrong' };
      expectInvalidClient(await postToken(t.url, form({ ...wrong, grant_type: 'password' })));
      expectInvalidClient(
        await postToken(t.url, form({ ...wrong, audience: 'https://unknown.example.com' })),
      );
      expectInvalidClient(await postToken(t.url, form({ ...wrong, audience: OTHER })));
      expectInvalidClient(await postToken(t.url, form({ ...wrong, scope: 'read' })));
    });
  });

  describe('400 invalid_request', () => {
    it.each([
      ['client_id', 'client_id is required'],
      ['client_secret', 'client_secret is required'],
      ['grant_type', 'grant_type is required'],
      ['audience', 'audience is required'],
    ])('%s missing', async (name, description) => {
      const body = form();
      delete body[name];
      expectError(await postToken(t.url, body), 400, {
        error: 'invalid_request',
        error_description: description,
      });
    });

    it.each([
      ['client_id', 'client_id is required'],
      ['client_secret', 'client_secret is required'],
      ['grant_type', 'grant_type is required'],
      ['audience', 'audience is required'],
    ])('%s empty', async (name, description) => {
      expectError(await postToken(t.url, form({ [name]: '' })), 400, {
        error: 'invalid_request',
        error_description: description,
      });
    });

    it('no body at all', async () => {
      expectError(await postToken(t.url, undefined), 400, {
        error: 'invalid_request',
        error_description: 'client_id is required',
      });
    });

    it.each(['client_id', 'client_secret', 'grant_type', 'audience'])('%s sent twice', async (name) => {
      const body = new URLSearchParams(form());
      body.append(name, form()[name]!);
      const headers = { 'content-type': 'application/x-www-form-urlencoded' };
      expectError(await postToken(t.url, body.toString(), { headers }), 400, {
        error: 'invalid_request',
        error_description: `parameter ${name} is sent more than once`,
      });
    });

    it.each([
      ['client_id', `{"client_id":"a","client_secret":"b","client_id":"c"}`],
      ['audience', `{"audience":"${API}", "grant_type":"client_credentials",\n "audience" : "${OTHER}"}`],
      ['client_secret', `{"client_secret":"x","client_secret":"x"}`],
    ])('%s sent twice in a JSON body', async (name, json) => {
      expectError(await postToken(t.url, json, { headers: { 'content-type': 'application/json' } }), 400, {
        error: 'invalid_request',
        error_description: `parameter ${name} is sent more than once`,
      });
    });

    it('the same name twice in nested JSON or in an unknown parameter is no duplicate', async () => {
      const json = JSON.stringify(form()).replace(
        /}$/,
        ',"x":{"client_id":1,"y":["client_id"]},"z":1,"z":2}',
      );
      const answer = await postToken(t.url, json, { headers: { 'content-type': 'application/json' } });
      expect(answer.status).toBe(200);
    });

    it('Basic and client_secret in the body at once', async () => {
      const headers = { authorization: basic(client.id, client.secret) };
      expectError(await postToken(t.url, form(), { headers }), 400, {
        error: 'invalid_request',
        error_description:
          'use one client authentication method: HTTP Basic or client_secret in the body, not both',
      });
    });

    it('Basic with another client_id in the body', async () => {
      const headers = { authorization: basic(client.id, client.secret) };
      expectError(
        await postToken(
          t.url,
          { grant_type: 'client_credentials', audience: API, client_id: disabled.id },
          { headers },
        ),
        400,
        {
          error: 'invalid_request',
          error_description: 'client_id in the body does not match the client authenticated by HTTP Basic',
        },
      );
    });

    it('audience and resource at once', async () => {
      expectError(await postToken(t.url, form({ resource: API })), 400, {
        error: 'invalid_request',
        error_description: 'send audience or resource, not both',
      });
    });

    it('malformed JSON', async () => {
      expectError(
        await postToken(t.url, '{"client_id": ', { headers: { 'content-type': 'application/json' } }),
        400,
        {
          error: 'invalid_request',
          error_description: 'the request body is malformed',
        },
      );
    });

    it('empty JSON body', async () => {
      expectError(await postToken(t.url, '', { headers: { 'content-type': 'application/json' } }), 400, {
        error: 'invalid_request',
        error_description: 'the JSON body is empty',
      });
    });

    it.each([['[]'], ['"text"'], ['42'], ['null']])('JSON body that is not an object: %s', async (json) => {
      expectError(await postToken(t.url, json, { headers: { 'content-type': 'application/json' } }), 400, {
        error: 'invalid_request',
        error_description: 'the JSON body must be an object',
      });
    });

    it.each([
      ['an array', ['a']],
      ['a number', 42],
      ['an object', { a: 1 }],
      ['a boolean', true],
    ])('a JSON value that is %s', async (_name, value) => {
      expectError(await postToken(t.url, { ...form(), client_id: value } as never, { json: true }), 400, {
        error: 'invalid_request',
        error_description: 'parameter client_id must be a string',
      });
    });

    it('JSON prototype poisoning', async () => {
      const body = `{"__proto__": {"x": 1}, "client_id": "${client.id}"}`;
      expectError(await postToken(t.url, body, { headers: { 'content-type': 'application/json' } }), 400, {
        error: 'invalid_request',
        error_description: 'the request body is malformed',
      });
    });
  });

  describe('400 after authentication', () => {
    it('unsupported_grant_type', async () => {
      for (const grant of ['password', 'authorization_code', 'refresh_token', 'CLIENT_CREDENTIALS']) {
        expectError(await postToken(t.url, form({ grant_type: grant })), 400, {
          error: 'unsupported_grant_type',
          error_description:
            'grant_type must be client_credentials or urn:ietf:params:oauth:grant-type:token-exchange',
        });
      }
    });

    it('invalid_target: audience not registered', async () => {
      for (const audience of ['https://unknown.example.com', `${API}/`, 'not a url']) {
        expectError(await postToken(t.url, form({ audience })), 400, {
          error: 'invalid_target',
          error_description: 'the requested audience is not registered',
        });
      }
    });

    it('invalid_target: audience registered but not granted to this client', async () => {
      expectError(await postToken(t.url, form({ audience: OTHER })), 400, {
        error: 'invalid_target',
        error_description: 'the requested audience is not granted to this client',
      });
    });

    it('invalid_target through resource too', async () => {
      const { audience: _ignored, ...rest } = form();
      expectError(await postToken(t.url, { ...rest, resource: OTHER }), 400, {
        error: 'invalid_target',
        error_description: 'the requested audience is not granted to this client',
      });
    });

    it('invalid_scope', async () => {
      expectError(await postToken(t.url, form({ scope: 'read:things' })), 400, {
        error: 'invalid_scope',
        error_description: 'scope read:things is not granted to this client for this audience',
      });
    });
  });

  describe('415, 413, 405', () => {
    const type415 = {
      error: 'invalid_request',
      error_description: 'the body must be application/x-www-form-urlencoded or application/json',
    };

    it.each([
      ['text/plain'],
      ['multipart/form-data; boundary=x'],
      ['application/xml'],
      ['application/jsonp'],
    ])('415 for %s', async (type) => {
      const body = new URLSearchParams(form()).toString();
      expectError(await postToken(t.url, body, { headers: { 'content-type': type } }), 415, type415);
    });

    it('415 for a body without a content type', async () => {
      const response = await fetch(`${t.url}/oauth/token`, {
        method: 'POST',
        body: new Blob([new URLSearchParams(form()).toString()]),
      });
      expect(response.status).toBe(415);
      expect(await response.json()).toEqual(type415);
      expect(response.headers.get('cache-control')).toBe('no-store');
    });

    it('413 for a body over the limit, form and JSON', async () => {
      const big = 'x'.repeat(9000);
      const body = {
        error: 'invalid_request',
        error_description: 'the request body is larger than 8192 bytes',
      };
      expectError(await postToken(t.url, form({ padding: big })), 413, body);
      expectError(await postToken(t.url, form({ padding: big }), { json: true }), 413, body);
    });

    it.each(['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'])('405 for %s, with Allow: POST', async (method) => {
      const response = await fetch(`${t.url}/oauth/token`, {
        method,
        headers: { 'content-type': 'text/plain' },
        body: method === 'GET' ? undefined : 'x',
      });
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('POST');
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(await response.json()).toEqual({
        error: 'invalid_request',
        error_description: 'method not allowed; use POST',
      });
    });

    it('405 for HEAD, with Allow: POST', async () => {
      const response = await fetch(`${t.url}/oauth/token`, { method: 'HEAD' });
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('POST');
    });
  });
});

describe('408 for a request that does not arrive in time', () => {
  it('headers, then half the body, then nothing: 408 invalid_request and the connection is closed', async () => {
    const t = await startTestServer({ TESSERA_REQUEST_TIMEOUT: '1' });
    try {
      const { port } = new URL(t.url);
      const socket = connect(Number(port), '127.0.0.1');
      let received = '';
      socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
      const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
      const started = Date.now();
      socket.write(
        'POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n' +
          'Content-Length: 100\r\n\r\ngrant_type=client',
      );
      const elapsed = (await closed) - started;
      expect(elapsed).toBeGreaterThanOrEqual(900);
      expect(elapsed).toBeLessThan(5000);
      const [head, body] = received.split('\r\n\r\n') as [string, string];
      expect(head.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
      expect(head.toLowerCase()).toContain('\r\nconnection: close');
      expect(head.toLowerCase()).toContain('\r\ncache-control: no-store');
      expect(JSON.parse(body)).toEqual({
        error: 'invalid_request',
        error_description: 'the request was not received in time',
      });
    } finally {
      await t.close();
    }
  });
});

/** Two clients of API, one of them cached by a first token, and how to ask for a token. */
async function cachedAndNot(t: TestServer) {
  await t.addAudience(API);
  const cached = await t.createClient([API]);
  const uncached = await t.createClient([API]);
  const request = (c: TestClient) => postToken(t.url, tokenParams(c.id, c.secret, API));
  expect((await request(cached)).status).toBe(200);
  return { cached, uncached, request };
}

describe('503 temporarily_unavailable', () => {
  it('a client that is not cached cannot be authenticated while the store is down', async () => {
    const t = await startTestServer();
    try {
      const { cached, uncached, request } = await cachedAndNot(t);

      // Take the store away under the running server.
      await t.server.runtime.store.close();

      expectError(
        await request(uncached),
        503,
        {
          error: 'temporarily_unavailable',
          error_description: 'the service cannot answer right now; try again later',
        },
        { 'retry-after': '5' },
      );
      // A warm client needs no store: still served.
      expect((await request(cached)).status).toBe(200);
      // And the instance says it is not ready, so a load balancer sends traffic elsewhere.
      const ready = await fetch(`${t.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toEqual({
        status: 'not_ready',
        checks: { store: 'unreachable', signing_key: 'ok', change_feed: 'ok' },
      });
    } finally {
      await t.server.app.close();
    }
  });

  it('TESSERA_RETRY_AFTER sets its Retry-After: for a client not cached at once, for a cached one past the stale window', async () => {
    const t = await startTestServer({ TESSERA_RETRY_AFTER: '30s', TESSERA_STALE_WINDOW: '2' });
    try {
      expect(t.config.retryAfter).toBe(30);
      const { cached, uncached, request } = await cachedAndNot(t);
      await t.server.runtime.store.close();
      const unavailable = {
        error: 'temporarily_unavailable',
        error_description: 'the service cannot answer right now; try again later',
      };
      expectError(await request(uncached), 503, unavailable, { 'retry-after': '30' });
      expect((await request(cached)).status).toBe(200);
      // The change feed has not been read for longer than the stale window: the cached client is refused too.
      await sleep(2500);
      expectError(await request(cached), 503, unavailable, { 'retry-after': '30' });
    } finally {
      await t.server.app.close();
    }
  });
});
