import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  basic,
  clientsOfTokenTests,
  startTestServer,
  type TestClient,
  type TestServer,
} from '../helpers/server.js';

/**
 * Hostile input at the token endpoint, on a real socket: every answer exact (status, OAuth body, no-store),
 * never a 500, never a stack or an "Error:" in a body, and the server still answers /healthz afterwards.
 * test/http/token.test.ts has the plain error table; this file is about what an attacker would send.
 *
 * Failed authentications are rate limited per source address, so the server trusts X-Forwarded-For from
 * loopback and every request comes from its own address unless a test says otherwise.
 */

const API = 'https://api.example.com';
const OTHER = 'https://other.example.com';
const JSON_TYPE = 'application/json; charset=utf-8';
const FORM_TYPE = 'application/x-www-form-urlencoded';
const CHALLENGE = 'Basic realm="tessera"';

const INVALID_CLIENT = ['invalid_client', 'client authentication failed'] as const;
const UNSUPPORTED_GRANT = [
  'unsupported_grant_type',
  'grant_type must be client_credentials or urn:ietf:params:oauth:grant-type:token-exchange',
] as const;
const NOT_REGISTERED = ['invalid_target', 'the requested audience is not registered'] as const;
const NOT_GRANTED = ['invalid_target', 'the requested audience is not granted to this client'] as const;
/** A scope outside RFC 6749 §3.3's characters. */
const BAD_SCOPE = [
  'invalid_scope',
  'scope must be scope tokens separated by single spaces (RFC 6749 section 3.3)',
] as const;
const MALFORMED = ['invalid_request', 'the request body is malformed'] as const;
const NOT_OBJECT = ['invalid_request', 'the JSON body must be an object'] as const;
const TOO_LARGE = ['invalid_request', 'the request body is larger than 8192 bytes'] as const;
const UNSUPPORTED_TYPE = [
  'invalid_request',
  'the body must be application/x-www-form-urlencoded or application/json',
] as const;
const required = (name: string) => ['invalid_request', `${name} is required`] as const;
const twice = (name: string) => ['invalid_request', `parameter ${name} is sent more than once`] as const;
const notString = (name: string) => ['invalid_request', `parameter ${name} must be a string`] as const;
/** MANAGEMENT.md: every JSON body nests at most 32 levels, the token endpoint's too. */
const TOO_DEEP = ['invalid_request', 'the JSON body nests deeper than 32 levels'] as const;

type Expected = readonly [error: string, description: string];

let t: TestServer;
let port: number;
let client: TestClient;
let disabled: TestClient;

/** A fresh source address per request (10.a.b.c from a counter), so no test trips the failure limits. */
let sourceCounter = 0;
function nextSource(): string {
  const n = ++sourceCounter;
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

/** POST /oauth/token with exactly this body (string or raw bytes) and these headers, from a fresh address. */
async function send(
  body: string | Uint8Array | undefined,
  headers: Record<string, string> = {},
  source = nextSource(),
): Promise<Answer> {
  const response = await fetch(`${t.url}/oauth/token`, {
    method: 'POST',
    headers: { 'x-forwarded-for': source, ...headers },
    body,
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

const sendForm = (body: string | Uint8Array, headers: Record<string, string> = {}, source?: string) =>
  send(body, { 'content-type': FORM_TYPE, ...headers }, source);
const sendJson = (body: string | Uint8Array, headers: Record<string, string> = {}, source?: string) =>
  send(body, { 'content-type': 'application/json', ...headers }, source);

/** The four required parameters of a good request for `client`, with any of them replaced or dropped. */
function params(overrides: Record<string, unknown> = {}, c: TestClient = client): Record<string, unknown> {
  const all: Record<string, unknown> = {
    grant_type: 'client_credentials',
    client_id: c.id,
    client_secret: c.secret,
    audience: API,
    ...overrides,
  };
  for (const [k, v] of Object.entries(all)) if (v === undefined) delete all[k];
  return all;
}
const formOf = (p: Record<string, unknown>) => new URLSearchParams(p as Record<string, string>).toString();

function expectNoLeak(text: string) {
  expect(text).not.toContain('Error:');
  expect(text).not.toMatch(/\n\s+at /);
  expect(text).not.toContain('node:internal');
  expect(text).not.toContain(client.secret);
}

/** An exact OAuth error answer. */
function expectError(answer: Answer, status: number, [error, description]: Expected) {
  expectNoLeak(answer.text);
  expect({ status: answer.status, body: JSON.parse(answer.text) as unknown }).toEqual({
    status,
    body: { error, error_description: description },
  });
  expect(answer.headers.get('content-type')).toBe(JSON_TYPE);
  expect(answer.headers.get('cache-control')).toBe('no-store');
  expect(answer.headers.get('pragma')).toBe('no-cache');
  expect(answer.headers.get('www-authenticate')).toBe(status === 401 ? CHALLENGE : null);
}

const expectInvalidClient = (answer: Answer) => expectError(answer, 401, INVALID_CLIENT);

function expectToken(answer: Answer) {
  expectNoLeak(answer.text);
  expect(answer.status).toBe(200);
  expect(answer.headers.get('cache-control')).toBe('no-store');
  expect(JSON.parse(answer.text)).toEqual({
    access_token: expect.stringMatching(/^[\w-]+\.[\w-]+\.[\w-]+$/),
    token_type: 'Bearer',
    expires_in: 1800,
  });
}

// --- raw sockets, for what fetch will not send ---

interface RawAnswer {
  /** Everything received, as latin1. */
  text: string;
  /** Whether the server closed the connection before `waitMs`. */
  closed: boolean;
  elapsedMs: number;
  status: number | undefined;
  headers: Record<string, string>;
  body: string;
}

/** Writes bytes to the server and collects the answer until it closes the connection or `waitMs` passes. */
function rawRequest(
  data: string | Buffer,
  options: { waitMs?: number; end?: boolean } = {},
): Promise<RawAnswer> {
  const waitMs = options.waitMs ?? 2000;
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let settled = false;
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...headerLines] = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of headerLines) {
        const colon = line.indexOf(':');
        if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine)?.[1];
      resolve({
        text,
        closed,
        elapsedMs: Date.now() - started,
        status: status === undefined ? undefined : Number(status),
        headers,
        body: rest.join('\r\n\r\n'),
      });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('close', () => finish(true));
    socket.on('error', () => undefined);
    socket.write(data);
    if (options.end) socket.end();
  });
}

