import fc from 'fast-check';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestClient, type TestServer } from '../helpers/server.js';

/**
 * Property tests of the token endpoint against one running server, with fast-check:
 *
 * - A (enabled, granted X), B (disabled, granted X), C (enabled, granted Y only);
 * - X and Y registered audiences, Z not registered.
 *
 * Requests are generated in either encoding, with any subset of the parameters (some twice, some not
 * strings in JSON), unknown parameters beside them, and an optional Authorization header built from real or
 * made-up credentials. Every answer must be one INTERFACE.md allows, and exactly the one it prescribes: an
 * oracle written from INTERFACE.md and RFC 6749/7617/8707 (not from the code) names the expected status
 * and error code.
 *
 * Each request comes from its own X-Forwarded-For address, so the failed-attempt limits (429) stay out of
 * the way; 429 is still an allowed status.
 */

const X = 'https://x.api.example.com';
const Y = 'https://y.api.example.com';
const Z = 'https://z.api.example.com'; // never registered

const STATUSES = [200, 400, 401, 405, 413, 415, 429, 503];
// RFC 6749 §5.2, RFC 8707 §2, plus temporarily_unavailable (RFC 6749 §4.1.2.1) for the 503.
const RFC_ERRORS = [
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unauthorized_client',
  'unsupported_grant_type',
  'invalid_scope',
  'invalid_target',
  'temporarily_unavailable',
];
const PARAMS = ['grant_type', 'client_id', 'client_secret', 'audience', 'resource', 'scope'] as const;
type Param = (typeof PARAMS)[number];
const KNOWN = new Set<string>(PARAMS);

/**
 * Every error description the endpoint may give: a closed set, so no answer ever reflects what the client
 * sent (the test fails on any reflected input).
 */
const DESCRIPTION =
  /^(client authentication failed|(client_id|client_secret|grant_type|audience) is required|parameter (grant_type|client_id|client_secret|audience|resource|scope) (is sent more than once|must be a string)|use one client authentication method: HTTP Basic or client_secret in the body, not both|client_id in the body does not match the client authenticated by HTTP Basic|send audience or resource, not both|grant_type must be client_credentials or urn:ietf:params:oauth:grant-type:token-exchange|the requested audience is not registered|the requested audience is not granted to this client|scope must be scope tokens separated by single spaces \(RFC 6749 section 3\.3\)|scope [\x21\x23-\x5b\x5d-\x7e]{1,128} is not granted to this client for this audience|the request body is malformed|the JSON body must be an object|too many failed attempts; try again later|the service cannot answer right now; try again later)$/;

type Auth =
  | { kind: 'basic'; id: string; secret: string; scheme: string; gap: string }
  | { kind: 'raw'; header: string };

interface Req {
  encoding: 'form' | 'json';
  /** Parameters in the order sent; a name may repeat; values other than strings only mean something in JSON. */
  entries: [string, unknown][];
  auth: Auth | undefined;
}

interface Expected {
  status: number;
  error?: string;
  /** For a 200: the client and audience the token must be for. */
  client?: string;
  audience?: string;
}

let t: TestServer;
let A: TestClient;
let B: TestClient;
let C: TestClient;
let jwks: ReturnType<typeof createRemoteJWKSet>;

let sourceCounter = 0;
const nextSource = () => {
  const n = ++sourceCounter;
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
};

// --- encoding a request ---

/** In a form body everything is a string; a JSON value other than a string is sent as its JSON text. */
const formValue = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

/** RFC 6749 §2.3.1: the id and the secret are form-urlencoded, then joined by ':' and base64-encoded. */
const formEncode = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');

function authorizationHeader(auth: Auth): string {
  if (auth.kind === 'raw') return auth.header;
  const token = Buffer.from(`${formEncode(auth.id)}:${formEncode(auth.secret)}`).toString('base64');
  return `${auth.scheme}${auth.gap}${token}`;
}

function encode(req: Req): { body: string; headers: Record<string, string> } {
  const headers: Record<string, string> = { 'x-forwarded-for': nextSource() };
  if (req.auth) headers.authorization = authorizationHeader(req.auth);
  if (req.encoding === 'json') {
    headers['content-type'] = 'application/json';
    const members = req.entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
    return { body: `{${members.join(',')}}`, headers };
  }
  headers['content-type'] = 'application/x-www-form-urlencoded';
  const form = new URLSearchParams();
  for (const [k, v] of req.entries) form.append(k, formValue(v));
  return { body: form.toString(), headers };
}

