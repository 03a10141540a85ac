import type { JWTPayload } from 'jose';
import { beforeEach, describe, expect, it } from 'vitest';
import { REGISTERED_CLAIMS } from '../helpers/expected.js';
import { rejection } from '../helpers/assert.js';
import { retainedBytes } from '../helpers/memory.js';
import type { SigningAlg } from '../../src/domain/jose.js';
import { OAuthError } from '../../src/domain/errors.js';
import { digestBytes, digestSecret } from '../../src/domain/secrets.js';
import { TokenService, type TokenServiceDeps } from '../../src/domain/token-service.js';
import type { KnownAudience, KnownClient } from '../../src/domain/known-client.js';
import type { AuditEntry } from '../../src/domain/token-events.js';
import type { TokenRequest } from '../../src/domain/token-request.js';

const NOW = Date.parse('2030-01-02T03:04:05.678Z');
const IAT = Math.floor(NOW / 1000);
const ISSUER = 'https://auth.example.com';
const JTI = 'fixed-jti-0123456789abcdef';
const SECRET = 'the-right-secret-with-plenty-of-entropy';

const API = 'https://api.example.com'; // no overrides
const SHORT = 'https://short.example.com'; // tokenTtl 300, signingAlg EdDSA
const OTHER = 'https://other.example.com'; // registered, granted to nobody

const AUDIENCES: KnownAudience[] = [
  { url: API, tokenTtl: null, signingAlg: null, resourceServers: new Set() },
  { url: SHORT, tokenTtl: 300, signingAlg: 'EdDSA', resourceServers: new Set() },
  { url: OTHER, tokenTtl: null, signingAlg: 'RS256', resourceServers: new Set() },
];

const client = (id: string, extra: Partial<KnownClient> = {}): KnownClient => ({
  id,
  enabled: true,
  secrets: [{ id: `sec_${id}`, digest: digestBytes(digestSecret(SECRET)), expiresAt: Infinity }],
  grants: new Map([
    [API, { scopes: new Set(), scope: undefined, tokenExchange: false }],
    [SHORT, { scopes: new Set(), scope: undefined, tokenExchange: false }],
  ]),
  tokenTtl: null,
  quota: { perMinute: null, perDay: null },
  ...extra,
});

const CLIENTS = new Map<string, KnownClient>([
  ['svc', client('svc')],
  ['long', client('long', { tokenTtl: 7200 })],
  ['off', client('off', { enabled: false })],
  ['a b:c', client('a b:c')],
  [
    'scoped',
    client('scoped', {
      grants: new Map([
        [
          API,
          {
            scopes: new Set(['orders:read', 'orders:write', 'audit:read']),
            scope: 'audit:read orders:read orders:write',
            tokenExchange: false,
          },
        ],
      ]),
    }),
  ],
]);

interface Signed {
  payload: JWTPayload;
  alg: SigningAlg;
}

function setup(overrides: Partial<TokenServiceDeps> = {}) {
  const signed: Signed[] = [];
  const lookups: string[] = [];
  const peeks: string[] = [];
  const deps: TokenServiceDeps = {
    findClient: (id) => {
      lookups.push(id);
      return CLIENTS.get(id);
    },
    peekClient: (id) => {
      peeks.push(id);
      return CLIENTS.get(id);
    },
    findAudience: (url) => AUDIENCES.find((a) => a.url === url),
    sign: async (payload, alg) => {
      signed.push({ payload, alg });
      return JSON.stringify({ payload, alg });
    },
    now: () => NOW,
    newJti: () => JTI,
    attempts: { blockedFor: () => 0, failed: async () => undefined },
    issuer: ISSUER,
    defaultTtl: 1800,
    defaultAlg: 'ES256',
    ...overrides,
  };
  return { service: new TokenService(deps), signed, lookups, peeks };
}

const SOURCE = '192.0.2.7';

const post = (params: TokenRequest['params']): TokenRequest => ({
  params: {
    grant_type: 'client_credentials',
    client_id: 'svc',
    client_secret: SECRET,
    audience: API,
    ...params,
  },
  source: SOURCE,
});

