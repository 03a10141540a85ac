/**
 * Every refusal the token endpoint can give, each provoked by a request on a real socket, and each answer's
 * status, `error` and headers asserted, and its `error_description` held to RFC 6749 §5.2's grammar:
 * `1*( %x20-21 / %x23-5B / %x5D-7E )`, printable ASCII without `"` and `\` (INTERFACE.md says so too). A
 * description with a `§` (as some scope refusals had) or a quoted value fails here, whichever refusal it is.
 */
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWT_BEARER } from '../../src/domain/client-auth/index.js';
import { audiences, clients, type ManagementContext } from '../../src/management/index.js';
import { managementOf } from '../helpers/management.js';
import { tokenParams } from '../helpers/provision.js';
import { openSocket, readResponse } from '../helpers/raw-http.js';
import { basic, postToken, startTestServer, startWithClient, type TestServer } from '../helpers/server.js';

/** RFC 6749 §5.2: error_description = 1*( %x20-21 / %x23-5B / %x5D-7E ). */
const DESCRIPTION = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

const API = 'https://api.example.com';
const OTHER = 'https://other.example.com';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const JSON_BODY = { 'content-type': 'application/json' };

/** One answer, as every case reports it. */
interface Answer {
  status: number;
  headers: Record<string, string | null>;
  body: Record<string, unknown>;
}

const b64 = (value: object | string) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
/** A JWT-shaped assertion that no key signed: enough for every refusal before a signature is checked. */
const unsigned = (payload: object) => `${b64({ alg: 'ES256', typ: 'JWT' })}.${b64(payload)}.${b64('sig')}`;

let t: TestServer;
let ctx: ManagementContext;
const ids = { good: '', disabled: '', keyed: '', metered: '', victim: '' };
let goodSecret = '';
let meteredSecret = '';
let foreignKey: CryptoKey;

beforeAll(async () => {
  // Three failures block a client id, so that a 429 takes few requests; the source's limit stays far off.
  t = await startTestServer({ TESSERA_ATTEMPTS_CLIENT_MAX: '3' });
  ctx = managementOf(t, 'test');
  await audiences.addAudience(ctx, { url: API, scopes: [{ name: 'orders:read' }, { name: 'orders:write' }] });
  await audiences.addAudience(ctx, { url: OTHER });
  const make = (name: string, extra: Parameters<typeof clients.createClient>[1] = { name }) =>
    clients.createClient(ctx, { grants: [API], scopes: { [API]: ['orders:read'] }, ...extra, name });
  const good = await make('good');
  ids.good = good.client.id;
  goodSecret = good.secret!;
  ids.disabled = (await make('disabled', { name: 'disabled', enabled: false })).client.id;
  const metered = await make('metered', { name: 'metered', quotaPerMinute: 1 });
  ids.metered = metered.client.id;
  meteredSecret = metered.secret!;
  ids.victim = (await make('victim')).client.id;
  const { publicKey } = await generateKeyPair('ES256', { extractable: true });
  ids.keyed = (
    await make('keyed', {
      name: 'keyed',
      authMethod: 'private_key_jwt',
      jwks: { keys: [{ ...(await exportJWK(publicKey)), kid: 'k1' }] },
    })
  ).client.id;
  foreignKey = (await generateKeyPair('ES256')).privateKey;
  await t.sync();
});
afterAll(async () => {
  await t?.close();
});

const form = (extra: Record<string, string> = {}) => ({
  grant_type: 'client_credentials',
  client_id: ids.good,
  client_secret: goodSecret,
  audience: API,
  ...extra,
});
const without = (name: string) => {
  const body = form();
  delete (body as Record<string, string>)[name];
  return body;
};

async function viaFetch(
  body: string | Record<string, string> | undefined,
  init: { headers?: Record<string, string>; json?: boolean; method?: string } = {},
): Promise<Answer> {
  const answer = await postToken(t.url, body, init);
  return {
    status: answer.status,
    headers: Object.fromEntries(
      ['content-type', 'cache-control', 'pragma', 'www-authenticate', 'retry-after', 'allow'].map((h) => [
        h,
        answer.headers.get(h),
      ]),
    ),
    body: answer.body,
  };
}