/** An exact OAuth error on a raw socket. */
function expectRawError(answer: RawAnswer, status: number, [error, description]: Expected) {
  expectNoLeak(answer.text);
  expect(answer.status).toBe(status);
  expect(answer.headers['cache-control']).toBe('no-store');
  expect(answer.headers['content-type']).toBe(JSON_TYPE);
  expect(JSON.parse(answer.body)).toEqual({ error, error_description: description });
}

/** Node's HTTP parser refusals, answered as OAuth errors (src/http/errors.ts clientErrorHandler). */
const HEADERS_TOO_LARGE: Expected = ['invalid_request', 'the request headers are too large'];
const NOT_HTTP: Expected = ['invalid_request', 'the request is not valid HTTP/1.1'];

/** What Node's HTTP parser answers by itself (400/413/414/431, or nothing) is fine; a 5xx or a stack is not. */
function expectNodeRefusal(answer: RawAnswer, allowed: number[]) {
  expectNoLeak(answer.text);
  if (answer.status === undefined) expect(answer.closed).toBe(true);
  else expect(allowed).toContain(answer.status);
}

const head = (lines: string[]) => lines.join('\r\n') + '\r\n\r\n';

beforeAll(async () => {
  t = await startTestServer({ TESSERA_TRUST_PROXY: 'loopback' });
  port = Number(new URL(t.url).port);
  ({ client, disabled } = await clientsOfTokenTests(t, API, OTHER));
});
afterAll(async () => t?.close());

afterEach(async () => {
  const health = await fetch(`${t.url}/healthz`);
  expect(health.status).toBe(200);
});

describe('NUL bytes', () => {
  // Functions, because the client exists only once the server runs.
  const cases: [string, () => Record<string, unknown>, number, Expected][] = [
    ['client_id with a NUL appended', () => ({ client_id: `${client.id}\u0000` }), 401, INVALID_CLIENT],
    ['client_id with a NUL prepended', () => ({ client_id: `\u0000${client.id}` }), 401, INVALID_CLIENT],
    ['client_id that is a NUL', () => ({ client_id: '\u0000' }), 401, INVALID_CLIENT],
    [
      'client_secret with a NUL prepended',
      () => ({ client_secret: `\u0000${client.secret}` }),
      401,
      INVALID_CLIENT,
    ],
    [
      'client_secret with a NUL in the middle',
      () => ({ client_secret: `${client.secret.slice(0, 20)}\u0000${client.secret.slice(20)}` }),
      401,
      INVALID_CLIENT,
    ],
    [
      'client_secret with a NUL appended',
      () => ({ client_secret: `${client.secret}\u0000` }),
      401,
      INVALID_CLIENT,
    ],
    ['client_secret that is a NUL', () => ({ client_secret: '\u0000' }), 401, INVALID_CLIENT],
    [
      'grant_type with a NUL appended',
      () => ({ grant_type: 'client_credentials\u0000' }),
      400,
      UNSUPPORTED_GRANT,
    ],
    ['grant_type that is a NUL', () => ({ grant_type: '\u0000' }), 400, UNSUPPORTED_GRANT],
    ['audience with a NUL appended', () => ({ audience: `${API}\u0000` }), 400, NOT_REGISTERED],
    ['audience that is a NUL', () => ({ audience: '\u0000' }), 400, NOT_REGISTERED],
    [
      'resource with a NUL appended',
      () => ({ audience: undefined, resource: `${API}\u0000` }),
      400,
      NOT_REGISTERED,
    ],
    ['scope that is a NUL', () => ({ scope: '\u0000' }), 400, BAD_SCOPE],
    [
      'a NUL in the name client_id',
      () => ({ client_id: undefined, 'client_id\u0000': client.id }),
      400,
      required('client_id'),
    ],
    [
      'a NUL in the name audience',
      () => ({ audience: undefined, '\u0000audience': API }),
      400,
      required('audience'),
    ],
  ];

  it.each(cases)('form (NUL percent-encoded): %s', async (_name, overrides, status, expected) => {
    const body = formOf(params(overrides()));
    expect(body).toContain('%00');
    expectError(await sendForm(body), status, expected);
  });

  it.each(cases)('JSON (\\u0000): %s', async (_name, overrides, status, expected) => {
    const body = JSON.stringify(params(overrides()));
    expect(body).toContain('\\u0000');
    expectError(await sendJson(body), status, expected);
  });

  it('a raw NUL byte inside a JSON string is malformed JSON', async () => {
    const body = JSON.stringify(params()).replace(client.secret, `${client.secret}\u0000`);
    expect(body).toContain('\u0000');
    expectError(await sendJson(body), 400, MALFORMED);
  });

  it('a raw NUL byte in a form value is part of the value: a wrong secret', async () => {
    const body = formOf(params()).replace(client.secret, `${client.secret}\u0000`);
    expectInvalidClient(await sendForm(body));
  });

  it('a NUL in the Basic credentials', async () => {
    const body = formOf({ grant_type: 'client_credentials', audience: API });
    expectInvalidClient(await sendForm(body, { authorization: basic(client.id, `${client.secret}\u0000`) }));
    expectInvalidClient(await sendForm(body, { authorization: basic(`${client.id}\u0000`, client.secret) }));
    const raw = 'Basic ' + Buffer.from(`${client.id}\u0000:${client.secret}`).toString('base64');
    expectInvalidClient(await sendForm(body, { authorization: raw }));
  });
});