// --- the oracle, from INTERFACE.md ---

/**
 * RFC 7617 + RFC 6749 §2.3.1, strictly: `Basic` (any case), one or more spaces, canonical padded base64 of
 * UTF-8 `urlencoded(id):urlencoded(secret)`, both non-empty. Undefined when malformed.
 */
function decodeBasic(header: string): { id: string; secret: string } | undefined {
  const value = header.replace(/^[ \t]+|[ \t]+$/g, ''); // HTTP trims optional whitespace
  const match = /^basic +([A-Za-z0-9+/]+={0,2})$/i.exec(value);
  if (!match || match[1]!.length % 4 !== 0) return undefined;
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(match[1]!, 'base64'));
    const colon = text.indexOf(':');
    if (colon < 0) return undefined;
    const decode = (s: string) => decodeURIComponent(s.replace(/\+/g, ' '));
    const id = decode(text.slice(0, colon));
    const secret = decode(text.slice(colon + 1));
    return id && secret ? { id, secret } : undefined;
  } catch {
    return undefined;
  }
}

function oracle(req: Req): Expected {
  const bad = (status: number, error: string): Expected => ({ status, error });
  const json = req.encoding === 'json';
  const values = new Map<Param, unknown>();
  for (const [name, raw] of req.entries) {
    // Fastify refuses a JSON body with a __proto__ member outright (prototype poisoning).
    if (json && name === '__proto__') return bad(400, 'invalid_request');
    if (!KNOWN.has(name)) continue; // unknown parameters are ignored
    if (values.has(name as Param)) return bad(400, 'invalid_request'); // RFC 6749 §3.2: no parameter twice
    values.set(name as Param, json ? raw : formValue(raw));
  }
  for (const v of values.values())
    if (v !== null && typeof v !== 'string') return bad(400, 'invalid_request');
  // Missing, null and empty are the same (RFC 6749 §3.2).
  const get = (p: Param): string | undefined => {
    const v = values.get(p);
    return typeof v === 'string' && v !== '' ? v : undefined;
  };

  let id: string;
  let secret: string;
  if (req.auth) {
    const basic =
      req.auth.kind === 'basic'
        ? req.auth.id && req.auth.secret
          ? { id: req.auth.id, secret: req.auth.secret }
          : undefined
        : decodeBasic(req.auth.header);
    // Two methods at once, decided before any credential is parsed (INTERFACE.md): a malformed Basic header
    // beside a secret in the body is a 400 too.
    if (get('client_secret') !== undefined) return bad(400, 'invalid_request');
    if (!basic) return bad(401, 'invalid_client'); // a malformed Basic header
    if (get('client_id') !== undefined && get('client_id') !== basic.id) return bad(400, 'invalid_request');
    ({ id, secret } = basic);
  } else {
    const bodyId = get('client_id');
    const bodySecret = get('client_secret');
    if (bodyId === undefined || bodySecret === undefined) return bad(400, 'invalid_request');
    [id, secret] = [bodyId, bodySecret];
  }

  // Only an enabled client with its own secret gets past this point (B is disabled).
  const grants = new Map([
    [A.id, { secret: A.secret, audiences: [X] }],
    [C.id, { secret: C.secret, audiences: [Y] }],
  ]);
  const client = grants.get(id);
  if (!client || client.secret !== secret) return bad(401, 'invalid_client');

  const grant = get('grant_type');
  if (grant === undefined) return bad(400, 'invalid_request');
  if (grant !== 'client_credentials') return bad(400, 'unsupported_grant_type');

  const audience = get('audience');
  const resource = get('resource');
  if ((audience === undefined) === (resource === undefined)) return bad(400, 'invalid_request');
  const target = (audience ?? resource)!;
  if (target !== X && target !== Y) return bad(400, 'invalid_target');
  if (!client.audiences.includes(target)) return bad(400, 'invalid_target');

  if (get('scope') !== undefined) return bad(400, 'invalid_scope');
  return { status: 200, client: id, audience: target };
}