/** client_secret_basic as a client sends it (RFC 6749 §2.3.1: form-encoded, then base64). */
function basicHeader(id: string, secret: string): string {
  const enc = (v: string) => encodeURIComponent(v).replace(/%20/g, '+');
  return 'Basic ' + Buffer.from(`${enc(id)}:${enc(secret)}`).toString('base64');
}

interface Failure {
  error: string;
  description: string;
  status: number;
  headers: Readonly<Record<string, string>>;
}

async function failure(service: TokenService, request: TokenRequest): Promise<Failure> {
  const e = await rejection(service.issue(request), OAuthError);
  expect(e.toJSON()).toEqual({ error: e.error, error_description: e.description });
  return { error: e.error, description: e.description, status: e.status, headers: e.headers };
}

const INVALID_CLIENT: Failure = {
  error: 'invalid_client',
  description: 'client authentication failed',
  status: 401,
  headers: { 'www-authenticate': 'Basic realm="tessera"' },
};
const invalidRequest = (description: string): Failure => ({
  error: 'invalid_request',
  description,
  status: 400,
  headers: {},
});
const UNSUPPORTED_GRANT: Failure = {
  error: 'unsupported_grant_type',
  description: 'grant_type must be client_credentials',
  status: 400,
  headers: {},
};
const NOT_REGISTERED: Failure = {
  error: 'invalid_target',
  description: 'the requested audience is not registered',
  status: 400,
  headers: {},
};
const NOT_GRANTED: Failure = {
  error: 'invalid_target',
  description: 'the requested audience is not granted to this client',
  status: 400,
  headers: {},
};
const INVALID_SCOPE: Failure = {
  error: 'invalid_scope',
  description: 'scope read is not granted to this client for this audience',
  status: 400,
  headers: {},
};

describe('TokenService: scopes', () => {
  let t: ReturnType<typeof setup>;
  beforeEach(() => {
    t = setup();
  });
  const invalidScope = (description: string): Failure => ({
    error: 'invalid_scope',
    description,
    status: 400,
    headers: {},
  });

  it('without scope, every granted scope, sorted, in the claim and the answer (after the registered claims)', async () => {
    const issued = await t.service.issue(post({ client_id: 'scoped' }));
    expect(issued.response).toEqual({
      access_token: expect.any(String),
      token_type: 'Bearer',
      expires_in: 1800,
      scope: 'audit:read orders:read orders:write',
    });
    expect(Object.keys(t.signed[0]!.payload)).toEqual([...REGISTERED_CLAIMS, 'scope']);
    expect(t.signed[0]!.payload.scope).toBe('audit:read orders:read orders:write');
  });

  it.each([
    ['orders:read', 'orders:read'],
    ['orders:write orders:read', 'orders:read orders:write'],
    ['orders:read orders:read', 'orders:read'],
    ['', 'audit:read orders:read orders:write'],
  ])('scope=%j: exactly those asked, each once, sorted (%j)', async (scope, carried) => {
    const issued = await t.service.issue(post({ client_id: 'scoped', scope }));
    expect(issued.response.scope).toBe(carried);
    expect(t.signed[0]!.payload.scope).toBe(carried);
  });

  it('a scope not granted is invalid_scope naming the first one that is not; nothing is signed', async () => {
    expect(
      await failure(t.service, post({ client_id: 'scoped', scope: 'orders:read orders:delete x' })),
    ).toEqual(invalidScope('scope orders:delete is not granted to this client for this audience'));
    expect(t.signed).toEqual([]);
  });

  it.each(['orders:read  orders:write', ' orders:read', 'orders:read\torders:write', 'a"b', 'a\\b', 'é'])(
    'scope=%j, outside RFC 6749 §3.3, is invalid_scope',
    async (scope) => {
      expect(await failure(t.service, post({ client_id: 'scoped', scope }))).toEqual(
        invalidScope('scope must be scope tokens separated by single spaces (RFC 6749 section 3.3)'),
      );
    },
  );

  it('a grant without scopes: no scope claim, no scope field', async () => {
    const issued = await t.service.issue(post({}));
    expect(issued.response).not.toHaveProperty('scope');
    expect(t.signed[0]!.payload).not.toHaveProperty('scope');
  });
});