describe('invalid UTF-8', () => {
  it.each([
    ['client_id', (): string => `client_id=%FF%FE`, 401, INVALID_CLIENT],
    ['client_id, appended', (): string => `client_id=${client.id}%FF%FE`, 401, INVALID_CLIENT],
    ['client_secret, appended', (): string => `client_secret=${client.secret}%FF%FE`, 401, INVALID_CLIENT],
    [
      'client_secret, a UTF-8 lone surrogate',
      (): string => `client_secret=${client.secret}%ED%A0%80`,
      401,
      INVALID_CLIENT,
    ],
    ['grant_type', (): string => `grant_type=client_credentials%FF%FE`, 400, UNSUPPORTED_GRANT],
    ['audience', (): string => `audience=${encodeURIComponent(API)}%FF%FE`, 400, NOT_REGISTERED],
    ['scope', (): string => `scope=%FF%FE`, 400, BAD_SCOPE],
  ] as const)('invalid UTF-8 (FF FE) in the form value of %s', async (_name, pair, status, expected) => {
    const value = pair();
    const p = params();
    delete p[value.split('=')[0]!];
    expectError(await sendForm(`${formOf(p)}&${value}`), status, expected);
  });

  it('%FF%FE in a parameter name makes it an unknown parameter', async () => {
    const body = formOf(params()).replace('client_id=', 'client_id%FF%FE=');
    expectError(await sendForm(body), 400, required('client_id'));
  });

  it('a form body that is only invalid UTF-8', async () => {
    expectError(await sendForm('%FF%FE'), 400, required('client_id'));
    expectError(await sendForm(Buffer.from([0xff, 0xfe, 0xfd])), 400, required('client_id'));
  });

  it('raw invalid bytes in a form value', async () => {
    const body = Buffer.concat([Buffer.from(formOf(params())), Buffer.from([0xff, 0xfe])]); // after the audience
    expectError(await sendForm(body), 400, NOT_REGISTERED);
    const secret = Buffer.concat([
      Buffer.from(formOf(params({ client_secret: undefined })) + `&client_secret=${client.secret}`),
      Buffer.from([0xc0, 0xaf]), // an overlong encoding of '/'
    ]);
    expectInvalidClient(await sendForm(secret));
  });

  const jsonWith = (name: string, bytes: number[], o: Record<string, unknown> = {}) => {
    const marker = '@@BYTES@@';
    const text = JSON.stringify(params({ [name]: `${String(params()[name] ?? '')}${marker}`, ...o }));
    const [before, after] = text.split(marker) as [string, string];
    return Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]);
  };

  it.each([
    ['client_id', [0xff, 0xfe], 401, INVALID_CLIENT],
    ['client_secret', [0xff, 0xfe], 401, INVALID_CLIENT],
    ['client_secret', [0xc0, 0xa2], 401, INVALID_CLIENT], // an overlong encoding of '"'
    ['client_secret', [0xed, 0xa0, 0x80], 401, INVALID_CLIENT], // a UTF-8 encoded lone surrogate
    ['grant_type', [0xff], 400, UNSUPPORTED_GRANT],
    ['audience', [0x80], 400, NOT_REGISTERED],
    ['scope', [0xfe], 400, BAD_SCOPE],
  ] as const)('raw invalid bytes in the JSON string %s: %j', async (name, bytes, status, expected) => {
    expectError(await sendJson(jsonWith(name, [...bytes])), status, expected);
  });

  it('raw invalid bytes outside a JSON string are malformed JSON', async () => {
    const text = JSON.stringify(params());
    const body = Buffer.concat([
      Buffer.from(text.slice(0, -1)),
      Buffer.from([0x2c, 0xff, 0xfe]),
      Buffer.from('}'),
    ]);
    expectError(await sendJson(body), 400, MALFORMED);
    expectError(await sendJson(Buffer.from([0xef, 0xbb, 0xbf, 0xff])), 400, MALFORMED);
  });

  it('a lone surrogate escape in JSON', async () => {
    const body = JSON.stringify(params()).replace(client.secret, `${client.secret}\\ud800`);
    expectInvalidClient(await sendJson(body));
    const aud = JSON.stringify(params()).replace(API, `${API}\\udfff`);
    expectError(await sendJson(aud), 400, NOT_REGISTERED);
  });
});