/** The brief's property (b), stated on its own: what a request must carry for a 200. */
function mayGetToken(req: Req): { client: string; audience: string } | undefined {
  const count = (p: string) => req.entries.filter(([k]) => k === p).length;
  for (const p of PARAMS) if (count(p) > 1) return undefined;
  if (req.encoding === 'json' && req.entries.some(([k]) => k === '__proto__')) return undefined;
  const value = (p: string) => {
    const v = req.entries.find(([k]) => k === p)?.[1];
    if (v === undefined || v === null || v === '') return undefined;
    return req.encoding === 'json' ? v : formValue(v);
  };
  if (value('grant_type') !== 'client_credentials') return undefined;
  if (value('scope') !== undefined) return undefined;
  const targets = [value('audience'), value('resource')].filter((v) => v !== undefined);
  if (targets.length !== 1) return undefined;
  const basic =
    req.auth?.kind === 'basic'
      ? { id: req.auth.id, secret: req.auth.secret }
      : req.auth
        ? decodeBasic(req.auth.header)
        : undefined;
  if (req.auth && !basic) return undefined;
  let creds: { id: unknown; secret: unknown };
  if (basic) {
    if (value('client_secret') !== undefined) return undefined;
    if (value('client_id') !== undefined && value('client_id') !== basic.id) return undefined;
    creds = basic;
  } else creds = { id: value('client_id'), secret: value('client_secret') };
  if (creds.id === A.id && creds.secret === A.secret && targets[0] === X)
    return { client: A.id, audience: X };
  if (creds.id === C.id && creds.secret === C.secret && targets[0] === Y)
    return { client: C.id, audience: Y };
  return undefined;
}

// --- generators ---

const arbitraryString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 24 }),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({ unit: 'binary-ascii', maxLength: 24 }),
  fc.constantFrom('\u0000', ' ', '+', '%', '%00', '=', '&', ':', '"', '\\', '\n', '\u00e9', '\u{1F600}'),
);

/** Real values (as functions: the clients exist only once the server runs) mixed with arbitrary strings. */
function pool(real: () => string[], likely?: () => string) {
  const pick = (list: () => string[]) =>
    fc.integer({ min: 0, max: 1000 }).map((i) => list()[i % list().length]!);
  return fc.oneof(
    ...(likely ? [{ weight: 12, arbitrary: fc.constant(0).map(() => likely()) }] : []),
    { weight: 3, arbitrary: pick(real) },
    { weight: 2, arbitrary: arbitraryString },
  );
}
const ids = () => [A.id, B.id, C.id, 'unknown-client-0001', ''];
const secrets = () => [A.secret, B.secret, C.secret, `${A.secret}\u0000`, `${A.secret} `, ''];
const targets = () => [X, Y, Z, `${X}/`, ''];
/** The values of each parameter; `who` is the client whose credentials a request most likely carries. */
const valuesFor = (who: () => TestClient): Record<Param, fc.Arbitrary<string>> => ({
  grant_type: pool(
    () => ['client_credentials', 'password', 'CLIENT_CREDENTIALS', ''],
    () => 'client_credentials',
  ),
  client_id: pool(ids, () => who().id),
  client_secret: pool(secrets, () => who().secret),
  audience: pool(targets, () => (who() === C ? Y : X)),
  resource: pool(targets, () => (who() === C ? Y : X)),
  scope: pool(() => ['', '', 'read', 'openid profile']),
});
const values = valuesFor(() => A);
const persona = fc.constantFrom(
  () => A,
  () => B,
  () => C,
);

/** In JSON, now and then a value that is not a string (null counts as absent). */
const nonString = fc.oneof(
  fc.constant(null),
  fc.integer(),
  fc.boolean(),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 2 }),
  fc.dictionary(fc.constantFrom('a', 'b'), fc.string({ maxLength: 5 })),
);
const paramValue = (arb: fc.Arbitrary<string>) =>
  fc.oneof({ weight: 19, arbitrary: arb }, { weight: 1, arbitrary: nonString });

const unknownName = fc.oneof(
  fc.constantFrom(
    'Client_Id',
    'CLIENT_SECRET',
    'client_id ',
    'Audience',
    'foo',
    'nonce',
    '__proto__',
    'client%5Fid',
  ),
  arbitraryString.filter((s) => !KNOWN.has(s)),
);

