/**
 * Token exchange (RFC 8693; INTERFACE.md, "Token exchange") in the token service, rule by rule, with real ES256
 * tokens (the service's own signatures, verified by verifyOwnToken as introspection verifies them), in-memory
 * clients, audiences and standing, and a frozen clock: every check in its order, each refusal's exact error,
 * description and audit reason, and the claims of the token it issues.
 */
import { generateKeyPairSync } from 'node:crypto';
import { decodeJwt } from 'jose';
import { beforeEach, describe, expect, it } from 'vitest';
import { rejection } from '../helpers/assert.js';
import { REGISTERED_CLAIMS } from '../helpers/expected.js';
import type { DpopVerifier } from '../../src/domain/dpop.js';
import { OAuthError } from '../../src/domain/errors.js';
import type { OwnTokenDeps } from '../../src/domain/own-tokens.js';
import { digestBytes, digestSecret } from '../../src/domain/secrets.js';
import { TokenService, type TokenServiceDeps } from '../../src/domain/token-service.js';
import type { KnownAudience, KnownClient, KnownGrant } from '../../src/domain/known-client.js';
import type { AuditEntry } from '../../src/domain/token-events.js';
import type { TokenRequest } from '../../src/domain/token-request.js';
import { jwsSigner, jwsVerifier } from '../../src/keys/jws.js';

const NOW = Date.parse('2030-01-02T03:04:05.678Z');
const IAT = Math.floor(NOW / 1000);
const ISSUER = 'https://auth.example.com';
const SECRET = 'the-right-secret-with-plenty-of-entropy';
const SOURCE = '192.0.2.7';

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const JWT = 'urn:ietf:params:oauth:token-type:jwt';

// A calls B (FRONT's resource server) for its caller; B calls C (MIDDLE's); C calls BACK.
const FRONT = 'https://front.example.com';
const MIDDLE = 'https://middle.example.com';
const BACK = 'https://back.example.com';
const LOOP = 'https://loop.example.com'; // L is its resource server and may exchange into it: chains of any length
const SHORT = 'https://short.example.com'; // tokenTtl 60
const NOBODY = 'https://nobody.example.com'; // registered, granted to nobody

const audience = (url: string, servers: string[], extra: Partial<KnownAudience> = {}): KnownAudience => ({
  url,
  tokenTtl: null,
  signingAlg: null,
  resourceServers: new Set(servers),
  ...extra,
});
const AUDIENCES = new Map<string, KnownAudience>(
  [
    audience(FRONT, ['svc-b', 'svc-n', 'svc-q']),
    audience(MIDDLE, ['svc-c']),
    audience(BACK, []),
    audience(LOOP, ['svc-l']),
    audience(SHORT, [], { tokenTtl: 60 }),
    audience(NOBODY, []),
  ].map((a) => [a.url, a]),
);

const grant = (scopes: string[], tokenExchange: boolean, claims?: string): KnownGrant => ({
  scopes: new Set(scopes),
  scope: scopes.length === 0 ? undefined : [...scopes].sort().join(' '),
  claims,
  tokenExchange,
});
const client = (
  id: string,
  grants: [string, KnownGrant][],
  extra: Partial<KnownClient> = {},
): KnownClient => ({
  id,
  enabled: true,
  secrets: [{ id: `sec_${id}`, digest: digestBytes(digestSecret(SECRET)), expiresAt: Infinity }],
  grants: new Map(grants),
  tokenTtl: null,
  quota: { perMinute: null, perDay: null },
  ...extra,
});
const CLIENTS = new Map<string, KnownClient>(
  [
    client('svc-a', [
      [FRONT, grant(['front:read'], false)],
      [LOOP, grant([], false)],
    ]),
    client('svc-b', [
      [MIDDLE, grant(['middle:read', 'middle:write', 'middle:admin'], true, '"tenant":"acme"')],
      [SHORT, grant([], true)],
    ]),
    client('svc-c', [[BACK, grant(['back:read'], true)]]),
    // A resource server of FRONT whose grant of MIDDLE does not allow exchange.
    client('svc-n', [[MIDDLE, grant(['middle:read'], false)]]),
    // Not a resource server of FRONT, though it may exchange into MIDDLE.
    client('svc-x', [[MIDDLE, grant(['middle:read'], true)]]),
    client('svc-l', [[LOOP, grant(['loop:go'], true)]], { tokenTtl: 600 }),
    // A resource server of FRONT with a quota and a lifetime of its own.
    client('svc-q', [[MIDDLE, grant([], true)]], { tokenTtl: 120, quota: { perMinute: 1, perDay: null } }),
  ].map((c) => [c.id, c]),
);