describe('over-long values within the 8 KiB limit', () => {
  const long = 'a'.repeat(8000);

  it('an 8 000-character client_id is an unknown client (form and JSON)', async () => {
    const p = params({ client_id: long });
    expect(formOf(p).length).toBeLessThan(8192);
    expectInvalidClient(await sendForm(formOf(p)));
    expectInvalidClient(await sendJson(JSON.stringify(p)));
  });

  it('an 8 000-character client_secret is a wrong secret', async () => {
    expectInvalidClient(await sendForm(formOf(params({ client_secret: long }))));
  });

  it('an 8 000-character audience is not registered (after a successful authentication)', async () => {
    const p = params({ audience: `https://${long}.example.com` });
    expect(formOf(p).length).toBeLessThan(8192);
    expectError(await sendForm(formOf(p)), 400, NOT_REGISTERED);
    expectError(await sendJson(JSON.stringify(p)), 400, NOT_REGISTERED);
  });

  it('an 8 000-character grant_type or scope', async () => {
    expectError(await sendForm(formOf(params({ grant_type: long }))), 400, UNSUPPORTED_GRANT);
    // Named in the description, cut at 128 characters (the longest scope an audience may define).
    expectError(await sendForm(formOf(params({ scope: long }))), 400, [
      'invalid_scope',
      `scope ${'a'.repeat(128)} is not granted to this client for this audience`,
    ]);
  });

  it('an 8 000-character client id in a Basic header', async () => {
    const body = formOf({ grant_type: 'client_credentials', audience: API });
    expectInvalidClient(await sendForm(body, { authorization: basic(long.slice(0, 6000), client.secret) }));
  });

  it('exactly 8 192 bytes is accepted, 8 193 is a 413', async () => {
    const padded = (n: number) => {
      const start = `${formOf(params())}&padding=`;
      return start + 'x'.repeat(n - start.length);
    };
    expectToken(await sendForm(padded(8192)));
    expectError(await sendForm(padded(8193)), 413, TOO_LARGE);
  });
});

describe('JSON values that are not strings', () => {
  const kinds: [string, unknown][] = [
    ['an array', ['client_credentials']],
    ['an empty array', []],
    ['an object', { value: 'x' }],
    ['a number', 0],
    ['a boolean', false],
  ];
  // client_id is covered by test/http/token.test.ts.
  const names = ['grant_type', 'client_secret', 'audience', 'resource', 'scope'];
  const cases = names.flatMap((name) => kinds.map(([kind, value]) => [name, kind, value] as const));

  it.each(cases)('%s that is %s', async (name, _kind, value) => {
    expectError(await sendJson(JSON.stringify(params({ [name]: value }))), 400, notString(name));
  });

  it.each([
    ['client_id', required('client_id')],
    ['client_secret', required('client_secret')],
    ['grant_type', required('grant_type')],
    ['audience', required('audience')],
  ] as const)('%s null counts as absent', async (name, expected) => {
    expectError(await sendJson(JSON.stringify(params({ [name]: null }))), 400, expected);
  });

  it('scope and resource null count as absent: a token', async () => {
    expectToken(await sendJson(JSON.stringify(params({ scope: null, resource: null }))));
  });

  it('client_id and client_secret null with Basic: a token', async () => {
    const body = JSON.stringify(params({ client_id: null, client_secret: null }));
    expectToken(await sendJson(body, { authorization: basic(client.id, client.secret) }));
  });

  it('wrong credentials and a non-string value: the malformed body is refused first, revealing nothing', async () => {
    const body = JSON.stringify(params({ client_secret: 'wrong', audience: 42 }));
    expectError(await sendJson(body), 400, notString('audience'));
  });
});

