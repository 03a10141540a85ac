/**
 * Token exchange, by property (fast-check): over random audiences (lifetimes, resource servers), random clients
 * (lifetimes, grants with random scopes and token_exchange flags) and random chains of exchanges at random
 * times, every answer is the one a plain model of the contract predicts, and no exchanged token carries a scope,
 * an audience, a lifetime, a subject or an actor chain the rules do not allow.
 */
import { generateKeyPairSync } from 'node:crypto';
import fc from 'fast-check';
import { decodeJwt } from 'jose';
import { describe, expect, it } from 'vitest';
import { OAuthError } from '../../src/domain/errors.js';
import { digestBytes, digestSecret } from '../../src/domain/secrets.js';
import { TokenService } from '../../src/domain/token-service.js';
import type { KnownAudience, KnownClient, KnownGrant } from '../../src/domain/known-client.js';
import { jwsSigner, jwsVerifier } from '../../src/keys/jws.js';

const NOW = Date.parse('2030-01-02T03:04:05.000Z');
const ISSUER = 'https://auth.example.com';
const SECRET = 'the-right-secret-with-plenty-of-entropy';
const DEFAULT_TTL = 1800;
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

const CLIENT_IDS = ['svc-0', 'svc-1', 'svc-2', 'svc-3'] as const;
const AUDIENCE_URLS = ['https://a0.example', 'https://a1.example', 'https://a2.example'] as const;
/** Each audience's scopes: `<n>:read`, `<n>:write`, `<n>:admin`. */
const scopesOf = (url: string): string[] => {
  const n = url.slice(8, 10);
  return [`${n}:read`, `${n}:write`, `${n}:admin`];
};

const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const sign = jwsSigner(pair.privateKey, 'ES256', 'k1');
const check = jwsVerifier(pair.publicKey, 'ES256');

const ttl = fc.option(fc.integer({ min: 60, max: 7200 }), { nil: null });
const world = fc.record({
  audiences: fc.tuple(
    ...AUDIENCE_URLS.map((url) =>
      fc.record({
        url: fc.constant(url),
        tokenTtl: ttl,
        servers: fc.subarray([...CLIENT_IDS], { minLength: 2 }),
      }),
    ),
  ),
  clients: fc.tuple(
    ...CLIENT_IDS.map((id) =>
      fc.record({
        id: fc.constant(id),
        tokenTtl: ttl,
        grants: fc.tuple(
          ...AUDIENCE_URLS.map((url) =>
            fc.option(
              fc.record({
                scopes: fc.subarray(scopesOf(url)),
                tokenExchange: fc.oneof({ weight: 6, arbitrary: fc.constant(true) }, fc.constant(false)),
              }),
              { nil: undefined, freq: 6 },
            ),
          ),
        ),
      }),
    ),
  ),
  caller: fc.constantFrom(...CLIENT_IDS),
  callerAudience: fc.constantFrom(...AUDIENCE_URLS),
  steps: fc.array(
    fc.record({
      actor: fc.constantFrom(...CLIENT_IDS),
      // Mostly, the actor is one of the subject token's resource servers (then chains grow long).
      follow: fc.constantFrom(true, true, true, false),
      pick: fc.nat(),
      target: fc.constantFrom(...AUDIENCE_URLS),
      // Anything of any audience's scopes: within the grant or not.
      // Scopes asked, by index into the target's own, now and then one of another API or unknown.
      scope: fc.option(
        fc.record({
          own: fc.subarray([0, 1, 2]),
          foreign: fc.oneof(
            { weight: 6, arbitrary: fc.constant(undefined) },
            fc.constantFrom('x:y', 'a1:read', 'a2:admin'),
          ),
        }),
        { nil: undefined, freq: 3 },
      ),
      // Seconds that pass before it: mostly a few, now and then enough for the subject token to expire.
      later: fc.oneof(
        { weight: 9, arbitrary: fc.integer({ min: 0, max: 30 }) },
        { weight: 1, arbitrary: fc.integer({ min: 0, max: 3000 }) },
      ),
    }),
    { maxLength: 10 },
  ),
});
type World = typeof world extends fc.Arbitrary<infer T> ? T : never;

