/**
 * The one verifier of Tessera's own tokens (INTERFACE.md, "Revocation and introspection"), rule by rule, with
 * real keys and a frozen clock: what makes a token active, and each thing that makes it inactive, with its kind.
 */
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { SigningAlg } from '../../src/domain/jose.js';
import { verifyOwnToken, type OwnTokenDeps } from '../../src/domain/own-tokens.js';
import { jwsSigner, jwsVerifier } from '../../src/keys/jws.js';

const ISSUER = 'https://auth.example.com';
const NOW = Date.parse('2030-01-02T03:04:05.500Z');
const IAT = Math.floor(NOW / 1000) - 10;

interface Pair {
  privateKey: KeyObject;
  publicKey: KeyObject;
}
const pairs: Record<'ES256' | 'EdDSA' | 'RS256', Pair> = {
  ES256: generateKeyPairSync('ec', { namedCurve: 'P-256' }),
  EdDSA: generateKeyPairSync('ed25519'),
  RS256: generateKeyPairSync('rsa', { modulusLength: 2048 }),
};

const claims = (extra: Record<string, unknown> = {}) => ({
  iss: ISSUER,
  sub: 'svc',
  aud: 'https://api.example.com',
  client_id: 'svc',
  iat: IAT,
  exp: IAT + 300,
  jti: 'jti-1',
  ...extra,
});

const token = (payload: Record<string, unknown>, alg: keyof typeof pairs = 'ES256', kid = `k-${alg}`) =>
  jwsSigner(pairs[alg].privateKey, alg, kid)(payload);

/** A token with the header and payload given as they are (not a signer's), signed by the ES256 key. */
function rawToken(header: Record<string, unknown>, payload: Record<string, unknown>): string {
  const input =
    Buffer.from(JSON.stringify(header)).toString('base64url') +
    '.' +
    Buffer.from(JSON.stringify(payload)).toString('base64url');
  const signature = sign('sha256', Buffer.from(input), {
    key: pairs.ES256.privateKey,
    dsaEncoding: 'ieee-p1363',
  });
  return `${input}.${signature.toString('base64url')}`;
}

function deps(over: Partial<OwnTokenDeps> = {}): OwnTokenDeps {
  return {
    issuer: ISSUER,
    now: () => NOW,
    key: (kid) => {
      const alg = kid.slice(2) as SigningAlg;
      const pair = pairs[alg as keyof typeof pairs];
      return pair && kid.startsWith('k-') ? { alg, check: jwsVerifier(pair.publicKey, alg) } : undefined;
    },
    revoked: () => false,
    clientExists: () => true,
    cutOf: () => -Infinity,
    ...over,
  };
}