describe('deeply nested JSON', () => {
  it('10 000 levels of [ are over the limit: 413', async () => {
    expectError(await sendJson('['.repeat(10_000)), 413, TOO_LARGE);
  });

  it('8 000 unclosed levels of [ within the limit: malformed', async () => {
    expectError(await sendJson('['.repeat(8000)), 400, MALFORMED);
  });

  it('4 000 balanced levels of [ ]: deeper than 32 levels', async () => {
    expectError(await sendJson('['.repeat(4000) + ']'.repeat(4000)), 400, TOO_DEEP);
    // Within the depth, an array is still not an object.
    expectError(await sendJson('['.repeat(32) + ']'.repeat(32)), 400, NOT_OBJECT);
  });

  it('a parameter that is 4 000 levels of arrays: deeper than 32 levels', async () => {
    const body = `{"client_id":${'['.repeat(4000)}${']'.repeat(4000)}}`;
    expect(body.length).toBeLessThan(8192);
    expectError(await sendJson(body), 400, TOO_DEEP);
  });

  it('1 300 levels of nested objects beside good parameters: deeper than 32 levels, no token', async () => {
    const nested = '{"client_id":'.repeat(1) + '{"a":'.repeat(1300) + '1' + '}'.repeat(1300) + '}';
    const body = JSON.stringify(params()).slice(0, -1) + `,"x":${nested}}`;
    expect(body.length).toBeLessThan(8192);
    expectError(await sendJson(body), 400, TOO_DEEP);
  });

  it('32 levels beside good parameters: a token; 33: refused', async () => {
    const nested = (levels: number) => '['.repeat(levels - 1) + ']'.repeat(levels - 1);
    const body = (levels: number) => JSON.stringify(params()).slice(0, -1) + `,"x":${nested(levels)}}`;
    expectToken(await sendJson(body(32)));
    expectError(await sendJson(body(33)), 400, TOO_DEEP);
  });

  it('brackets and escaped quotes inside strings do not hide a duplicate', async () => {
    const good = JSON.stringify(params()).slice(1, -1);
    expectError(await sendJson(`{"x":"]]]}}}\\"{{","client_id":"a",${good}}`), 400, twice('client_id'));
    expectError(
      await sendJson(`{"x":["}",{"y":"]"}],${good},"audience":"${OTHER}"}`),
      400,
      twice('audience'),
    );
  });

  it('brackets and quotes inside strings do not invent a duplicate', async () => {
    const good = JSON.stringify(params()).slice(1, -1);
    expectToken(await sendJson(`{"x":"{\\"client_id\\":1}","y":"[\\"audience\\"]",${good}}`));
    expectToken(await sendJson(`{"client_id\\u0000":"x","Client_Id":"y",${good}}`));
  });
});

describe('duplicate parameters and names', () => {
  it('an escaped name is the same name: client\\u005fid twice', async () => {
    const body = JSON.stringify(params()).replace(/}$/, ',"client\\u005fid":"other"}');
    expectError(await sendJson(body), 400, twice('client_id'));
  });

  it('a percent-encoded name is the same name: client%5Fid twice', async () => {
    expectError(await sendForm(`${formOf(params())}&client%5Fid=other`), 400, twice('client_id'));
  });

  it.each(['scope', 'resource'])('%s twice, even empty, in a form body', async (name) => {
    expectError(await sendForm(`${formOf(params())}&${name}=&${name}=`), 400, twice(name));
  });

  it.each(['scope', 'resource', 'grant_type'])('%s twice in a JSON body, even null', async (name) => {
    const body = JSON.stringify(params()).replace(/}$/, `,"${name}":null,"${name}":null}`);
    expectError(await sendJson(body), 400, twice(name));
  });

  it('a duplicate with wrong credentials is refused as a duplicate (nothing about the client is revealed)', async () => {
    const body = `${formOf(params({ client_secret: 'wrong' }))}&audience=${encodeURIComponent(API)}`;
    expectError(await sendForm(body), 400, twice('audience'));
  });

  it.each([
    ['Client_Id', 'client_id'],
    ['CLIENT_ID', 'client_id'],
    ['client_id ', 'client_id'],
    ['client-id', 'client_id'],
    ['Client_Secret', 'client_secret'],
    ['Grant_Type', 'grant_type'],
  ])('%j is an unknown parameter (form and JSON)', async (variant, name) => {
    const p = params();
    p[variant] = p[name];
    delete p[name];
    expectError(await sendForm(formOf(p)), 400, required(name));
    expectError(await sendJson(JSON.stringify(p)), 400, required(name));
  });

  it('Audience is an unknown parameter: audience is required, after authentication', async () => {
    const p = params({ audience: undefined, Audience: API });
    expectError(await sendForm(formOf(p)), 400, required('audience'));
  });

  it('parameters in the query string are ignored', async () => {
    const response = await fetch(`${t.url}/oauth/token?${formOf(params())}`, {
      method: 'POST',
      headers: { 'x-forwarded-for': nextSource() },
    });
    expectError(
      { status: response.status, headers: response.headers, text: await response.text() },
      400,
      required('client_id'),
    );
  });
});