const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signJws = jwsSigner(pair.privateKey, 'ES256', 'k1');
const checkJws = jwsVerifier(pair.publicKey, 'ES256');

/** The standing of clients and tokens, as the denylist and the directory would hold it; changed by tests. */
interface Standing {
  denied: Set<string>;
  deleted: Set<string>;
  cut: Map<string, number>;
}

function setup(overrides: Partial<TokenServiceDeps> = {}) {
  const standing: Standing = { denied: new Set(), deleted: new Set(), cut: new Map() };
  const audit: AuditEntry[] = [];
  const quota: string[] = [];
  let now = NOW;
  let jti = 0;
  const ownTokens: OwnTokenDeps = {
    issuer: ISSUER,
    now: () => now,
    key: (kid) => (kid === 'k1' ? { alg: 'ES256', check: checkJws } : undefined),
    revoked: (id) => standing.denied.has(id),
    clientExists: (id) => CLIENTS.has(id) && !standing.deleted.has(id),
    cutOf: (id) => standing.cut.get(id) ?? -Infinity,
  };
  const deps: TokenServiceDeps = {
    findClient: (id) => CLIENTS.get(id),
    peekClient: (id) => CLIENTS.get(id),
    findAudience: (url) => AUDIENCES.get(url),
    sign: (payload, _alg, claims) => signJws(payload, claims),
    now: () => now,
    newJti: () => `jti-${++jti}`,
    attempts: { blockedFor: () => 0, failed: async () => undefined },
    quotas: {
      take: async (id, q) => {
        quota.push(id);
        return q.perMinute !== null && quota.filter((x) => x === id).length > q.perMinute ? 30 : 0;
      },
    },
    audit: (event) => audit.push(event),
    issuer: ISSUER,
    defaultTtl: 1800,
    defaultAlg: 'ES256',
    ownTokens,
    ...overrides,
  };
  const service = new TokenService(deps);
  return {
    service,
    standing,
    audit,
    quota,
    at: (ms: number) => {
      now = ms;
    },
    /** A client credentials token of `id` for `aud`. */
    async token(id: string, aud: string, scope?: string): Promise<string> {
      const issued = await service.issue({
        params: {
          grant_type: 'client_credentials',
          client_id: id,
          client_secret: SECRET,
          audience: aud,
          ...(scope === undefined ? {} : { scope }),
        },
        source: SOURCE,
      });
      return issued.response.access_token;
    },
  };
}

/** A token exchange request of `actor` for `target`, with `subject` as its subject token. */
const exchange = (
  actor: string,
  subject: string,
  target: string,
  extra: TokenRequest['params'] = {},
): TokenRequest => ({
  params: {
    grant_type: EXCHANGE,
    client_id: actor,
    client_secret: SECRET,
    subject_token: subject,
    subject_token_type: ACCESS_TOKEN,
    audience: target,
    ...extra,
  },
  source: SOURCE,
});