/** The model's verdict on one exchange: the error the contract requires, or null for a token. */
function expected(
  w: World,
  subject: { aud: string; exp: number; depth: number },
  step: { actor: string; target: string; scope: string[] | undefined },
  now: number,
): string | null {
  // The subject token was meant for the actor, before whether it is still active (only the actor may learn that).
  const served = w.audiences.find((a) => a.url === subject.aud)!.servers.some((id) => id === step.actor);
  if (!served) return 'unauthorized_client';
  if (now >= subject.exp * 1000) return 'invalid_request';
  if (subject.depth >= 5) return 'invalid_request';
  const client = w.clients.find((c) => c.id === step.actor)!;
  const grant = client.grants[AUDIENCE_URLS.indexOf(step.target as (typeof AUDIENCE_URLS)[number])];
  if (grant === undefined) return 'invalid_target';
  if (!grant.tokenExchange) return 'unauthorized_client';
  if (step.scope !== undefined && step.scope.length > 0 && !step.scope.every((s) => grant.scopes.includes(s)))
    return 'invalid_scope';
  return null;
}

function build(w: World) {
  const audiences = new Map<string, KnownAudience>(
    w.audiences.map((a) => [
      a.url,
      { url: a.url, tokenTtl: a.tokenTtl, signingAlg: null, resourceServers: new Set(a.servers) },
    ]),
  );
  const clients = new Map<string, KnownClient>(
    w.clients.map((c) => [
      c.id,
      {
        id: c.id,
        enabled: true,
        secrets: [{ id: `sec_${c.id}`, digest: digestBytes(digestSecret(SECRET)), expiresAt: Infinity }],
        grants: new Map(
          c.grants.flatMap((g, i): [string, KnownGrant][] =>
            g === undefined
              ? []
              : [
                  [
                    AUDIENCE_URLS[i]!,
                    {
                      scopes: new Set(g.scopes),
                      scope: g.scopes.length === 0 ? undefined : [...g.scopes].sort().join(' '),
                      tokenExchange: g.tokenExchange,
                    },
                  ],
                ],
          ),
        ),
        tokenTtl: c.tokenTtl,
        quota: { perMinute: null, perDay: null },
      },
    ]),
  );
  let now = NOW;
  let jti = 0;
  const service = new TokenService({
    findClient: (id) => clients.get(id),
    peekClient: (id) => clients.get(id),
    findAudience: (url) => audiences.get(url),
    sign: (payload, _alg, claims) => sign(payload, claims),
    now: () => now,
    newJti: () => `jti-${++jti}`,
    attempts: { blockedFor: () => 0, failed: async () => undefined },
    issuer: ISSUER,
    defaultTtl: DEFAULT_TTL,
    defaultAlg: 'ES256',
    ownTokens: {
      issuer: ISSUER,
      now: () => now,
      key: (kid) => (kid === 'k1' ? { alg: 'ES256', check } : undefined),
      revoked: () => false,
      clientExists: (id) => clients.has(id),
      cutOf: () => -Infinity,
    },
  });
  return {
    service,
    clients,
    audiences,
    later: (seconds: number) => (now += seconds * 1000),
    now: () => now,
  };
}

/** The subs of an act claim, outermost (the latest actor) first. */
function chainOf(act: unknown): string[] {
  const subs: string[] = [];
  let level = act as { sub: string; act?: unknown } | undefined;
  while (level !== undefined) {
    subs.push(level.sub);
    level = level.act as typeof level;
  }
  return subs;
}