describe('+ and %20 in form values', () => {
  it('+ and %20 are spaces: client+credentials is another grant type', async () => {
    const p = formOf(params({ grant_type: undefined }));
    expectError(await sendForm(`${p}&grant_type=client+credentials`), 400, UNSUPPORTED_GRANT);
    expectError(await sendForm(`${p}&grant_type=client%20credentials`), 400, UNSUPPORTED_GRANT);
  });

  it('a secret with + or %20 appended is a wrong secret; %2B is a literal +', async () => {
    const p = formOf(params({ client_secret: undefined }));
    for (const suffix of ['+', '%20', '%2B', '+%20+'])
      expectInvalidClient(await sendForm(`${p}&client_secret=${client.secret}${suffix}`));
  });

  it('a percent-encoded audience is decoded before it is matched', async () => {
    const p = formOf(params({ audience: undefined }));
    const encoded = [...OTHER].map((ch) => '%' + ch.charCodeAt(0).toString(16).padStart(2, '0')).join('');
    expectError(await sendForm(`${p}&audience=${encoded}`), 400, NOT_GRANTED);
  });

  it('an audience with + appended is not registered', async () => {
    const p = formOf(params({ audience: undefined }));
    expectError(await sendForm(`${p}&audience=${encodeURIComponent(API)}+`), 400, NOT_REGISTERED);
    expectError(await sendForm(`${p}&audience=${API}%20`), 400, NOT_REGISTERED);
  });

  it('every byte percent-encoded, names included, is the same request: a token', async () => {
    const enc = (s: string) =>
      [...Buffer.from(s)].map((b) => '%' + b.toString(16).toUpperCase().padStart(2, '0')).join('');
    const body = Object.entries(params())
      .map(([k, v]) => `${enc(k)}=${enc(String(v))}`)
      .join('&');
    expectToken(await sendForm(body));
  });

  it('a client id with + is another client', async () => {
    const p = formOf(params({ client_id: undefined }));
    const id = client.id.slice(0, 10) + '+' + client.id.slice(10);
    expectInvalidClient(await sendForm(`${p}&client_id=${id}`));
  });
});

describe('Content-Type variants', () => {
  it.each([
    ['APPLICATION/JSON', 'json'],
    ['application/json; charset=latin1', 'json'],
    ['Application/Json ; charset="UTF-8"', 'json'],
    ['application/x-www-form-urlencoded;charset=utf-8', 'form'],
    ['APPLICATION/X-WWW-FORM-URLENCODED', 'form'],
  ])('%s is read', async (type, kind) => {
    const body = kind === 'json' ? JSON.stringify(params()) : formOf(params());
    expectToken(await send(body, { 'content-type': type }));
  });

  it.each([
    'application/json-patch+json',
    'application/merge-patch+json',
    'text/json',
    'application/jsonx',
    'application/x-www-form-urlencoded-x',
    'application/json, application/x-www-form-urlencoded',
  ])('%s is a 415', async (type) => {
    expectError(await send(JSON.stringify(params()), { 'content-type': type }), 415, UNSUPPORTED_TYPE);
  });

  it('a body without a Content-Type is a 415 (raw bytes, so fetch adds none)', async () => {
    const answer = await send(new TextEncoder().encode(formOf(params())));
    expectError(answer, 415, UNSUPPORTED_TYPE);
  });

  it('a JSON body labelled as a form has no known parameter; a form labelled JSON is malformed', async () => {
    expectError(await sendForm(JSON.stringify(params())), 400, required('client_id'));
    expectError(await sendJson(formOf(params())), 400, MALFORMED);
  });
});

describe('Content-Length lies and chunked bodies (raw sockets)', () => {
  const post = (extra: string[]) =>
    head(['POST /oauth/token HTTP/1.1', 'Host: 127.0.0.1', `Content-Type: ${FORM_TYPE}`, ...extra]);

  it('a Content-Length larger than the body: 408 and closed, well within 15 s', async () => {
    // The default TESSERA_REQUEST_TIMEOUT (10 s) applies.
    const [kept, ended] = await Promise.all([
      rawRequest(post(['Content-Length: 100']) + 'grant_type=client', { waitMs: 15_000 }),
      rawRequest(post(['Content-Length: 100']) + 'grant_type=client', { waitMs: 15_000, end: true }),
    ]);
    expect(kept.closed).toBe(true);
    expect(kept.elapsedMs).toBeLessThan(15_000);
    expectRawError(kept, 408, ['invalid_request', 'the request was not received in time']);
    expect(kept.headers.connection).toBe('close');
    // A client that gives up half way (half-close) is not waited for, and gets no 5xx.
    expect(ended.closed).toBe(true);
    expect(ended.elapsedMs).toBeLessThan(15_000);
    if (ended.status !== undefined) expect([400, 408]).toContain(ended.status);
    expectNoLeak(ended.text);
  }, 20_000);

  it('a Content-Length over the limit is a 413 at once, before any body', async () => {
    const answer = await rawRequest(post(['Content-Length: 100000']) + 'abc');
    expectRawError(answer, 413, TOO_LARGE);
    expect(answer.closed).toBe(true);
    expect(answer.elapsedMs).toBeLessThan(2000);
  });

  it.each([
    ['shorter than the body', ['Content-Length: 3'], 'abcdefghi\0\r\n\r\n'],
    ['not a number', ['Content-Length: abc'], 'abc'],
    ['negative', ['Content-Length: -1'], 'abc'],
    ['twice, different', ['Content-Length: 3', 'Content-Length: 4'], 'abcd'],
    [
      'with Transfer-Encoding too (smuggling)',
      ['Content-Length: 3', 'Transfer-Encoding: chunked'],
      '3\r\nabc\r\n0\r\n\r\n',
    ],
    ['Transfer-Encoding that is not chunked', ['Transfer-Encoding: gzip, identity'], 'abc'],
  ])('a Content-Length %s: 400 from the parser, connection closed', async (_name, lines, body) => {
    const answer = await rawRequest(post(lines) + body);
    expectNodeRefusal(answer, [400]);
    expect(answer.closed).toBe(true);
  });

  it('a chunked body over the limit is a 413', async () => {
    let body = '';
    for (let i = 0; i < 10; i++) body += `3e8\r\n${'a'.repeat(1000)}\r\n`;
    const answer = await rawRequest(post(['Transfer-Encoding: chunked']) + body + '0\r\n\r\n');
    expectRawError(answer, 413, TOO_LARGE);
  });

  it('a chunked body over the limit that never ends is a 413 too, not a wait', async () => {
    let body = '';
    for (let i = 0; i < 10; i++) body += `3e8\r\n${'a'.repeat(1000)}\r\n`;
    const answer = await rawRequest(post(['Transfer-Encoding: chunked']) + body);
    expectRawError(answer, 413, TOO_LARGE);
    expect(answer.elapsedMs).toBeLessThan(2000);
  });

  it('a chunked body within the limit, in one-byte chunks, is read: a token', async () => {
    const form = formOf(params());
    const body = [...form].map((c) => `1\r\n${c}\r\n`).join('') + '0\r\n\r\n';
    const answer = await rawRequest(
      post(['Transfer-Encoding: chunked', `X-Forwarded-For: ${nextSource()}`, 'Connection: close']) + body,
    );
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ token_type: 'Bearer', expires_in: 1800 });
  });
});