const auth: fc.Arbitrary<Auth> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('basic' as const),
      id: pool(ids),
      secret: pool(secrets),
      scheme: fc.constantFrom('Basic', 'Basic', 'basic', 'BASIC'),
      gap: fc.constantFrom(' ', ' ', '  '),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('raw' as const),
      header: fc.oneof(
        fc.string({ unit: 'binary-ascii', maxLength: 40 }).map((s) => s.replace(/[^\x20-\x7e]/g, '')),
        fc
          .string({ unit: 'binary-ascii', maxLength: 40 })
          .map((s) => 'Basic ' + s.replace(/[^\x20-\x7e]/g, '')),
        fc.uint8Array({ maxLength: 60 }).map((b) => 'Basic ' + Buffer.from(b).toString('base64')),
        fc.constantFrom('Basic', 'Basic ', 'Bearer abc', 'Basic Og==', 'Basic YTo=', 'Basic OmI='),
      ),
    }),
  },
);

/**
 * Any request: most often the four parameters a token needs (audience or resource), else any subset; now and
 * then some twice; unknown ones beside; any order; values mostly of one client, else anyone's or arbitrary.
 */
const anyRequest: fc.Arbitrary<Req> = fc
  .record({
    encoding: fc.constantFrom('form' as const, 'json' as const),
    who: persona,
    picked: fc.oneof(
      {
        weight: 3,
        arbitrary: fc
          .tuple(fc.constantFrom<Param>('audience', 'resource'), fc.subarray<Param>(['scope', 'resource']))
          .map(([target, more]): Param[] => ['grant_type', 'client_id', 'client_secret', target, ...more]),
      },
      { weight: 2, arbitrary: fc.subarray([...PARAMS]) },
    ),
    twice: fc.oneof(
      { weight: 4, arbitrary: fc.constant([] as Param[]) },
      { weight: 1, arbitrary: fc.subarray([...PARAMS], { maxLength: 2 }) },
    ),
    unknown: fc.array(fc.tuple(unknownName, fc.oneof(arbitraryString, nonString)), { maxLength: 2 }),
    basic: fc.oneof({ weight: 2, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: auth }),
    secretBesideBasic: fc.boolean(),
  })
  .chain(({ encoding, who, picked, twice, unknown, basic, secretBesideBasic }) => {
    const own = valuesFor(who);
    // With Basic, the body most often leaves the secret out (else it is two methods at once).
    const names = [...new Set(picked)].filter((p) => !(basic && p === 'client_secret' && !secretBesideBasic));
    names.push(...twice.filter((p) => names.includes(p)));
    const valueOf = (p: Param) => (encoding === 'json' ? paramValue(own[p]) : own[p]);
    const authFor: fc.Arbitrary<Auth | undefined> =
      basic?.kind === 'basic'
        ? fc.oneof(
            fc.constant(basic),
            fc.constant(0).map((): Auth => ({ ...basic, id: who().id, secret: who().secret })),
          )
        : fc.constant(basic);
    return fc
      .tuple(fc.tuple(...names.map((p) => valueOf(p).map((v) => [p, v] as [string, unknown]))), authFor)
      .chain(([entries, auth]) =>
        fc
          .shuffledSubarray([...entries, ...unknown], { minLength: entries.length + unknown.length })
          .map((all) => ({ encoding, entries: all, auth })),
      );
  });

/**
 * Requests near the 200 boundary: a good request for A (either method, either encoding, audience or
 * resource) with up to two small changes.
 */
type Mutation =
  | { kind: 'drop'; index: number }
  | { kind: 'set'; param: Param; value: string }
  | { kind: 'twice'; index: number }
  | { kind: 'add'; param: Param; value: string }
  | { kind: 'toggleAuth' };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('drop' as const), index: fc.nat() }),
  fc
    .constantFrom(...PARAMS)
    .chain((param) =>
      fc.record({ kind: fc.constant('set' as const), param: fc.constant(param), value: values[param] }),
    ),
  fc.record({ kind: fc.constant('twice' as const), index: fc.nat() }),
  fc
    .constantFrom(...PARAMS)
    .chain((param) =>
      fc.record({ kind: fc.constant('add' as const), param: fc.constant(param), value: values[param] }),
    ),
  fc.record({ kind: fc.constant('toggleAuth' as const) }),
);