describe('TokenService: issuing', () => {
  let t: ReturnType<typeof setup>;
  beforeEach(() => {
    t = setup();
  });

  it('issues a token with exactly the RFC 9068 claims', async () => {
    const issued = await t.service.issue(post({}));
    const payload = {
      iss: ISSUER,
      sub: 'svc',
      aud: API,
      client_id: 'svc',
      iat: IAT,
      exp: IAT + 1800,
      jti: JTI,
    };
    expect(issued).toEqual({
      response: {
        access_token: JSON.stringify({ payload, alg: 'ES256' }),
        token_type: 'Bearer',
        expires_in: 1800,
      },
      clientId: 'svc',
      audience: API,
      jti: JTI,
      type: 'token.issued',
    });
    expect(t.signed).toEqual([{ payload, alg: 'ES256' }]);
    expect(Object.keys(issued.response)).toEqual(['access_token', 'token_type', 'expires_in']);
  });

  it('takes iat from the clock, in whole seconds rounded down', async () => {
    const { service, signed } = setup({ now: () => 1_999_999_999_999 });
    await service.issue(post({}));
    expect(signed[0]?.payload.iat).toBe(1_999_999_999);
    expect(signed[0]?.payload.exp).toBe(1_999_999_999 + 1800);
  });

  it('asks for a fresh jti for every token', async () => {
    let n = 0;
    const { service, signed } = setup({ newJti: () => `jti-${++n}` });
    const first = await service.issue(post({}));
    const second = await service.issue(post({}));
    expect([first.jti, second.jti]).toEqual(['jti-1', 'jti-2']);
    expect(signed.map((s) => s.payload.jti)).toEqual(['jti-1', 'jti-2']);
  });

  it('uses the default lifetime and algorithm for an audience without its own', async () => {
    const { service, signed } = setup({ defaultTtl: 900, defaultAlg: 'PS256' });
    const issued = await service.issue(post({}));
    expect(issued.response.expires_in).toBe(900);
    expect(signed[0]).toEqual({ payload: expect.objectContaining({ exp: IAT + 900 }), alg: 'PS256' });
  });

  it('prefers the audience lifetime and algorithm to the defaults', async () => {
    const issued = await t.service.issue(post({ audience: SHORT }));
    expect(issued.response.expires_in).toBe(300);
    expect(t.signed[0]).toEqual({
      payload: { iss: ISSUER, sub: 'svc', aud: SHORT, client_id: 'svc', iat: IAT, exp: IAT + 300, jti: JTI },
      alg: 'EdDSA',
    });
  });

  it('prefers the client lifetime to the audience and default ones; the algorithm stays the audience’s', async () => {
    const toShort = await t.service.issue(post({ client_id: 'long', audience: SHORT }));
    expect(toShort.response.expires_in).toBe(7200);
    expect(t.signed[0]?.payload.exp).toBe(IAT + 7200);
    expect(t.signed[0]?.alg).toBe('EdDSA');

    const toApi = await t.service.issue(post({ client_id: 'long' }));
    expect(toApi.response.expires_in).toBe(7200);
    expect(t.signed[1]?.alg).toBe('ES256');
  });

  it('accepts `resource` (RFC 8707) alone for the audience', async () => {
    const issued = await t.service.issue(post({ audience: undefined, resource: SHORT }));
    expect(issued.audience).toBe(SHORT);
    expect(t.signed[0]?.payload.aud).toBe(SHORT);
  });

  it('treats an empty audience as absent when resource is given, and vice versa', async () => {
    expect((await t.service.issue(post({ audience: '', resource: SHORT }))).audience).toBe(SHORT);
    expect((await t.service.issue(post({ audience: SHORT, resource: '' }))).audience).toBe(SHORT);
  });

  it('treats an empty scope as absent', async () => {
    await expect(t.service.issue(post({ scope: '' }))).resolves.toMatchObject({ clientId: 'svc' });
  });

  it('authenticates by HTTP Basic', async () => {
    const issued = await t.service.issue({
      params: { grant_type: 'client_credentials', audience: API },
      authorization: basicHeader('svc', SECRET),
      source: SOURCE,
    });
    expect(issued.clientId).toBe('svc');
  });

  it('allows the same client_id in the body with Basic, and an empty client_secret in the body', async () => {
    const basic = { clientId: 'svc', clientSecret: SECRET };
    await expect(
      t.service.issue({
        params: { grant_type: 'client_credentials', audience: API, client_id: 'svc' },
        authorization: basicHeader(basic.clientId, basic.clientSecret),
        source: SOURCE,
      }),
    ).resolves.toMatchObject({ clientId: 'svc' });
    await expect(
      t.service.issue({
        params: { grant_type: 'client_credentials', audience: API, client_secret: '' },
        authorization: basicHeader(basic.clientId, basic.clientSecret),
        source: SOURCE,
      }),
    ).resolves.toMatchObject({ clientId: 'svc' });
  });

  it('an id no client can have (spaces, colons, a NUL) is invalid_client without a lookup', async () => {
    const lookups: string[] = [];
    const { service } = setup({ findClient: (id) => (lookups.push(id), CLIENTS.get(id)) });
    for (const clientId of ['a b:c', 'svc\u0000', 'x'.repeat(129), 'é']) {
      expect(
        await failure(service, {
          params: { grant_type: 'client_credentials', audience: API },
          authorization: basicHeader(clientId, SECRET),
          source: SOURCE,
        }),
      ).toEqual(INVALID_CLIENT);
    }
    expect(lookups).toEqual([]);
  });

  it('awaits a cache miss (findClient returning a promise)', async () => {
    const { service } = setup({ findClient: async (id) => CLIENTS.get(id) });
    expect((await service.issue(post({}))).clientId).toBe('svc');
    expect(await failure(service, post({ client_id: 'nobody' }))).toEqual(INVALID_CLIENT);
  });

  it('matches the audience exactly', async () => {
    expect(await failure(t.service, post({ audience: `${API}/` }))).toEqual(NOT_REGISTERED);
    expect(await failure(t.service, post({ audience: API.toUpperCase() }))).toEqual(NOT_REGISTERED);
  });
});