interface Failure {
  error: string;
  description: string;
  status: number;
  headers: Readonly<Record<string, string>>;
}
async function failure(service: TokenService, request: TokenRequest): Promise<Failure> {
  const e = await rejection(service.issue(request), OAuthError);
  return { error: e.error, description: e.description, status: e.status, headers: e.headers };
}
const fail = (error: string, description: string, status = 400): Failure => ({
  error,
  description,
  status,
  headers: {},
});
const INACTIVE_SUBJECT = fail(
  'invalid_request',
  'subject_token is not an active access token of this server',
);
const INACTIVE_ACTOR = fail('invalid_request', 'actor_token is not an active access token of this server');
const NOT_RESOURCE_SERVER = fail(
  'unauthorized_client',
  "this client is not a resource server of the subject_token's audience",
);
const NOT_ENABLED = fail(
  'unauthorized_client',
  "token exchange is not enabled on this client's grant for the requested audience",
);

let t: ReturnType<typeof setup>;
let fromA: string;
beforeEach(async () => {
  t = setup();
  fromA = await t.token('svc-a', FRONT);
  t.audit.length = 0;
  t.quota.length = 0;
});

describe('token exchange: the token', () => {
  it("A's token at B, exchanged by B for MIDDLE: sub A, client_id B, act B, B's scopes and custom claims", async () => {
    const issued = await t.service.issue(exchange('svc-b', fromA, MIDDLE));
    expect(issued.response).toEqual({
      access_token: expect.any(String),
      issued_token_type: ACCESS_TOKEN,
      token_type: 'Bearer',
      expires_in: 1800,
      scope: 'middle:admin middle:read middle:write',
    });
    // RFC 8693 §2.2.1's order in the answer.
    expect(Object.keys(issued.response)).toEqual([
      'access_token',
      'issued_token_type',
      'token_type',
      'expires_in',
      'scope',
    ]);
    const claims = decodeJwt(issued.response.access_token);
    expect(claims).toEqual({
      iss: ISSUER,
      sub: 'svc-a',
      aud: MIDDLE,
      client_id: 'svc-b',
      iat: IAT,
      exp: IAT + 1800,
      jti: 'jti-2',
      scope: 'middle:admin middle:read middle:write',
      act: { sub: 'svc-b' },
      tenant: 'acme',
    });
    expect(Object.keys(claims)).toEqual([...REGISTERED_CLAIMS, 'scope', 'act', 'tenant']);
    expect(issued).toMatchObject({
      clientId: 'svc-b',
      audience: MIDDLE,
      jti: 'jti-2',
      type: 'token.exchanged',
    });
    expect(t.audit).toEqual([
      {
        at: NOW,
        type: 'token.exchanged',
        clientId: 'svc-b',
        audience: MIDDLE,
        jti: 'jti-2',
        reason: 'sub svc-a act svc-b',
        source: SOURCE,
      },
    ]);
  });

  it('a chain of three services: A → B → C, act nested (RFC 8693 §4.1), the audit trail names the chain', async () => {
    const atC = (await t.service.issue(exchange('svc-b', fromA, MIDDLE))).response.access_token;
    const issued = await t.service.issue(exchange('svc-c', atC, BACK));
    expect(issued.response).toEqual({
      access_token: expect.any(String),
      issued_token_type: ACCESS_TOKEN,
      token_type: 'Bearer',
      expires_in: 1800,
      scope: 'back:read',
    });
    expect(decodeJwt(issued.response.access_token)).toEqual({
      iss: ISSUER,
      sub: 'svc-a',
      aud: BACK,
      client_id: 'svc-c',
      iat: IAT,
      exp: IAT + 1800,
      jti: 'jti-3',
      scope: 'back:read',
      act: { sub: 'svc-c', act: { sub: 'svc-b' } },
    });
    expect(t.audit.map((e) => [e.type, e.clientId, e.audience, e.reason])).toEqual([
      ['token.exchanged', 'svc-b', MIDDLE, 'sub svc-a act svc-b'],
      ['token.exchanged', 'svc-c', BACK, 'sub svc-a act svc-b>svc-c'],
    ]);
  });

  it("exp never later than the subject token's; expires_in says what is left", async () => {
    // B's lifetime for SHORT is 60 s; A's token (1800 s) 1790 s old has 10 s left.
    t.at(NOW + 1790_000);
    const capped = await t.service.issue(exchange('svc-b', fromA, MIDDLE));
    expect(capped.response.expires_in).toBe(10);
    const claims = decodeJwt(capped.response.access_token);
    expect([claims.iat, claims.exp]).toEqual([IAT + 1790, IAT + 1800]);
    // Where the acting client's lifetime is the shorter, it counts.
    t.at(NOW);
    const own = await t.service.issue(exchange('svc-b', fromA, SHORT));
    expect(own.response.expires_in).toBe(60);
    expect(decodeJwt(own.response.access_token).exp).toBe(IAT + 60);
    // The acting client's own token_ttl, as for client credentials.
    const q = await t.service.issue(exchange('svc-q', fromA, MIDDLE));
    expect(q.response.expires_in).toBe(120);
  });

  it('scope: default every scope of the actor’s grant; asked ones within it; never the subject token’s', async () => {
    const scoped = await t.token('svc-a', FRONT, 'front:read');
    const one = await t.service.issue(exchange('svc-b', scoped, MIDDLE, { scope: 'middle:read' }));
    expect(one.response.scope).toBe('middle:read');
    expect(decodeJwt(one.response.access_token).scope).toBe('middle:read');
    const two = await t.service.issue(
      exchange('svc-b', scoped, MIDDLE, { scope: 'middle:write middle:read' }),
    );
    expect(two.response.scope).toBe('middle:read middle:write');
    // The subject token's scopes are another API's: not carried, and not asked for.
    expect(await failure(t.service, exchange('svc-b', scoped, MIDDLE, { scope: 'front:read' }))).toEqual(
      fail('invalid_scope', 'scope front:read is not granted to this client for this audience'),
    );
    expect(
      await failure(t.service, exchange('svc-b', scoped, MIDDLE, { scope: 'middle:read middle:delete' })),
    ).toEqual(fail('invalid_scope', 'scope middle:delete is not granted to this client for this audience'));
    // A grant without scopes: a token without them.
    const none = await t.service.issue(exchange('svc-b', fromA, SHORT));
    expect(none.response).not.toHaveProperty('scope');
    expect(decodeJwt(none.response.access_token)).not.toHaveProperty('scope');
  });

  it('resource names the target as audience does', async () => {
    const issued = await t.service.issue(
      exchange('svc-b', fromA, MIDDLE, { audience: '', resource: MIDDLE }),
    );
    expect(decodeJwt(issued.response.access_token).aud).toBe(MIDDLE);
  });

  it('subject_token_type and actor_token_type may be ...:jwt; requested_token_type ...:access_token', async () => {
    const own = await t.token('svc-b', SHORT);
    const issued = await t.service.issue(
      exchange('svc-b', fromA, MIDDLE, {
        subject_token_type: JWT,
        actor_token: own,
        actor_token_type: JWT,
        requested_token_type: ACCESS_TOKEN,
      }),
    );
    expect(issued.response.issued_token_type).toBe(ACCESS_TOKEN);
  });

  it('an actor_token of the acting client itself is accepted; the token is the same', async () => {
    const own = await t.token('svc-b', SHORT);
    const issued = await t.service.issue(
      exchange('svc-b', fromA, MIDDLE, { actor_token: own, actor_token_type: ACCESS_TOKEN }),
    );
    expect(decodeJwt(issued.response.access_token)).toMatchObject({
      sub: 'svc-a',
      client_id: 'svc-b',
      act: { sub: 'svc-b' },
    });
  });

  it('DPoP: a proof binds the exchanged token (cnf.jkt, token_type DPoP), as at client credentials', async () => {
    const proofs: string[] = [];
    const dpop = {
      verify: async (proof: string) => {
        proofs.push(proof);
        return 'thumbprint-of-the-key';
      },
      nonce: () => undefined,
    } as unknown as DpopVerifier;
    const s = setup({ dpop });
    const subject = await s.token('svc-a', FRONT);
    const issued = await s.service.issue({ ...exchange('svc-b', subject, MIDDLE), dpop: 'the.proof.jwt' });
    expect(proofs).toEqual(['the.proof.jwt']);
    expect(issued.response.token_type).toBe('DPoP');
    const claims = decodeJwt(issued.response.access_token);
    expect(claims.cnf).toEqual({ jkt: 'thumbprint-of-the-key' });
    expect(Object.keys(claims)).toEqual([...REGISTERED_CLAIMS, 'scope', 'act', 'cnf', 'tenant']);
  });

  it('the quota counted is the acting client’s, one token per exchange', async () => {
    await t.service.issue(exchange('svc-q', fromA, MIDDLE));
    expect(t.quota).toEqual(['svc-q']);
    expect(await failure(t.service, exchange('svc-q', fromA, MIDDLE))).toEqual({
      error: 'invalid_request',
      description: 'token quota exceeded for this client; reuse your token until it expires',
      status: 429,
      headers: { 'retry-after': '30' },
    });
  });

  it('the exchanged token is itself an active token of this server, and inactive once its caller is disabled', async () => {
    const issued = await t.service.issue(exchange('svc-b', fromA, MIDDLE));
    const atC = issued.response.access_token;
    await expect(t.service.issue(exchange('svc-c', atC, BACK))).resolves.toMatchObject({ clientId: 'svc-c' });
    t.standing.cut.set('svc-a', Infinity);
    expect(await failure(t.service, exchange('svc-c', atC, BACK))).toEqual(INACTIVE_SUBJECT);
    expect(t.audit.at(-1)?.reason).toBe(
      'invalid_request: subject_token: its subject client is disabled or deleted',
    );
  });
});