describe('HTTP methods', () => {
  const request = (method: string, path = '/oauth/token') =>
    rawRequest(
      head([`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', 'Content-Length: 0', 'Connection: close']),
    );

  // INTERFACE.md: "any method but POST → 405, Allow: POST". GET, HEAD, PUT, DELETE, PATCH and OPTIONS
  // are in test/http/token.test.ts; these are the methods Node parses that Fastify does not route by default.
  it.each(['TRACE', 'QUERY', 'SEARCH', 'PROPFIND', 'LOCK', 'MKCOL', 'COPY', 'PURGE'])(
    '%s is a 405 with Allow: POST',
    async (method) => {
      const answer = await request(method);
      expectNoLeak(answer.text);
      expect({ status: answer.status, allow: answer.headers.allow }).toEqual({ status: 405, allow: 'POST' });
      expect(JSON.parse(answer.body)).toEqual({
        error: 'invalid_request',
        error_description: 'method not allowed; use POST',
      });
    },
  );

  it.each(['FOO', 'post', 'P0ST'])('%s is refused by the parser: 400 invalid_request', async (method) => {
    const answer = await request(method);
    expectRawError(answer, 400, NOT_HTTP);
    expect(answer.closed).toBe(true);
  });

  it('CONNECT is refused, not a 5xx', async () => {
    expectNodeRefusal(await request('CONNECT'), [400, 405]);
  });

  it.each(['/oauth/token/', '/OAUTH/TOKEN', '/oauth//token', '/oauth/token%00', '/oauth/token/..'])(
    'POST %s is not the token endpoint and not a 5xx',
    async (path) => {
      const answer = await request('POST', path);
      expectNoLeak(answer.text);
      expect(answer.status).toBeDefined();
      expect(answer.status!).toBeLessThan(500);
      expect(answer.status).not.toBe(200);
    },
  );
});

describe('very long URLs and header values', () => {
  it('a 20 000-character URL: 431 (the request line counts against the header limit), not a 5xx', async () => {
    const answer = await rawRequest(
      head([`POST /oauth/token?${'a'.repeat(20_000)} HTTP/1.1`, 'Host: 127.0.0.1', 'Content-Length: 0']),
    );
    expectRawError(answer, 431, HEADERS_TOO_LARGE);
    expect(answer.closed).toBe(true);
  });

  it('a 20 000-character header value: 431, not a 5xx', async () => {
    const answer = await rawRequest(
      head([
        'POST /oauth/token HTTP/1.1',
        'Host: 127.0.0.1',
        `X-Padding: ${'a'.repeat(20_000)}`,
        'Content-Length: 0',
      ]),
    );
    expectRawError(answer, 431, HEADERS_TOO_LARGE);
    expect(answer.closed).toBe(true);
  });

  it('a 20 000-character Authorization header: 431, not a 5xx', async () => {
    const answer = await rawRequest(
      head([
        'POST /oauth/token HTTP/1.1',
        'Host: 127.0.0.1',
        `Authorization: Basic ${'A'.repeat(20_000)}`,
        'Content-Length: 0',
      ]),
    );
    expectRawError(answer, 431, HEADERS_TOO_LARGE);
    expect(answer.closed).toBe(true);
  });

  it('a 12 000-character X-Forwarded-For within the header limit is just another address', async () => {
    const xff = Array.from({ length: 1000 }, (_, i) => `10.9.${i >> 8}.${i & 255}`).join(', ');
    const answer = await send(formOf(params()), {
      'content-type': FORM_TYPE,
      'x-forwarded-for': xff.slice(0, 12_000),
    });
    expectToken(answer);
  });

  it('a 7 000-character URL on the token endpoint is an ordinary request', async () => {
    const response = await fetch(`${t.url}/oauth/token?${'q'.repeat(7000)}`, {
      method: 'POST',
      headers: { 'content-type': FORM_TYPE, 'x-forwarded-for': nextSource() },
      body: formOf(params()),
    });
    expectToken({ status: response.status, headers: response.headers, text: await response.text() });
  });
});

describe('Authorization header variants', () => {
  const body = formOf({ grant_type: 'client_credentials', audience: API });
  const good = () => basic(client.id, client.secret);
  const token68 = () => good().slice('Basic '.length);

  it('the Basic credentials carry padding (so the padding cases below mean something)', () => {
    expect(token68()).toMatch(/=$/);
  });

  it.each([
    ['several spaces after Basic (RFC 7235: 1*SP)', () => `Basic    ${token68()}`],
    ['BASIC in capitals', () => `BASIC ${token68()}`],
    ['bAsIc in mixed case', () => `bAsIc ${token68()}`],
    ['spaces around the whole value (trimmed by HTTP)', () => `   Basic ${token68()}   `],
    [
      'a percent-encoded client id',
      () => {
        const id = [...client.id].map((c) => '%' + c.charCodeAt(0).toString(16)).join('');
        return 'Basic ' + Buffer.from(`${id}:${client.secret}`).toString('base64');
      },
    ],
  ])('%s: a token', async (_name, header) => {
    expectToken(await sendForm(body, { authorization: header() }));
  });

  it.each([
    ['a tab instead of a space', () => `Basic\t${token68()}`],
    ['a tab after the space', () => `Basic \t${token68()}`],
    ['no space', () => `Basic${token68()}`],
    ['padding removed', () => `Basic ${token68().replace(/=+$/, '')}`],
    ['one more =', () => `Basic ${token68()}=`],
    ['= in the middle', () => `Basic ${token68().slice(0, 8)}=${token68().slice(9)}`],
    ['a space inside the base64', () => `Basic ${token68().slice(0, 8)} ${token68().slice(8)}`],
    [
      'base64url alphabet',
      () => `Basic ${Buffer.from(`${client.id}:${client.secret}??>`).toString('base64url')}`,
    ],
    ['two tokens', () => `Basic ${token68()} ${token68()}`],
    ['Basic twice', () => `Basic Basic ${token68()}`],
    ['only the scheme', () => 'Basic'],
    ['an 8 KiB base64 string', () => `Basic ${'A'.repeat(8192)}`],
    ['an 8 KiB header of valid Basic credentials', () => basic(client.id, 'x'.repeat(6000))],
    ['Digest', () => `Digest username="${client.id}"`],
    ['Bearer with the secret', () => `Bearer ${client.secret}`],
    ['credentials without base64', () => `Basic ${client.id}:${client.secret}`],
  ])('%s: invalid_client', async (_name, header) => {
    expectInvalidClient(await sendForm(body, { authorization: header() }));
  });

  it('a secret containing a colon after the first one is part of the secret: wrong', async () => {
    const header = 'Basic ' + Buffer.from(`${client.id}:${client.secret}:x`).toString('base64');
    expectInvalidClient(await sendForm(body, { authorization: header }));
  });

  it('the disabled client with its right secret over Basic: invalid_client', async () => {
    expectInvalidClient(await sendForm(body, { authorization: basic(disabled.id, disabled.secret) }));
  });

  it('an empty Authorization header is a malformed Basic header; beside a secret in the body, two methods', async () => {
    expectInvalidClient(
      await sendForm(formOf(params({ client_id: undefined, client_secret: undefined })), {
        authorization: '',
      }),
    );
    // INTERFACE.md: two methods at once are decided before any credential is parsed, the header's form included.
    expectError(await sendForm(formOf(params()), { authorization: '' }), 400, [
      'invalid_request',
      'use one client authentication method: HTTP Basic or client_secret in the body, not both',
    ]);
  });
});

describe('near-miss secrets are wrong secrets, and the right one still works after', () => {
  const variants = (s: string) => [
    `${s}\u0000`,
    `${s} `,
    `${s}\n`,
    `${s}\r\n`,
    `${s}\t`,
    ` ${s}`,
    s.slice(0, -1),
    s.toUpperCase() === s ? s.toLowerCase() : s.toUpperCase(),
  ];

  it('form: each a 401 from one address (below its limit), then the right secret from there: a token', async () => {
    const source = nextSource();
    for (const secret of variants(client.secret))
      expectInvalidClient(await sendForm(formOf(params({ client_secret: secret })), {}, source));
    expectToken(await sendForm(formOf(params()), {}, source));
  });

  it('JSON: the same', async () => {
    const source = nextSource();
    for (const secret of variants(client.secret))
      expectInvalidClient(await sendJson(JSON.stringify(params({ client_secret: secret })), {}, source));
    expectToken(await sendJson(JSON.stringify(params()), {}, source));
  });

  it('Basic: the same', async () => {
    const source = nextSource();
    const body = formOf({ grant_type: 'client_credentials', audience: API });
    for (const secret of variants(client.secret))
      expectInvalidClient(await sendForm(body, { authorization: basic(client.id, secret) }, source));
    expectToken(await sendForm(body, { authorization: basic(client.id, client.secret) }, source));
  });
});