describe('TokenService: errors', () => {
  let t: ReturnType<typeof setup>;
  beforeEach(() => {
    t = setup();
  });

  it('client_id missing', async () => {
    expect(await failure(t.service, post({ client_id: undefined }))).toEqual(
      invalidRequest('client_id is required'),
    );
  });

  it('client_secret missing', async () => {
    expect(await failure(t.service, post({ client_secret: undefined }))).toEqual(
      invalidRequest('client_secret is required'),
    );
  });

  it('client_id and client_secret empty count as missing', async () => {
    expect(await failure(t.service, post({ client_id: '' }))).toEqual(
      invalidRequest('client_id is required'),
    );
    expect(await failure(t.service, post({ client_secret: '' }))).toEqual(
      invalidRequest('client_secret is required'),
    );
    expect(t.lookups).toEqual([]);
  });

  it('asks for client_id before client_secret', async () => {
    expect(await failure(t.service, post({ client_id: undefined, client_secret: undefined }))).toEqual(
      invalidRequest('client_id is required'),
    );
  });

  it('Basic and client_secret in the body both', async () => {
    const error = await failure(t.service, {
      params: { grant_type: 'client_credentials', audience: API, client_secret: SECRET },
      authorization: basicHeader('svc', SECRET),
      source: SOURCE,
    });
    expect(error).toEqual(
      invalidRequest(
        'use one client authentication method: HTTP Basic or client_secret in the body, not both',
      ),
    );
    expect(t.lookups).toEqual([]);
  });

  it('Basic with another client_id in the body', async () => {
    const error = await failure(t.service, {
      params: { grant_type: 'client_credentials', audience: API, client_id: 'long' },
      authorization: basicHeader('svc', SECRET),
      source: SOURCE,
    });
    expect(error).toEqual(
      invalidRequest('client_id in the body does not match the client authenticated by HTTP Basic'),
    );
    expect(t.lookups).toEqual([]);
  });

  it('unknown client, wrong secret and disabled client take the same path: one lookup, one failure counted', async () => {
    // The timing test measures milliseconds on a noisy machine; this pins the path itself, which it cannot.
    for (const params of [
      { client_id: 'nobody' },
      { client_secret: 'not-the-secret' },
      { client_id: 'off' },
    ]) {
      const failures: string[] = [];
      const { service, lookups } = setup({
        attempts: { blockedFor: () => 0, failed: async (id) => void failures.push(String(id)) },
      });
      await failure(service, post(params));
      expect(lookups).toEqual([params.client_id ?? 'svc']);
      expect(failures).toEqual([params.client_id ?? 'svc']);
    }
  });

  it('unknown client, wrong secret and disabled client give the identical invalid_client', async () => {
    const unknown = await failure(t.service, post({ client_id: 'nobody' }));
    const wrong = await failure(t.service, post({ client_secret: 'not-the-secret' }));
    const disabled = await failure(t.service, post({ client_id: 'off' }));
    const disabledWrong = await failure(t.service, post({ client_id: 'off', client_secret: 'nope' }));
    const wrongBasic = await failure(t.service, {
      params: { grant_type: 'client_credentials', audience: API },
      authorization: basicHeader('svc', 'nope'),
      source: SOURCE,
    });
    for (const error of [unknown, wrong, disabled, disabledWrong, wrongBasic])
      expect(error).toEqual(INVALID_CLIENT);
    expect(t.signed).toEqual([]);
  });

  it('a secret that differs only in case or by a suffix is wrong', async () => {
    expect(await failure(t.service, post({ client_secret: SECRET.toUpperCase() }))).toEqual(INVALID_CLIENT);
    expect(await failure(t.service, post({ client_secret: SECRET + ' ' }))).toEqual(INVALID_CLIENT);
    expect(await failure(t.service, post({ client_secret: SECRET.slice(0, -1) }))).toEqual(INVALID_CLIENT);
  });

  it('checks credentials before grant_type, audience and scope', async () => {
    const bad = { client_secret: 'nope' };
    expect(await failure(t.service, post({ ...bad, grant_type: 'password' }))).toEqual(INVALID_CLIENT);
    expect(await failure(t.service, post({ ...bad, grant_type: undefined }))).toEqual(INVALID_CLIENT);
    expect(await failure(t.service, post({ ...bad, audience: 'https://unknown.example.com' }))).toEqual(
      INVALID_CLIENT,
    );
    expect(await failure(t.service, post({ ...bad, audience: OTHER }))).toEqual(INVALID_CLIENT);
    expect(await failure(t.service, post({ ...bad, audience: undefined }))).toEqual(INVALID_CLIENT);
    expect(await failure(t.service, post({ ...bad, scope: 'read' }))).toEqual(INVALID_CLIENT);
    expect(await failure(t.service, post({ client_id: 'nobody', grant_type: 'password' }))).toEqual(
      INVALID_CLIENT,
    );
    expect(await failure(t.service, post({ client_id: 'off', audience: OTHER }))).toEqual(INVALID_CLIENT);
  });

  it('grant_type missing or empty', async () => {
    expect(await failure(t.service, post({ grant_type: undefined }))).toEqual(
      invalidRequest('grant_type is required'),
    );
    expect(await failure(t.service, post({ grant_type: '' }))).toEqual(
      invalidRequest('grant_type is required'),
    );
  });

  it.each(['password', 'authorization_code', 'refresh_token', 'Client_Credentials', 'client_credentials '])(
    'grant_type=%j',
    async (grantType) => {
      expect(await failure(t.service, post({ grant_type: grantType }))).toEqual(UNSUPPORTED_GRANT);
    },
  );

  it('checks grant_type before the audience', async () => {
    expect(
      await failure(t.service, post({ grant_type: 'password', audience: 'https://unknown.example.com' })),
    ).toEqual(UNSUPPORTED_GRANT);
  });

  it('audience missing, or empty', async () => {
    expect(await failure(t.service, post({ audience: undefined }))).toEqual(
      invalidRequest('audience is required'),
    );
    expect(await failure(t.service, post({ audience: '' }))).toEqual(invalidRequest('audience is required'));
    expect(await failure(t.service, post({ audience: '', resource: '' }))).toEqual(
      invalidRequest('audience is required'),
    );
  });

  it('audience and resource both, even with the same value', async () => {
    const both = invalidRequest('send audience or resource, not both');
    expect(await failure(t.service, post({ audience: API, resource: SHORT }))).toEqual(both);
    expect(await failure(t.service, post({ audience: API, resource: API }))).toEqual(both);
  });

  it('an unknown audience and one not granted are both invalid_target, told apart by the description', async () => {
    expect(await failure(t.service, post({ audience: 'https://unknown.example.com' }))).toEqual(
      NOT_REGISTERED,
    );
    expect(
      await failure(t.service, post({ resource: 'https://unknown.example.com', audience: undefined })),
    ).toEqual(NOT_REGISTERED);
    expect(await failure(t.service, post({ audience: OTHER }))).toEqual(NOT_GRANTED);
    expect(await failure(t.service, post({ resource: OTHER, audience: undefined }))).toEqual(NOT_GRANTED);
    expect(NOT_REGISTERED.description).not.toBe(NOT_GRANTED.description);
  });

  it('checks the audience before the scope', async () => {
    expect(await failure(t.service, post({ audience: OTHER, scope: 'read' }))).toEqual(NOT_GRANTED);
  });

  it.each(['read', 'read write'])('scope=%j is invalid_scope', async (scope) => {
    expect(await failure(t.service, post({ scope }))).toEqual(INVALID_SCOPE);
  });

  it('signs nothing on any failure', async () => {
    await failure(t.service, post({ scope: 'read' }));
    await failure(t.service, post({ audience: OTHER }));
    await failure(t.service, post({ grant_type: 'password' }));
    expect(t.signed).toEqual([]);
  });

  it('passes a signing failure through untouched', async () => {
    const boom = new Error('no key');
    const { service } = setup({ sign: async () => Promise.reject(boom) });
    await expect(service.issue(post({}))).rejects.toBe(boom);
  });

  it('passes a store failure during the lookup through untouched', async () => {
    const boom = new Error('store down');
    const { service } = setup({ findClient: async () => Promise.reject(boom) });
    await expect(service.issue(post({}))).rejects.toBe(boom);
  });
});