describe('verifyOwnToken', () => {
  it.each(['ES256', 'EdDSA', 'RS256'] as const)('an active %s token: its claims, as signed', (alg) => {
    const payload = claims({ scope: 'orders:read', tenant: 'acme' });
    expect(verifyOwnToken(token(payload, alg), deps())).toEqual({ active: true, claims: payload });
  });

  it('exp without leeway: active a millisecond before it, inactive from it', () => {
    const t = token(claims({ exp: Math.floor(NOW / 1000) + 1 }));
    const at = (ms: number) => verifyOwnToken(t, deps({ now: () => ms }));
    expect(at(Math.floor(NOW / 1000) * 1000 + 999).active).toBe(true);
    expect(at((Math.floor(NOW / 1000) + 1) * 1000)).toEqual({
      active: false,
      why: 'invalid',
      reason: 'expired',
    });
  });

  it('nbf, when there is one, without leeway', () => {
    const t = token(claims({ nbf: Math.floor(NOW / 1000) + 1 }));
    expect(verifyOwnToken(t, deps())).toEqual({ active: false, why: 'invalid', reason: 'not valid yet' });
    expect(verifyOwnToken(t, deps({ now: () => (Math.floor(NOW / 1000) + 1) * 1000 })).active).toBe(true);
  });

  it('not a token of this server: malformed, another key, a bad signature, another issuer, not an access token', () => {
    const good = token(claims());
    const [header, payload, signature] = good.split('.') as [string, string, string];
    const flipped = Buffer.from(signature, 'base64url');
    flipped[0]! ^= 1;
    const cases: [string, string][] = [
      ['', 'not a compact JWS'],
      ['a.b', 'not a compact JWS'],
      [`${good}.x`, 'not a compact JWS'],
      [`${header}.${payload}.`, 'not a compact JWS'],
      // Padding, and characters outside base64url: not ours, whatever a lenient decoder would make of them.
      [`${good}=`, 'not a compact JWS'],
      [`${header}.${payload}.${signature.slice(0, -1)}+`, 'not a compact JWS'],
      [`e30.${payload}.${signature}`, 'not an access token'],
      [`${header}.${payload}.${flipped.toString('base64url')}`, 'bad signature'],
      [token(claims(), 'ES256', 'k-unknown'), 'not signed by a key of this server'],
      // A key's kid with another algorithm than the key's.
      [token(claims(), 'EdDSA', 'k-ES256'), 'not signed by a key of this server'],
      [token(claims({ iss: 'https://other.example.com' })), 'issued by another issuer'],
      ['x'.repeat(20_000), 'not a token of this server'],
    ];
    for (const [presented, reason] of cases)
      expect(verifyOwnToken(presented, deps()), presented.slice(0, 40)).toEqual({
        active: false,
        why: 'invalid',
        reason,
      });
  });

  it('typ must be at+jwt, and no critical extension', () => {
    const payload = claims();
    for (const header of [
      { alg: 'ES256', kid: 'k-ES256' },
      { alg: 'ES256', kid: 'k-ES256', typ: 'JWT' },
      { alg: 'ES256', kid: 'k-ES256', typ: 'at+jwt', crit: ['exp'] },
    ])
      expect(verifyOwnToken(rawToken(header, payload), deps())).toEqual({
        active: false,
        why: 'invalid',
        reason: 'not an access token',
      });
    expect(
      verifyOwnToken(rawToken({ alg: 'ES256', kid: 'k-ES256', typ: 'at+jwt' }, payload), deps()).active,
    ).toBe(true);
  });

  it('a claim missing or of the wrong type: inactive', () => {
    for (const [name, value] of [
      ['exp', undefined],
      ['exp', '9999999999'],
      ['iat', undefined],
      ['jti', undefined],
      ['jti', ''],
      ['client_id', undefined],
      ['client_id', 5],
      ['sub', undefined],
      ['aud', undefined],
      ['aud', []],
      ['aud', ['https://a.example.com', 5]],
      ['nbf', 'soon'],
    ] as const)
      expect(verifyOwnToken(token(claims({ [name]: value })), deps()), `${name}=${String(value)}`).toEqual({
        active: false,
        why: 'invalid',
        reason: 'a claim is missing or malformed',
      });
    expect(
      verifyOwnToken(token(claims({ aud: ['https://a.example.com', 'https://b.example.com'] })), deps())
        .active,
    ).toBe(true);
  });

  it('revoked: on the denylist, or issued at or before its client’s cut (to the second)', () => {
    const t = token(claims());
    expect(verifyOwnToken(t, deps({ revoked: (jti) => jti === 'jti-1' }))).toEqual({
      active: false,
      why: 'revoked',
      reason: 'revoked',
    });
    expect(verifyOwnToken(t, deps({ cutOf: () => IAT }))).toEqual({
      active: false,
      why: 'revoked',
      reason: "its client's tokens were revoked",
    });
    expect(verifyOwnToken(t, deps({ cutOf: () => IAT - 1 })).active).toBe(true);
  });

  it('its client deleted, or disabled: inactive', () => {
    const t = token(claims());
    expect(verifyOwnToken(t, deps({ clientExists: (id) => id !== 'svc' }))).toEqual({
      active: false,
      why: 'client',
      reason: 'its client is deleted',
    });
    expect(verifyOwnToken(t, deps({ cutOf: () => Infinity }))).toEqual({
      active: false,
      why: 'client',
      reason: 'its client is disabled or deleted',
    });
  });

  describe('an exchanged token (sub another client than client_id): its original caller counts too', () => {
    // RFC 8693: `sub` is the original caller, `client_id` the acting client. Never active for a caller that is
    // disabled, deleted, or whose tokens were revoked after the token was issued (Keycloak's CVE-2025-14559).
    const exchanged = token(claims({ sub: 'caller', client_id: 'svc', act: { sub: 'svc' } }));

    it('active while both clients are in good standing; the act claim as signed', () => {
      expect(verifyOwnToken(exchanged, deps())).toEqual({
        active: true,
        claims: claims({ sub: 'caller', client_id: 'svc', act: { sub: 'svc' } }),
      });
    });

    it('its original caller deleted, or disabled: inactive', () => {
      expect(verifyOwnToken(exchanged, deps({ clientExists: (id) => id !== 'caller' }))).toEqual({
        active: false,
        why: 'client',
        reason: 'its subject client is deleted',
      });
      expect(
        verifyOwnToken(exchanged, deps({ cutOf: (id) => (id === 'caller' ? Infinity : -Infinity) })),
      ).toEqual({ active: false, why: 'client', reason: 'its subject client is disabled or deleted' });
    });

    it("its original caller's tokens revoked at or after its iat: inactive; before it: active", () => {
      const cut = (at: number) => (id: string) => (id === 'caller' ? at : -Infinity);
      expect(verifyOwnToken(exchanged, deps({ cutOf: cut(IAT) }))).toEqual({
        active: false,
        why: 'revoked',
        reason: "its subject client's tokens were revoked",
      });
      expect(verifyOwnToken(exchanged, deps({ cutOf: cut(IAT - 1) })).active).toBe(true);
    });

    it('its acting client is checked first, as for any token', () => {
      expect(verifyOwnToken(exchanged, deps({ cutOf: () => Infinity }))).toEqual({
        active: false,
        why: 'client',
        reason: 'its client is disabled or deleted',
      });
    });

    it('a client credentials token (sub = client_id) does not ask about a second client', () => {
      const asked: string[] = [];
      const verdict = verifyOwnToken(
        token(claims()),
        deps({
          clientExists: (id) => (asked.push(id), true),
          cutOf: (id) => (asked.push(id), -Infinity),
        }),
      );
      expect(verdict.active).toBe(true);
      expect(asked).toEqual(['svc', 'svc']);
    });
  });

  it('asks nothing of the store: a view that cannot tell is an error, not a verdict', () => {
    const stale = new Error('stale');
    expect(() =>
      verifyOwnToken(
        token(claims()),
        deps({
          clientExists: () => {
            throw stale;
          },
        }),
      ),
    ).toThrow(stale);
  });
});