/** Bytes sent as they are on a connection of their own: what Node's HTTP parser refuses. */
async function raw(bytes: string): Promise<Answer> {
  const socket = await openSocket(Number(new URL(t.url).port));
  try {
    const reading = readResponse(socket);
    socket.write(bytes);
    const response = await reading;
    return {
      status: response.status,
      headers: {
        'content-type': response.headers['content-type'] ?? null,
        'cache-control': response.headers['cache-control'] ?? null,
        pragma: response.headers.pragma ?? null,
      },
      body: JSON.parse(response.body) as Record<string, unknown>,
    };
  } finally {
    socket.destroy();
  }
}

async function assertion(iss: string, options: { kid?: string } = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ jti: crypto.randomUUID() })
    .setProtectedHeader({ alg: 'ES256', kid: options.kid ?? 'k1' })
    .setIssuer(iss)
    .setSubject(iss)
    .setAudience(t.url)
    .setIssuedAt(now)
    .setExpirationTime(now + 60)
    .sign(foreignKey);
}

const withAssertion = (jwt: string, extra: Record<string, string> = {}) => ({
  grant_type: 'client_credentials',
  audience: API,
  client_assertion_type: JWT_BEARER,
  client_assertion: jwt,
  ...extra,
});

type Case = [what: string, status: number, error: string, request: () => Promise<Answer>];