describe('token exchange: act depth (chains stop at 5 actors)', () => {
  it('depth counts act levels: 5 exchanges in a row are allowed, a 6th is invalid_request', async () => {
    let subject = await t.token('svc-a', LOOP);
    for (let depth = 1; depth <= 5; depth++) {
      const issued = await t.service.issue(exchange('svc-l', subject, LOOP));
      subject = issued.response.access_token;
      let act = decodeJwt(subject).act as { sub: string; act?: unknown } | undefined;
      let levels = 0;
      while (act !== undefined) {
        expect(act.sub).toBe('svc-l');
        levels++;
        act = act.act as typeof act;
      }
      expect(levels).toBe(depth);
    }
    expect(t.audit.at(-1)?.reason).toBe('sub svc-a act svc-l>svc-l>svc-l>svc-l>svc-l');
    expect(await failure(t.service, exchange('svc-l', subject, LOOP))).toEqual(
      fail('invalid_request', 'subject_token already nests 5 actors (act); a chain stops at 5'),
    );
    expect(t.audit.at(-1)).toMatchObject({
      type: 'token.refused',
      clientId: 'svc-l',
      audience: LOOP,
      reason: 'invalid_request: subject_token: act nests 5 actors',
    });
  });
});

describe('token exchange: each refusal, in the order of the checks', () => {
  it('0. authentication first: a wrong secret is invalid_client, whatever else is wrong', async () => {
    expect(
      await failure(
        t.service,
        exchange('svc-b', 'junk', 'https://unknown.example', { client_secret: 'wrong' }),
      ),
    ).toEqual({
      error: 'invalid_client',
      description: 'client authentication failed',
      status: 401,
      headers: { 'www-authenticate': 'Basic realm="tessera"' },
    });
  });

  it('0. an unknown grant_type names both grant types', async () => {
    expect(
      await failure(
        t.service,
        exchange('svc-b', fromA, MIDDLE, { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer' }),
      ),
    ).toEqual(
      fail(
        'unsupported_grant_type',
        'grant_type must be client_credentials or urn:ietf:params:oauth:grant-type:token-exchange',
      ),
    );
  });

  it('0. without the verifier of its own tokens, the service offers no token exchange', async () => {
    const s = setup({ ownTokens: undefined });
    expect(s.service.grantTypesSupported).toEqual(['client_credentials']);
    expect(await failure(s.service, exchange('svc-b', fromA, MIDDLE))).toEqual(
      fail('unsupported_grant_type', 'grant_type must be client_credentials'),
    );
    expect(t.service.grantTypesSupported).toEqual([
      'client_credentials',
      'urn:ietf:params:oauth:grant-type:token-exchange',
    ]);
  });

  it.each<[string, TokenRequest['params'], string]>([
    ['subject_token missing', { subject_token: undefined }, 'subject_token is required'],
    ['subject_token empty', { subject_token: '' }, 'subject_token is required'],
    ['subject_token_type missing', { subject_token_type: undefined }, 'subject_token_type is required'],
    [
      'subject_token_type another type',
      { subject_token_type: 'urn:ietf:params:oauth:token-type:id_token' },
      `subject_token_type must be ${ACCESS_TOKEN}`,
    ],
    [
      'subject_token_type refresh_token',
      { subject_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' },
      `subject_token_type must be ${ACCESS_TOKEN}`,
    ],
    ['actor_token without its type', { actor_token: 'x.y.z' }, 'actor_token_type is required'],
    [
      'actor_token_type another type',
      { actor_token: 'x.y.z', actor_token_type: 'urn:ietf:params:oauth:token-type:saml2' },
      `actor_token_type must be ${ACCESS_TOKEN}`,
    ],
    [
      'actor_token_type without actor_token',
      { actor_token_type: ACCESS_TOKEN },
      'actor_token_type is sent only with actor_token',
    ],
    [
      'requested_token_type jwt',
      { requested_token_type: JWT },
      `requested_token_type must be ${ACCESS_TOKEN}`,
    ],
    [
      'requested_token_type refresh_token',
      { requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' },
      `requested_token_type must be ${ACCESS_TOKEN}`,
    ],
    ['no target', { audience: undefined }, 'audience is required'],
    ['audience and resource both', { resource: BACK }, 'send audience or resource, not both'],
  ])('1. %s: invalid_request, before any token is looked at', async (_name, params, description) => {
    // The subject token is junk too: the parameters are checked first.
    const request = exchange('svc-b', 'junk', MIDDLE, params);
    if (!('subject_token' in params)) request.params.subject_token = 'junk';
    expect(await failure(t.service, request)).toEqual(fail('invalid_request', description));
    expect(t.audit.at(-1)).toMatchObject({
      type: 'token.refused',
      reason: `invalid_request: ${description}`,
    });
  });

  it('2, 4. the subject token not genuine, or not active: invalid_request, the audit trail says why', async () => {
    const [h, p, s] = fromA.split('.') as [string, string, string];
    const other = jwsSigner(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey, 'ES256', 'k1');
    const cases: [string, () => void, string][] = [
      ['junk', () => undefined, 'not a compact JWS'],
      [`${h}.${p}.${s.slice(0, -4)}AAAA`, () => undefined, 'bad signature'],
      [other(decodeJwt(fromA)), () => undefined, 'bad signature'],
      [
        signJws({ ...decodeJwt(fromA), iss: 'https://evil.example.com' }),
        () => undefined,
        'issued by another issuer',
      ],
      [fromA, () => t.at(NOW + 1800_000), 'expired'],
      [fromA, () => t.standing.denied.add('jti-1'), 'revoked'],
      [fromA, () => t.standing.cut.set('svc-a', IAT), "its client's tokens were revoked"],
      [fromA, () => t.standing.cut.set('svc-a', Infinity), 'its client is disabled or deleted'],
      [fromA, () => t.standing.deleted.add('svc-a'), 'its client is deleted'],
    ];
    for (const [subject, arrange, why] of cases) {
      t.standing.denied.clear();
      t.standing.deleted.clear();
      t.standing.cut.clear();
      t.at(NOW);
      arrange();
      expect(await failure(t.service, exchange('svc-b', subject, MIDDLE)), why).toEqual(INACTIVE_SUBJECT);
      expect(t.audit.at(-1), why).toMatchObject({
        type: 'token.refused',
        clientId: 'svc-b',
        audience: MIDDLE,
        jti: null,
        reason: `invalid_request: subject_token: ${why}`,
      });
    }
  });

  it("4. a subject token for a caller disabled after the exchange that made it: invalid_request (the original caller's standing)", async () => {
    const atC = (await t.service.issue(exchange('svc-b', fromA, MIDDLE))).response.access_token;
    for (const [arrange, why] of [
      [() => t.standing.deleted.add('svc-a'), 'its subject client is deleted'],
      [() => t.standing.cut.set('svc-a', Infinity), 'its subject client is disabled or deleted'],
      [() => t.standing.cut.set('svc-a', IAT), "its subject client's tokens were revoked"],
    ] as const) {
      t.standing.deleted.clear();
      t.standing.cut.clear();
      arrange();
      expect(await failure(t.service, exchange('svc-c', atC, BACK)), why).toEqual(INACTIVE_SUBJECT);
      expect(t.audit.at(-1)?.reason).toBe(`invalid_request: subject_token: ${why}`);
    }
  });

  it('5. an actor_token not the acting client’s own, or not active: invalid_request', async () => {
    const ofC = await t.token('svc-c', BACK);
    const ofB = await t.token('svc-b', SHORT);
    // A token B holds for a caller (an exchanged one: client_id B, sub A) is not B's own.
    const heldByB = (await t.service.issue(exchange('svc-b', fromA, MIDDLE))).response.access_token;
    const notOwn = fail('invalid_request', 'actor_token is not a token of the authenticated client');
    const cases: [string, Failure, string][] = [
      ['junk', INACTIVE_ACTOR, 'actor_token: not a compact JWS'],
      [ofC, notOwn, 'actor_token: a token of svc-c'],
      [fromA, notOwn, 'actor_token: a token of svc-a'],
      [heldByB, notOwn, 'actor_token: a token of svc-b for svc-a'],
    ];
    for (const [actor, expected, reason] of cases) {
      expect(
        await failure(
          t.service,
          exchange('svc-b', fromA, MIDDLE, { actor_token: actor, actor_token_type: ACCESS_TOKEN }),
        ),
        reason,
      ).toEqual(expected);
      expect(t.audit.at(-1)?.reason).toBe(`invalid_request: ${reason}`);
    }
    // Another client's token tells nothing of whether it is active: revoked, the same answer.
    t.standing.denied.add(decodeJwt(ofC).jti!);
    expect(
      await failure(
        t.service,
        exchange('svc-b', fromA, MIDDLE, { actor_token: ofC, actor_token_type: ACCESS_TOKEN }),
      ),
    ).toEqual(notOwn);
    t.standing.denied.add(decodeJwt(ofB).jti!);
    expect(
      await failure(
        t.service,
        exchange('svc-b', fromA, MIDDLE, { actor_token: ofB, actor_token_type: ACCESS_TOKEN }),
      ),
    ).toEqual(INACTIVE_ACTOR);
    expect(t.audit.at(-1)?.reason).toBe('invalid_request: actor_token: revoked');
  });

  it('2, 3, 4: a client the token was not meant for learns whether it is genuine, never whether it is active', async () => {
    // Not this server's token: anyone can tell that from the JWKS.
    expect(await failure(t.service, exchange('svc-x', 'junk', MIDDLE))).toEqual(INACTIVE_SUBJECT);
    // Genuine but expired, revoked, of a disabled client: to svc-x, the same answer as an active one.
    for (const arrange of [
      () => undefined,
      () => t.at(NOW + 1800_000),
      () => t.standing.denied.add('jti-1'),
      () => t.standing.cut.set('svc-a', Infinity),
    ]) {
      t.standing.denied.clear();
      t.standing.cut.clear();
      t.at(NOW);
      arrange();
      expect(await failure(t.service, exchange('svc-x', fromA, MIDDLE))).toEqual(NOT_RESOURCE_SERVER);
    }
    // The resource server itself is told.
    expect(await failure(t.service, exchange('svc-b', fromA, MIDDLE))).toEqual(INACTIVE_SUBJECT);
    expect(t.audit.at(-1)?.reason).toBe('invalid_request: subject_token: its client is disabled or deleted');
  });

  it('3. the acting client not a resource server of the subject token’s audience: unauthorized_client', async () => {
    expect(await failure(t.service, exchange('svc-x', fromA, MIDDLE))).toEqual(NOT_RESOURCE_SERVER);
    expect(t.audit.at(-1)).toMatchObject({
      type: 'token.refused',
      clientId: 'svc-x',
      reason: `unauthorized_client: this client is not a resource server of the subject_token's audience`,
    });
    // C serves MIDDLE, not FRONT: A's token for B is not C's to exchange, even where C may exchange.
    expect(await failure(t.service, exchange('svc-c', fromA, BACK))).toEqual(NOT_RESOURCE_SERVER);
    // ...and before the target is looked at: an unknown target tells X nothing more.
    expect(await failure(t.service, exchange('svc-x', fromA, 'https://unknown.example'))).toEqual(
      NOT_RESOURCE_SERVER,
    );
  });

  it('3. a subject token with an array aud is for the client if one of its audiences is', async () => {
    const arrayAud = signJws({ ...decodeJwt(fromA), aud: [BACK, FRONT], jti: 'array-aud' });
    const issued = await t.service.issue(exchange('svc-b', arrayAud, MIDDLE));
    expect(decodeJwt(issued.response.access_token)).toMatchObject({ sub: 'svc-a', aud: MIDDLE });
    const none = signJws({ ...decodeJwt(fromA), aud: [BACK, NOBODY], jti: 'array-aud-2' });
    expect(await failure(t.service, exchange('svc-b', none, MIDDLE))).toEqual(NOT_RESOURCE_SERVER);
  });

  it('7. the target unknown, or not granted to the acting client: invalid_target', async () => {
    expect(await failure(t.service, exchange('svc-b', fromA, 'https://unknown.example'))).toEqual(
      fail('invalid_target', 'the requested audience is not registered'),
    );
    expect(await failure(t.service, exchange('svc-b', fromA, BACK))).toEqual(
      fail('invalid_target', 'the requested audience is not granted to this client'),
    );
    expect(t.audit.at(-1)).toMatchObject({
      audience: BACK,
      reason: 'invalid_target: the requested audience is not granted to this client',
    });
  });

  it("8. exchange not enabled on the acting client's grant for the target: unauthorized_client", async () => {
    expect(await failure(t.service, exchange('svc-n', fromA, MIDDLE))).toEqual(NOT_ENABLED);
    // Granted, and allowed by client credentials: only exchange is off.
    await expect(t.token('svc-n', MIDDLE)).resolves.toEqual(expect.any(String));
  });

  it('8 before 9: a scope is checked only once exchange is allowed', async () => {
    expect(await failure(t.service, exchange('svc-n', fromA, MIDDLE, { scope: 'nope' }))).toEqual(
      NOT_ENABLED,
    );
    expect(
      await failure(t.service, exchange('svc-b', fromA, MIDDLE, { scope: 'middle:read  middle:write' })),
    ).toEqual(
      fail('invalid_scope', 'scope must be scope tokens separated by single spaces (RFC 6749 section 3.3)'),
    );
  });

  it('a refused exchange issues nothing and counts no quota', async () => {
    await failure(t.service, exchange('svc-q', fromA, BACK));
    expect(t.quota).toEqual([]);
  });
});