describe('TokenService: issuance quotas', () => {
  it('counts tokens only for clients with a quota, and refuses with 429 once over it', async () => {
    const taken: string[] = [];
    let wait = 0;
    const limited = client('limited', { quota: { perMinute: 2, perDay: null } });
    const { service } = setup({
      findClient: (id) => (id === 'limited' ? limited : CLIENTS.get(id)),
      quotas: {
        take: async (id, quota) => {
          taken.push(`${id} ${quota.perMinute} ${quota.perDay}`);
          return wait;
        },
      },
    });
    await service.issue(post({}));
    expect(taken).toEqual([]); // svc has no quota: nothing counted
    await service.issue(post({ client_id: 'limited' }));
    expect(taken).toEqual(['limited 2 null']);
    wait = 42;
    expect(await failure(service, post({ client_id: 'limited' }))).toEqual({
      error: 'invalid_request',
      description: 'token quota exceeded for this client; reuse your token until it expires',
      status: 429,
      headers: { 'retry-after': '42' },
    });
  });
});

describe('audit entries of refused requests', () => {
  it('keep at most 256 characters of a presented audience, and nothing of the rest', async () => {
    const events: AuditEntry[] = [];
    const { service } = setup({ audit: (event) => events.push(event) });
    const audience = (i: number) => `https://unknown.example/${i}/${'a'.repeat(8000)}`;
    const grown = await retainedBytes(async () => {
      for (let i = 0; i < 2000; i++) {
        expect(await rejection(service.issue(post({ audience: audience(i) })))).toMatchObject({
          error: 'invalid_target',
        });
      }
      return events;
    });
    expect(events).toHaveLength(2000);
    expect(events[7]!.audience).toBe(audience(7).slice(0, 256));
    // 2000 audiences of 8 KB are 16 MB; 2000 entries with 256 characters each are about 1 MB.
    expect(grown).toBeLessThan(4 * 1024 * 1024);
  });
});