describe('token exchange, by property', () => {
  it('every exchange is answered as the rules say, and no token exceeds them', async () => {
    let exchanged = 0;
    let refused = 0;
    let fifth = 0;
    let beyond = 0;
    await fc.assert(
      fc.asyncProperty(world, async (w) => {
        const s = build(w);
        const first = await s.service
          .issue({
            params: {
              grant_type: 'client_credentials',
              client_id: w.caller,
              client_secret: SECRET,
              audience: w.callerAudience,
            },
            source: '192.0.2.1',
          })
          .catch((error: unknown) => error);
        if (first instanceof OAuthError) {
          // Not granted: nothing to exchange (client credentials' own rules are tested elsewhere).
          expect(first.error).toBe('invalid_target');
          return;
        }
        if (first instanceof Error) throw first;
        let subjectToken = (first as { response: { access_token: string } }).response.access_token;
        let subject = decodeJwt(subjectToken) as { aud: string; exp: number; sub: string; act?: unknown };

        for (const drawn of w.steps) {
          const servers = w.audiences.find((a) => a.url === subject.aud)!.servers;
          const scope =
            drawn.scope === undefined
              ? undefined
              : [
                  ...drawn.scope.own.map((i) => scopesOf(drawn.target)[i]!),
                  ...(drawn.scope.foreign === undefined ? [] : [drawn.scope.foreign]),
                ];
          const step = {
            actor: drawn.follow ? servers[drawn.pick % servers.length]! : drawn.actor,
            target: drawn.target,
            scope,
          };
          s.later(drawn.later);
          const verdict = expected(w, { ...subject, depth: chainOf(subject.act).length }, step, s.now());
          const answer = await s.service
            .issue({
              params: {
                grant_type: EXCHANGE,
                client_id: step.actor,
                client_secret: SECRET,
                subject_token: subjectToken,
                subject_token_type: ACCESS_TOKEN,
                audience: step.target,
                ...(step.scope === undefined ? {} : { scope: step.scope.join(' ') }),
              },
              source: '192.0.2.1',
            })
            .catch((error: unknown) => error);
          if (answer instanceof OAuthError) {
            refused++;
            if (chainOf(subject.act).length === 5) beyond++;
            expect(answer.error).toBe(verdict);
            continue;
          }
          if (answer instanceof Error) throw answer;
          exchanged++;
          if (chainOf(subject.act).length === 4) fifth++;
          expect(verdict).toBeNull();
          const { response } = answer as { response: Record<string, unknown> };
          const token = response.access_token as string;
          const claims = decodeJwt(token) as Record<string, unknown> & {
            sub: string;
            aud: string;
            client_id: string;
            iat: number;
            exp: number;
            scope?: string;
            act?: unknown;
          };
          const actor = s.clients.get(step.actor)!;
          const grant = actor.grants.get(step.target);
          // The audience: the target, granted to the actor with exchange allowed; the token was the actor's to use.
          expect(claims.aud).toBe(step.target);
          expect(grant?.tokenExchange).toBe(true);
          expect(s.audiences.get(subject.aud)!.resourceServers.has(step.actor)).toBe(true);
          // Who: the original caller, the acting client, the chain one longer, at most 5.
          expect(claims.sub).toBe(w.caller);
          expect(claims.client_id).toBe(step.actor);
          const chain = chainOf(claims.act);
          expect(chain).toEqual([step.actor, ...chainOf(subject.act)]);
          expect(chain.length).toBeLessThanOrEqual(5);
          // Scopes: within the actor's grant; exactly those asked, or all of the grant.
          const carried = claims.scope === undefined ? [] : claims.scope.split(' ');
          for (const scope of carried) expect(grant!.scopes.has(scope)).toBe(true);
          const asked = step.scope === undefined || step.scope.length === 0 ? [...grant!.scopes] : step.scope;
          expect(carried).toEqual([...new Set(asked)].sort());
          expect(response.scope).toBe(claims.scope);
          // Lifetime: never past the subject token's, never past the actor's own lifetime for the target.
          const lifetime = actor.tokenTtl ?? s.audiences.get(step.target)!.tokenTtl ?? DEFAULT_TTL;
          expect(claims.iat).toBe(Math.floor(s.now() / 1000));
          expect(claims.exp).toBeLessThanOrEqual(subject.exp);
          expect(claims.exp).toBeLessThanOrEqual(claims.iat + lifetime);
          expect(claims.exp).toBe(Math.min(subject.exp, claims.iat + lifetime));
          expect(response.expires_in).toBe(claims.exp - claims.iat);
          expect(response.expires_in).toBeGreaterThan(0);
          expect(response.issued_token_type).toBe(ACCESS_TOKEN);
          subjectToken = token;
          subject = claims;
        }
      }),
      { numRuns: 500 },
    );
    // The generators reach both outcomes often, chains of 5 actors, and attempts past them.
    expect(exchanged).toBeGreaterThan(300);
    expect(refused).toBeGreaterThan(300);
    expect(fifth).toBeGreaterThan(3);
    expect(beyond).toBeGreaterThan(3);
  });
});