const cases: Case[] = [
  // --- the body ---
  ['no body at all', 400, 'invalid_request', () => viaFetch(undefined)],
  ...['client_id', 'client_secret', 'grant_type', 'audience'].flatMap((name): Case[] => [
    [`${name} missing`, 400, 'invalid_request', () => viaFetch(without(name))],
    [`${name} empty`, 400, 'invalid_request', () => viaFetch(form({ [name]: '' }))],
  ]),
  [
    'a parameter twice in a form',
    400,
    'invalid_request',
    () => viaFetch(new URLSearchParams(form()).toString() + '&audience=x', { headers: FORM }),
  ],
  [
    'a parameter twice in JSON',
    400,
    'invalid_request',
    () => viaFetch(JSON.stringify(form()).replace(/}$/, ',"audience":"x"}'), { headers: JSON_BODY }),
  ],
  ['malformed JSON', 400, 'invalid_request', () => viaFetch('{"client_id": ', { headers: JSON_BODY })],
  ['an empty JSON body', 400, 'invalid_request', () => viaFetch('', { headers: JSON_BODY })],
  ['JSON that is not an object', 400, 'invalid_request', () => viaFetch('["a"]', { headers: JSON_BODY })],
  [
    'a parameter that is not a string',
    400,
    'invalid_request',
    () => viaFetch({ ...form(), audience: 42 } as never, { json: true }),
  ],
  [
    'JSON prototype poisoning',
    400,
    'invalid_request',
    () => viaFetch('{"__proto__":{"x":1}}', { headers: JSON_BODY }),
  ],
  [
    'JSON nested deeper than 32 levels',
    400,
    'invalid_request',
    () =>
      viaFetch(JSON.stringify(form()).replace(/}$/, `,"x":${'['.repeat(40)}${']'.repeat(40)}}`), {
        headers: JSON_BODY,
      }),
  ],
  [
    'a body of another type: 415',
    415,
    'invalid_request',
    () => viaFetch(new URLSearchParams(form()).toString(), { headers: { 'content-type': 'text/plain' } }),
  ],
  ['a form over 8 KiB: 413', 413, 'invalid_request', () => viaFetch(form({ pad: 'x'.repeat(9000) }))],
  [
    'JSON over 8 KiB: 413',
    413,
    'invalid_request',
    () => viaFetch(form({ pad: 'x'.repeat(9000) }), { json: true }),
  ],
  ...['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'].map((method): Case => [
    `${method}: 405`,
    405,
    'invalid_request',
    () => viaFetch(method === 'GET' ? undefined : 'x', { method, headers: { 'content-type': 'text/plain' } }),
  ]),
  ['not HTTP at all: 400 from the parser', 400, 'invalid_request', () => raw('NOT HTTP\r\n\r\n')],
  [
    'headers over 16 KiB: 431 from the parser',
    431,
    'invalid_request',
    () => raw(`POST /oauth/token HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`),
  ],

  // --- client authentication ---
  [
    'HTTP Basic and client_secret in the body',
    400,
    'invalid_request',
    () => viaFetch(form(), { headers: { authorization: basic(ids.good, goodSecret) } }),
  ],
  [
    'HTTP Basic with another client_id in the body',
    400,
    'invalid_request',
    () =>
      viaFetch(
        { grant_type: 'client_credentials', audience: API, client_id: ids.disabled },
        { headers: { authorization: basic(ids.good, goodSecret) } },
      ),
  ],
  [
    'client_secret and client_assertion',
    400,
    'invalid_request',
    async () => viaFetch(withAssertion(await assertion(ids.keyed), { client_secret: 'x' })),
  ],
  [
    'a malformed Basic header',
    401,
    'invalid_client',
    () =>
      viaFetch(
        { grant_type: 'client_credentials', audience: API },
        { headers: { authorization: 'Basic !!!"\\' } },
      ),
  ],
  [
    'empty Basic credentials',
    401,
    'invalid_client',
    () =>
      viaFetch(
        { grant_type: 'client_credentials', audience: API },
        { headers: { authorization: `Basic ${b64(':')}` } },
      ),
  ],
  [
    'another scheme than Basic',
    401,
    'invalid_client',
    () =>
      viaFetch(
        { grant_type: 'client_credentials', audience: API },
        { headers: { authorization: 'Bearer x' } },
      ),
  ],
  ['an unknown client', 401, 'invalid_client', () => viaFetch(form({ client_id: 'no-such-client' }))],
  [
    'a client id no client can have ("§" and a quote in it)',
    401,
    'invalid_client',
    () => viaFetch(form({ client_id: 'a§"b\\' })),
  ],
  ['a wrong secret', 401, 'invalid_client', () => viaFetch(form({ client_secret: 'wrong' }))],
  [
    'a disabled client, with its right secret',
    401,
    'invalid_client',
    () => viaFetch(form({ client_id: ids.disabled })),
  ],
  [
    'a private_key_jwt client with a secret',
    401,
    'invalid_client',
    () => viaFetch(form({ client_id: ids.keyed, client_secret: 'x'.repeat(43) })),
  ],
  [
    'a secret client with an assertion',
    401,
    'invalid_client',
    async () => viaFetch(withAssertion(await assertion(ids.good))),
  ],

  // --- private_key_jwt ---
  [
    'client_assertion_type that is not jwt-bearer',
    400,
    'invalid_request',
    async () => viaFetch(withAssertion(await assertion(ids.keyed), { client_assertion_type: 'urn:x"§' })),
  ],
  [
    'client_assertion without its type',
    400,
    'invalid_request',
    async () =>
      viaFetch({
        grant_type: 'client_credentials',
        audience: API,
        client_assertion: await assertion(ids.keyed),
      }),
  ],
  [
    'client_assertion_type without an assertion',
    400,
    'invalid_request',
    () => viaFetch({ grant_type: 'client_credentials', audience: API, client_assertion_type: JWT_BEARER }),
  ],
  ['a malformed assertion', 401, 'invalid_client', () => viaFetch(withAssertion('not.a"jwt§'))],
  ['an assertion without iss', 401, 'invalid_client', () => viaFetch(withAssertion(unsigned({ sub: 'x' })))],
  [
    'an assertion whose iss is not the client_id',
    401,
    'invalid_client',
    async () => viaFetch(withAssertion(await assertion(ids.keyed), { client_id: ids.good })),
  ],
  [
    'an assertion no key of the client signed',
    401,
    'invalid_client',
    async () => viaFetch(withAssertion(await assertion(ids.keyed))),
  ],
  [
    'an assertion naming an unknown kid',
    401,
    'invalid_client',
    async () => viaFetch(withAssertion(await assertion(ids.keyed, { kid: 'nope"§' }))),
  ],

  // --- after authentication ---
  [
    'a grant type other than client_credentials',
    400,
    'unsupported_grant_type',
    () => viaFetch(form({ grant_type: 'password' })),
  ],
  [
    'an audience not registered (its URL with a quote and a §)',
    400,
    'invalid_target',
    () => viaFetch(form({ audience: 'https://x.example.com/"§\\' })),
  ],
  ['an audience not granted', 400, 'invalid_target', () => viaFetch(form({ audience: OTHER }))],
  ['audience and resource both', 400, 'invalid_request', () => viaFetch(form({ resource: API }))],
  ['scopes apart by two spaces', 400, 'invalid_scope', () => viaFetch(form({ scope: 'orders:read  x' }))],
  ['a scope with a quote', 400, 'invalid_scope', () => viaFetch(form({ scope: 'a"b' }))],
  ['a scope with a backslash', 400, 'invalid_scope', () => viaFetch(form({ scope: 'a\\b' }))],
  ['a scope that is not ASCII', 400, 'invalid_scope', () => viaFetch(form({ scope: '§' }))],
  ['a scope not granted', 400, 'invalid_scope', () => viaFetch(form({ scope: 'orders:write' }))],
  [
    'a client over its quota',
    429,
    'invalid_request',
    async () => {
      const ask = () => viaFetch(form({ client_id: ids.metered, client_secret: meteredSecret }));
      expect((await ask()).status).toBe(200);
      return ask();
    },
  ],
  [
    'a client id blocked for failed attempts',
    429,
    'invalid_request',
    async () => {
      const wrong = () => viaFetch(form({ client_id: ids.victim, client_secret: 'wrong' }));
      for (let i = 0; i < 3; i++) expect((await wrong()).status).toBe(401);
      return wrong();
    },
  ],
];