describe('TokenService: a blocked caller is answered from memory', () => {
  const TOO_MANY: Failure = {
    error: 'invalid_request',
    description: 'too many failed attempts; try again later',
    status: 429,
    headers: { 'retry-after': '120' },
  };

  /** The source is blocked (every id, as a blocked address is); failures would be counted in `failures`. */
  function blocked(extra: Partial<TokenServiceDeps> = {}) {
    const failures: string[] = [];
    const events: AuditEntry[] = [];
    const t = setup({
      attempts: { blockedFor: () => 120, failed: async (id) => void failures.push(String(id)) },
      audit: (event) => events.push(event),
      ...extra,
    });
    return { ...t, failures, events };
  }

  it('a client held in memory that presents its exact secret gets its token, without a store lookup', async () => {
    const t = blocked();
    const issued = await t.service.issue(post({}));
    expect(issued.clientId).toBe('svc');
    expect(t.lookups).toEqual([]);
    expect(t.peeks).toEqual(['svc']);
    expect(t.events.map((e) => e.type)).toEqual(['token.issued']);
  });

  it('the same over HTTP Basic', async () => {
    const t = blocked();
    const issued = await t.service.issue({
      params: { grant_type: 'client_credentials', audience: API },
      authorization: basicHeader('svc', SECRET),
      source: SOURCE,
    });
    expect(issued.clientId).toBe('svc');
    expect(t.lookups).toEqual([]);
  });

  it('everything else is 429: no store lookup, no failure counted, and one throttled entry each', async () => {
    const t = blocked({ peekClient: (id) => (id === 'svc' ? CLIENTS.get(id) : undefined) });
    const requests: TokenRequest[] = [
      post({ client_id: 'nobody' }), // unknown
      post({ client_id: 'long' }), // exists, but not in this process's memory: no lookup to find out
      post({ client_secret: 'not-the-secret' }), // wrong secret
      post({ client_id: 'not an id\u0000' }), // no client can have this id
      post({ client_secret: undefined }), // malformed: secret missing
      post({ grant_type: undefined, client_secret: 'nope' }),
      {
        params: { grant_type: 'client_credentials', audience: API },
        authorization: 'Basic !!!',
        source: SOURCE,
      },
      {
        params: { grant_type: 'client_credentials', audience: API, client_secret: SECRET },
        authorization: basicHeader('svc', SECRET),
        source: SOURCE,
      }, // two authentication methods
    ];
    for (const request of requests) expect(await failure(t.service, request)).toEqual(TOO_MANY);
    expect(t.lookups).toEqual([]);
    expect(t.failures).toEqual([]);
    expect(t.signed).toEqual([]);
    expect(t.events.map((e) => e.type)).toEqual(requests.map(() => 'token.throttled'));
    expect(t.events[0]).toEqual({
      at: NOW,
      type: 'token.throttled',
      clientId: 'nobody',
      audience: API,
      jti: null,
      reason: 'invalid_request: too many failed attempts; try again later',
      source: SOURCE,
    });
  });

  it('a disabled client with its exact secret is refused 429 too', async () => {
    const t = blocked();
    expect(await failure(t.service, post({ client_id: 'off' }))).toEqual(TOO_MANY);
  });

  describe('a registered client not in memory (the set of every client id)', () => {
    /** Nothing in memory; every client of CLIENTS registered, and `gone` too (deleted since the set was built). */
    const cold = (extra: Partial<TokenServiceDeps> = {}) =>
      blocked({
        peekClient: () => undefined,
        registered: (id) => CLIENTS.has(id) || id === 'gone',
        ...extra,
      });

    it('with its exact secret: looked up, then its token; no failure counted', async () => {
      const t = cold();
      const issued = await t.service.issue(post({ client_id: 'long' }));
      expect([issued.clientId, issued.response.expires_in]).toEqual(['long', 7200]);
      expect(t.lookups).toEqual(['long']);
      expect(t.failures).toEqual([]);
      expect(t.events.map((e) => e.type)).toEqual(['token.issued']);
    });

    it('a lookup that waits for the store (a cache miss) too, over HTTP Basic', async () => {
      const t = cold({ findClient: async (id) => CLIENTS.get(id) });
      const issued = await t.service.issue({
        params: { grant_type: 'client_credentials', audience: API },
        authorization: basicHeader('scoped', SECRET),
        source: SOURCE,
      });
      expect([issued.clientId, issued.response.scope]).toEqual([
        'scoped',
        'audit:read orders:read orders:write',
      ]);
    });

    it('a wrong secret, a disabled client, an id deleted since: looked up, then 429, no failure counted', async () => {
      const t = cold();
      for (const request of [
        post({ client_id: 'long', client_secret: 'not-the-secret' }),
        post({ client_id: 'off' }),
        post({ client_id: 'gone' }),
      ])
        expect(await failure(t.service, request)).toEqual(TOO_MANY);
      expect(t.lookups).toEqual(['long', 'off', 'gone']);
      expect(t.failures).toEqual([]);
      expect(t.signed).toEqual([]);
      expect(t.events.map((e) => e.type)).toEqual(['token.throttled', 'token.throttled', 'token.throttled']);
    });

    it('an id that is not registered: 429 with no lookup', async () => {
      const t = cold();
      expect(await failure(t.service, post({ client_id: 'nobody' }))).toEqual(TOO_MANY);
      expect(await failure(t.service, post({ client_id: 'not an id\u0000' }))).toEqual(TOO_MANY);
      expect(t.lookups).toEqual([]);
      expect(t.failures).toEqual([]);
    });

    it('a lookup that fails (the store away, the stale window over): 429, not 503', async () => {
      const unavailable = new OAuthError('temporarily_unavailable', 'try later', 503, { 'retry-after': '5' });
      for (const findClient of [
        () => Promise.reject(unavailable),
        () => {
          throw unavailable;
        },
      ]) {
        const t = cold({ findClient });
        expect(await failure(t.service, post({ client_id: 'long' }))).toEqual(TOO_MANY);
        expect(t.events.map((e) => e.type)).toEqual(['token.throttled']);
        expect(t.failures).toEqual([]);
      }
    });

    it('a client in memory is not looked up, registered or not', async () => {
      const t = blocked({ registered: () => true });
      expect((await t.service.issue(post({}))).clientId).toBe('svc');
      expect(await failure(t.service, post({ client_secret: 'nope' }))).toEqual(TOO_MANY);
      expect(t.lookups).toEqual([]);
      expect(t.peeks).toEqual(['svc', 'svc']);
    });
  });

  it('a client past its quota is a throttled refusal; issued and refused entries carry the time in ms', async () => {
    const events: AuditEntry[] = [];
    const limited = client('limited', { quota: { perMinute: 1, perDay: null } });
    let wait = 0;
    const { service } = setup({
      findClient: (id) => (id === 'limited' ? limited : CLIENTS.get(id)),
      quotas: { take: async () => wait },
      audit: (event) => events.push(event),
    });
    await service.issue(post({ client_id: 'limited' }));
    await failure(service, post({ client_id: 'limited', client_secret: 'nope' }));
    wait = 30;
    await failure(service, post({ client_id: 'limited' }));
    expect(events).toEqual([
      {
        at: NOW,
        type: 'token.issued',
        clientId: 'limited',
        audience: API,
        jti: JTI,
        reason: null,
        source: SOURCE,
      },
      {
        at: NOW,
        type: 'token.refused',
        clientId: 'limited',
        audience: API,
        jti: null,
        reason: 'invalid_client: wrong secret',
        source: SOURCE,
      },
      {
        at: NOW,
        type: 'token.throttled',
        clientId: 'limited',
        audience: API,
        jti: null,
        reason: 'invalid_request: token quota exceeded for this client; reuse your token until it expires',
        source: SOURCE,
      },
    ]);
  });
});