const nearGood: fc.Arbitrary<Req> = fc
  .record({
    encoding: fc.constantFrom('form' as const, 'json' as const),
    basic: fc.boolean(),
    idInBody: fc.boolean(),
    target: fc.constantFrom('audience', 'resource'),
    mutations: fc.array(mutation, { maxLength: 2 }),
  })
  .map(({ encoding, basic, idInBody, target, mutations }) => {
    let entries: [string, unknown][] = [
      ['grant_type', 'client_credentials'],
      [target, X],
    ];
    let auth: Auth | undefined;
    if (basic) {
      auth = { kind: 'basic', id: A.id, secret: A.secret, scheme: 'Basic', gap: ' ' };
      if (idInBody) entries.push(['client_id', A.id]);
    } else entries.push(['client_id', A.id], ['client_secret', A.secret]);
    for (const m of mutations) {
      if (m.kind === 'drop' && entries.length)
        entries = entries.filter((_, i) => i !== m.index % entries.length);
      else if (m.kind === 'twice' && entries.length) entries.push(entries[m.index % entries.length]!);
      else if (m.kind === 'set') entries = entries.map(([k, v]) => [k, k === m.param ? m.value : v]);
      else if (m.kind === 'add') entries.push([m.param, m.value]);
      else if (m.kind === 'toggleAuth')
        auth = auth ? undefined : { kind: 'basic', id: A.id, secret: A.secret, scheme: 'basic', gap: ' ' };
    }
    return { encoding, entries, auth };
  });

// --- checking one answer ---

/** What the generated requests got, to show that they reach every branch. */
const seen = new Map<string, number>();

async function check(req: Req): Promise<void> {
  const { body, headers } = encode(req);
  const response = await fetch(`${t.url}/oauth/token`, { method: 'POST', headers, body });
  const text = await response.text();
  const status = response.status;
  const context = () => JSON.stringify({ req, status, text });

  // (a) and (d): a status INTERFACE.md lists (so no 5xx but 503), no-store, and an exact body shape.
  expect(STATUSES, context()).toContain(status);
  expect(response.headers.get('content-type'), context()).toBe('application/json; charset=utf-8');
  expect(response.headers.get('cache-control'), context()).toBe('no-store');
  expect(response.headers.get('pragma'), context()).toBe('no-cache');
  const answer = JSON.parse(text) as Record<string, unknown>;
  if (status === 200) {
    expect(Object.keys(answer).sort(), context()).toEqual(['access_token', 'expires_in', 'token_type']);
    expect(answer.token_type).toBe('Bearer');
    expect(answer.expires_in).toBe(1800);
  } else {
    expect(Object.keys(answer).sort(), context()).toEqual(['error', 'error_description']);
    expect(RFC_ERRORS, context()).toContain(answer.error);
    expect(answer.error_description, context()).toMatch(DESCRIPTION);
  }

  // (c): every 401, and only a 401, is invalid_client with the Basic challenge.
  if (status === 401) {
    expect(answer.error).toBe('invalid_client');
    expect(response.headers.get('www-authenticate'), context()).toBe('Basic realm="tessera"');
  } else {
    expect(answer.error, context()).not.toBe('invalid_client');
    expect(response.headers.get('www-authenticate'), context()).toBeNull();
  }

  const key = status === 200 ? '200' : `${status} ${String(answer.error)}`;
  seen.set(key, (seen.get(key) ?? 0) + 1);

  // The exact answer INTERFACE.md prescribes.
  const expected = oracle(req);
  expect({ status, error: answer.error }, context()).toEqual({
    status: expected.status,
    error: expected.error,
  });

  // (b): a 200 only with an enabled client's exact credentials, by one method, for a granted audience;
  // and then the token verifies against the JWKS, for that client and audience.
  const may = mayGetToken(req);
  expect(status === 200, context()).toBe(may !== undefined);
  if (status === 200) {
    const { payload, protectedHeader } = await jwtVerify(answer.access_token as string, jwks, {
      issuer: t.url,
      audience: may!.audience,
      typ: 'at+jwt',
    });
    expect(protectedHeader.alg).toBe('ES256');
    expect(payload.aud).toBe(may!.audience);
    expect(payload.client_id).toBe(may!.client);
    expect(payload.sub).toBe(may!.client);
    expect(payload.exp! - payload.iat!).toBe(1800);
  }
}