/** The headers each status brings beside the no-store ones (INTERFACE.md's table). */
function expectedHeaders(status: number): Record<string, string | RegExp | null> {
  return {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    pragma: 'no-cache',
    ...(status === 401 ? { 'www-authenticate': 'Basic realm="tessera"' } : {}),
    ...(status === 429 || status === 503 ? { 'retry-after': /^[1-9][0-9]*$/ } : {}),
    ...(status === 405 ? { allow: 'POST' } : {}),
  };
}

function expectRefusal(answer: Answer, status: number, error: string): void {
  expect({ status: answer.status, error: answer.body.error }).toEqual({ status, error });
  expect(Object.keys(answer.body).sort()).toEqual(['error', 'error_description']);
  const description = answer.body.error_description as string;
  expect(typeof description).toBe('string');
  expect(description.length).toBeGreaterThan(0);
  expect(description).toMatch(DESCRIPTION);
  // OAuthError replaces what §5.2 does not allow with "?": none here means the description was clean at its
  // source, not only made so on its way out (no case sends a "?" that a description would repeat).
  expect(description).not.toContain('?');
  for (const [name, value] of Object.entries(expectedHeaders(status))) {
    if (value instanceof RegExp) expect(answer.headers[name]).toMatch(value);
    else expect(answer.headers[name], name).toBe(value);
  }
}

describe('every refusal of the token endpoint: an error_description of RFC 6749 §5.2 characters', () => {
  it.each(cases)('%s: %i %s', async (_what, status, error, request) => {
    expectRefusal(await request(), status, error);
  });

  it('the server answers as usual after all of them', async () => {
    const answer = await viaFetch(form());
    expect(answer.status).toBe(200);
    expect(answer.body.token_type).toBe('Bearer');
  });
});

describe('503 temporarily_unavailable', () => {
  it('the store gone, a client not cached: 503, its description within RFC 6749 §5.2', async () => {
    const { t: down, client: c } = await startWithClient(API);
    try {
      await down.server.runtime.store.close();
      const answer = await postToken(down.url, tokenParams(c.id, c.secret, API));
      expectRefusal(
        {
          status: answer.status,
          headers: Object.fromEntries(
            ['content-type', 'cache-control', 'pragma', 'retry-after'].map((h) => [h, answer.headers.get(h)]),
          ),
          body: answer.body,
        },
        503,
        'temporarily_unavailable',
      );
    } finally {
      await down.server.app.close();
    }
  });
});