/**
 * Every property makes all its runs: no interruptAfterTimeLimit or skipAllAfterTimeLimit, which end the runs
 * early and still pass (with markInterruptAsFailure: false) having tried only what fitted in the time. Each
 * test counts the runs its predicate made and asserts exactly that number. Time is bounded by the test's own
 * timeout (120 s), which fails: 300 runs take about 2 s on the 2-core machine, so the timeout is a margin
 * for a busy machine, not a limit a healthy run comes near.
 */
const RUNS = { numRuns: 300 } as const;

describe('token endpoint properties', () => {
  beforeAll(async () => {
    t = await startTestServer({ TESSERA_TRUST_PROXY: 'loopback' });
    await t.addAudience(X);
    await t.addAudience(Y);
    A = await t.createClient([X]);
    B = await t.createClient([X]);
    C = await t.createClient([Y]);
    await t.server.runtime.store.updateClient(B.id, { enabled: false });
    await t.sync();
    jwks = createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`));
  });
  afterAll(async () => t?.close());

  it('the oracle agrees with the contract on a few fixed requests (a sanity check of the test itself)', () => {
    const good: Req = {
      encoding: 'form',
      entries: [
        ['grant_type', 'client_credentials'],
        ['client_id', A.id],
        ['client_secret', A.secret],
        ['audience', X],
      ],
      auth: undefined,
    };
    expect(oracle(good)).toEqual({ status: 200, client: A.id, audience: X });
    expect(mayGetToken(good)).toEqual({ client: A.id, audience: X });
    const disabled = {
      ...good,
      entries: good.entries.map(([k, v]) => [
        k,
        k === 'client_id' ? B.id : k === 'client_secret' ? B.secret : v,
      ]),
    } as Req;
    expect(oracle(disabled)).toEqual({ status: 401, error: 'invalid_client' });
    expect(decodeBasic(`Basic ${Buffer.from('a:b').toString('base64')}`)).toEqual({ id: 'a', secret: 'b' });
    expect(decodeBasic('Basic YTo=')).toBeUndefined();
  });

  it('any request: (a) allowed statuses and shapes, (b) 200 only for the right credentials and audience, (c) 401 with the challenge, (d) no 5xx but 503', async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(anyRequest, async (req) => {
        runs++;
        await check(req);
      }),
      RUNS,
    );
    expect(runs).toBe(RUNS.numRuns);
  }, 120_000);

  it('requests near a good one: the same properties where the 200 boundary is', async () => {
    let runs = 0;
    let tokens = 0;
    await fc.assert(
      fc.asyncProperty(nearGood, async (req) => {
        runs++;
        await check(req);
        if (oracle(req).status === 200) tokens++;
      }),
      RUNS,
    );
    expect(runs).toBe(RUNS.numRuns);
    expect(tokens).toBeGreaterThan(10); // the generator does reach the boundary
  }, 120_000);

  it('the generated requests reached every branch of the contract', () => {
    for (const key of [
      '200',
      '400 invalid_request',
      '401 invalid_client',
      '400 unsupported_grant_type',
      '400 invalid_target',
      '400 invalid_scope',
    ])
      expect(seen.get(key) ?? 0, JSON.stringify([...seen])).toBeGreaterThan(0);
  });

  it('an unknown client, a wrong secret and a disabled client are indistinguishable', async () => {
    const answer = async (id: string, secret: string, source: string) => {
      const response = await fetch(`${t.url}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': source },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: id,
          client_secret: secret,
          audience: X,
        }),
      });
      const headers = [...response.headers].filter(([k]) => k !== 'date');
      return { status: response.status, headers, body: await response.text() };
    };
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        arbitraryString.filter((s) => s !== '' && s !== A.secret),
        fc.constantFrom('unknown-client-0001', 'x'.repeat(129), 'no such id!', '\u0000'),
        async (wrong, unknownId) => {
          runs++;
          const source = nextSource();
          const wrongSecret = await answer(A.id, wrong, source);
          expect(wrongSecret.status).toBe(401);
          expect(await answer(unknownId, wrong, source)).toEqual(wrongSecret);
          expect(await answer(B.id, B.secret, source)).toEqual(wrongSecret);
          expect(await answer(C.id, A.secret, source)).toEqual(wrongSecret);
        },
      ),
      { numRuns: 100 },
    );
    expect(runs).toBe(100);
  }, 120_000);
});
