/**
 * DPoP proofs at the token endpoint (INTERFACE.md, "DPoP"; RFC 9449 §4.3), the verifier alone and as a step of
 * the token service, on a clock that stands still: every check's exact refusal, the order of the checks (the
 * cheap ones first, the replay write last, only for a proof that holds), nonces derived from a time window,
 * and what a refusal costs the caller (a failed attempt, but not a request for a nonce).
 */
import { holder, signProof, type Holder } from '../helpers/dpop.js';
import { exportJWK, type JWTPayload } from 'jose';
import { generateKeyPairSync, sign as nodeSign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DpopNonces, DpopVerifier } from '../../src/domain/dpop.js';
import { OAuthError, temporarilyUnavailable } from '../../src/domain/errors.js';
import { digestBytes, digestSecret } from '../../src/domain/secrets.js';
import { TokenService } from '../../src/domain/token-service.js';
import type { KnownClient } from '../../src/domain/known-client.js';
import type { TokenRequest } from '../../src/domain/token-request.js';
import { rejection } from '../helpers/assert.js';
import { DPOP_SIGNING_ALGS } from '../helpers/expected.js';

const NOW = Date.parse('2030-01-02T03:04:05.678Z');
const NOW_S = Math.floor(NOW / 1000);
const ENDPOINT = 'https://auth.example.com/oauth/token';
const API = 'https://api.example.com';
const SECRET = 'the-right-secret-with-plenty-of-entropy';
const NONCE_KEY = new Uint8Array(32).fill(7);

/** A replay guard in memory that records what it was asked. */
class MemoryReplay {
  readonly used = new Map<string, number>();
  calls: [string, string, number][] = [];
  failing = false;
  async use(scope: string, jti: string, until: number): Promise<boolean> {
    this.calls.push([scope, jti, until]);
    // As the store's guard does when it cannot record the id (limits/replay.ts).
    if (this.failing) throw temporarilyUnavailable(7);
    const key = `${scope}\0${jti}`;
    if (this.used.has(key)) return false;
    this.used.set(key, until);
    return true;
  }
}

let jtis = 0;
/** A proof as oauth4webapi makes one, then `claims` and `header` over it (undefined removes a member). */
async function proof(
  h: Holder,
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  return signProof(h, { htm: 'POST', htu: ENDPOINT, iat: NOW_S, jti: `jti-${++jtis}`, ...claims }, header);
}

function verifier(options: { nonces?: boolean; replay?: MemoryReplay } = {}) {
  const replay = options.replay ?? new MemoryReplay();
  const nonces = options.nonces ? new DpopNonces(NONCE_KEY) : undefined;
  return {
    replay,
    nonces,
    dpop: new DpopVerifier({ tokenEndpoint: ENDPOINT, replay, nonces }),
  };
}

/** The refusal's answer and its audit reason. */
async function refusal(
  promise: Promise<unknown>,
): Promise<{ status: number; body: object; headers: object; reason: string | undefined }> {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(OAuthError);
  const e = error as OAuthError;
  return { status: e.status, body: e.toJSON(), headers: e.headers, reason: e.debug };
}

const invalid = (description: string) => ({
  status: 400,
  body: { error: 'invalid_dpop_proof', error_description: description },
  headers: {},
  reason: `dpop: ${description}`,
});

describe('DpopVerifier', () => {
  it.each(DPOP_SIGNING_ALGS)(
    'accepts a proof signed with %s: the RFC 7638 thumbprint of its key',
    async (alg) => {
      const h = await holder(alg);
      const { dpop, replay } = verifier();
      const p = await proof(h, { jti: 'one' });
      expect(await dpop.verify(p, NOW)).toBe(h.jkt);
      // Recorded once, after everything else held, namespaced by the key and kept 120 s past its iat.
      expect(replay.calls).toEqual([[`dpop:${h.jkt}`, 'one', (NOW_S + 120) * 1000]]);
    },
  );

  it('takes htu with a query and a fragment, and in another spelling of the same URL', async () => {
    const h = await holder();
    const { dpop } = verifier();
    for (const htu of [
      `${ENDPOINT}?x=1`,
      `${ENDPOINT}#f`,
      'HTTPS://Auth.Example.COM:443/oauth/token',
      'https://auth.example.com/oauth/token?',
    ])
      expect(await dpop.verify(await proof(h, { htu }), NOW)).toBe(h.jkt);
  });

  it('accepts an iat 60 s either side of now, not 61', async () => {
    const h = await holder();
    const { dpop } = verifier();
    const late = NOW / 1000 - 60;
    const early = NOW / 1000 + 60;
    expect(await dpop.verify(await proof(h, { iat: late }), NOW)).toBe(h.jkt);
    expect(await dpop.verify(await proof(h, { iat: early }), NOW)).toBe(h.jkt);
    const why = 'DPoP proof iat is not within 60 seconds of now';
    expect(await refusal(dpop.verify(await proof(h, { iat: late - 1 }), NOW))).toEqual(invalid(why));
    expect(await refusal(dpop.verify(await proof(h, { iat: early + 1 }), NOW))).toEqual(invalid(why));
  });

  it('refuses, each with its description and its audit reason', async () => {
    const h = await holder();
    const rsa = await holder('RS256');
    const { dpop, replay } = verifier();
    // The private key itself, d and all.
    const ecPrivate = await exportJWK(h.privateKey);
    const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    /** A proof with this header and a signature of nothing: refused before any signature is checked. */
    const unsigned = (header: object) =>
      `${enc(header)}.${enc({ htm: 'POST', htu: ENDPOINT, iat: NOW_S, jti: 'u' })}.AAAA`;
    const cases: [string, Promise<string> | string][] = [
      ['DPoP proof is not a JWT', 'not-a-jwt'],
      ['DPoP proof is not a JWT', 'a.b.c'],
      ['send one DPoP header with one proof', proof(h).then((p) => `${p}, ${p}`)],
      ['DPoP proof is longer than 8192 characters', 'x'.repeat(8193)],
      ['DPoP proof typ must be dpop+jwt', proof(h, {}, { typ: 'JWT' })],
      ['DPoP proof typ must be dpop+jwt', proof(h, {}, { typ: undefined })],
      [
        'DPoP proof alg must be one of ES256, ES384, RS256, PS256, EdDSA, Ed25519',
        unsigned({ alg: 'RS512', typ: 'dpop+jwt', jwk: rsa.jwk }),
      ],
      ['DPoP proof header has no jwk', proof(h, {}, { jwk: undefined })],
      ['DPoP proof jwk must be a public key', proof(h, {}, { jwk: ecPrivate })],
      ['DPoP proof htm must be POST', proof(h, { htm: 'GET' })],
      ['DPoP proof htm must be POST', proof(h, { htm: 'post' })],
      ['DPoP proof htm must be POST', proof(h, { htm: undefined })],
      [
        'DPoP proof htu is not the token endpoint URL',
        proof(h, { htu: 'https://auth.example.com/oauth/revoke' }),
      ],
      [
        'DPoP proof htu is not the token endpoint URL',
        proof(h, { htu: 'https://evil.example.com/oauth/token' }),
      ],
      ['DPoP proof htu is not the token endpoint URL', proof(h, { htu: `${ENDPOINT}/` })],
      ['DPoP proof htu is not the token endpoint URL', proof(h, { htu: 'not a url' })],
      ['DPoP proof htu is not the token endpoint URL', proof(h, { htu: undefined })],
      ['DPoP proof has no iat', proof(h, { iat: undefined })],
      ['DPoP proof has no iat', proof(h, { iat: String(NOW_S) })],
      ['DPoP proof jti must be a string of 1 to 512 characters', proof(h, { jti: undefined })],
      ['DPoP proof jti must be a string of 1 to 512 characters', proof(h, { jti: '' })],
      ['DPoP proof jti must be a string of 1 to 512 characters', proof(h, { jti: 'j'.repeat(513) })],
      ['DPoP proof jti must be a string of 1 to 512 characters', proof(h, { jti: 7 })],
      // Signed by another key than the one in the header.
      ['DPoP proof signature does not verify', proof(h, {}, { jwk: (await holder()).jwk })],
      // A key that does not fit the alg.
      ['DPoP proof jwk is not a public key usable with its alg', proof(h, {}, { jwk: rsa.jwk })],
    ];
    for (const [why, p] of cases) expect(await refusal(dpop.verify(await p, NOW)), why).toEqual(invalid(why));
    // None of them was recorded: a refused proof costs no write.
    expect(replay.calls).toEqual([]);
  });

  it('a key seen before is kept by its header, but every signature is still checked', async () => {
    const [h, other] = [await holder(), await holder()];
    const { dpop } = verifier();
    expect(await dpop.verify(await proof(h), NOW)).toBe(h.jkt);
    // The same header (h's key) over a proof signed by another key: refused.
    const forged = await proof({ ...other, jwk: h.jwk });
    expect(await refusal(dpop.verify(forged, NOW))).toEqual(invalid('DPoP proof signature does not verify'));
    // And the kept key still checks the claims of each proof.
    expect(await refusal(dpop.verify(await proof(h, { htm: 'GET' }), NOW))).toEqual(
      invalid('DPoP proof htm must be POST'),
    );
    expect(await dpop.verify(await proof(h), NOW)).toBe(h.jkt);
  });

  it('refuses an RSA key under 2048 bits, a crit header, and a signature made for another alg', async () => {
    const { dpop } = verifier();
    const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const body = enc({ htm: 'POST', htu: ENDPOINT, iat: NOW_S, jti: 'small' });
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 });
    const jwk = small.publicKey.export({ format: 'jwk' });
    const input = `${enc({ alg: 'RS256', typ: 'dpop+jwt', jwk })}.${body}`;
    const signature = nodeSign('sha256', Buffer.from(input), small.privateKey).toString('base64url');
    expect(await refusal(dpop.verify(`${input}.${signature}`, NOW))).toEqual(
      invalid('DPoP proof jwk: an RSA key must have 2048 to 8192 bits (this one has 1024)'),
    );
    // A public exponent past 2^31 - 1: each check would be an exponentiation that long (13 ms at 3072 bits).
    const large = generateKeyPairSync('rsa', { modulusLength: 2048, publicExponent: 2 ** 31 + 1 });
    const largeInput = `${enc({ alg: 'RS256', typ: 'dpop+jwt', jwk: large.publicKey.export({ format: 'jwk' }) })}.${body}`;
    const largeSignature = nodeSign('sha256', Buffer.from(largeInput), large.privateKey).toString(
      'base64url',
    );
    expect(await refusal(dpop.verify(`${largeInput}.${largeSignature}`, NOW))).toEqual(
      invalid("DPoP proof jwk: an RSA key's public exponent must be at most 2^31 - 1"),
    );
    const h = await holder();
    expect(await refusal(dpop.verify(await proof(h, {}, { crit: ['b64'], b64: true }), NOW))).toEqual(
      invalid('DPoP proof header must not have crit'),
    );
    // An RSA key said to sign PS256 over an RS256 signature.
    const rsa = await holder('RS256');
    const rs = (await proof(rsa)).split('.');
    const ps = `${enc({ alg: 'PS256', typ: 'dpop+jwt', jwk: rsa.jwk })}.${rs[1]}.${rs[2]}`;
    expect(await refusal(dpop.verify(ps, NOW))).toEqual(invalid('DPoP proof signature does not verify'));
  });

  it('refuses a proof whose header or claims are not UTF-8, before its signature', async () => {
    const h = await holder();
    const { dpop } = verifier();
    const enc = (o: object | Buffer) =>
      (Buffer.isBuffer(o) ? o : Buffer.from(JSON.stringify(o))).toString('base64url');
    // JSON with a 0xff byte in a string where MARK was: JSON still once its bytes are read leniently.
    const notUtf8 = (o: object) => Buffer.from(JSON.stringify(o).replace('MARK', '\xff'), 'latin1');
    const header = { alg: 'ES256', typ: 'dpop+jwt', jwk: h.jwk };
    const claims = { htm: 'POST', htu: ENDPOINT, iat: NOW_S, jti: 'MARK' };
    const signature = enc(Buffer.alloc(64));
    expect(await refusal(dpop.verify(`${enc(header)}.${enc(notUtf8(claims))}.${signature}`, NOW))).toEqual(
      invalid('DPoP proof is not a JWT'),
    );
    const headerNotUtf8 = notUtf8({ ...header, kid: 'MARK' });
    expect(
      await refusal(dpop.verify(`${enc(headerNotUtf8)}.${enc({ ...claims, jti: 'u' })}.${signature}`, NOW)),
    ).toEqual(invalid('DPoP proof is not a JWT'));
  });

  it('refuses none and HMAC, whatever the header says', async () => {
    const h = await holder();
    const { dpop } = verifier();
    const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const body = enc({ htm: 'POST', htu: ENDPOINT, iat: NOW_S, jti: 'n' });
    for (const alg of ['none', 'HS256'])
      expect(
        await refusal(dpop.verify(`${enc({ alg, typ: 'dpop+jwt', jwk: h.jwk })}.${body}.`, NOW)),
      ).toEqual(invalid('DPoP proof alg must be one of ES256, ES384, RS256, PS256, EdDSA, Ed25519'));
  });

  it('a jti is good once per key: the second use is refused, another key may use the same jti', async () => {
    const [a, b] = [await holder(), await holder()];
    const { dpop } = verifier();
    const first = await proof(a, { jti: 'same' });
    expect(await dpop.verify(first, NOW)).toBe(a.jkt);
    expect(await refusal(dpop.verify(first, NOW))).toEqual(invalid('DPoP proof jti was already used'));
    expect(await refusal(dpop.verify(await proof(a, { jti: 'same' }), NOW))).toEqual(
      invalid('DPoP proof jti was already used'),
    );
    expect(await dpop.verify(await proof(b, { jti: 'same' }), NOW)).toBe(b.jkt);
  });

  it('a replay guard that cannot answer: its 503 passes through, not a token and not a refused proof', async () => {
    const replay = new MemoryReplay();
    replay.failing = true;
    const { dpop } = verifier({ replay });
    expect(await refusal(dpop.verify(await proof(await holder()), NOW))).toEqual({
      status: 503,
      body: {
        error: 'temporarily_unavailable',
        error_description: 'the service cannot answer right now; try again later',
      },
      headers: { 'retry-after': '7' },
      reason: undefined,
    });
  });

  describe('with nonces', () => {
    it('no nonce, or one that is not current: use_dpop_nonce with the nonce to use, and nothing recorded', async () => {
      const h = await holder();
      const { dpop, nonces, replay } = verifier({ nonces: true });
      const nonce = dpop.nonce(NOW)!;
      expect(nonce).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(nonces!.now(NOW)).toBe(nonce);
      const asked = (why: string) => ({
        status: 400,
        body: {
          error: 'use_dpop_nonce',
          error_description: 'the authorization server requires a nonce in the DPoP proof',
        },
        headers: { 'dpop-nonce': nonce },
        reason: `dpop: ${why}`,
      });
      expect(await refusal(dpop.verify(await proof(h), NOW))).toEqual(asked('proof without a nonce'));
      expect(await refusal(dpop.verify(await proof(h, { nonce: 'made-up' }), NOW))).toEqual(
        asked('proof with a nonce that is not current'),
      );
      expect(await refusal(dpop.verify(await proof(h, { nonce: 7 }), NOW))).toEqual(
        asked('proof with a nonce that is not current'),
      );
      expect(replay.calls).toEqual([]);
      expect(await dpop.verify(await proof(h, { nonce }), NOW)).toBe(h.jkt);
    });

    it('the cheap checks come first: a bad htu without a nonce is invalid_dpop_proof, a bad signature without one use_dpop_nonce', async () => {
      const h = await holder();
      const { dpop } = verifier({ nonces: true });
      expect(await refusal(dpop.verify(await proof(h, { htu: 'https://x.example/' }), NOW))).toMatchObject({
        body: { error: 'invalid_dpop_proof' },
      });
      expect(
        await refusal(dpop.verify(await proof(h, {}, { jwk: (await holder()).jwk }), NOW)),
      ).toMatchObject({
        body: { error: 'use_dpop_nonce' },
      });
    });

    it('a nonce is good in its 2-minute window and the next, on any instance with the same key; not after', async () => {
      const h = await holder();
      const windowStart = Math.floor(NOW / 120_000) * 120_000;
      const a = verifier({ nonces: true }).dpop;
      const b = verifier({ nonces: true }).dpop;
      const nonce = a.nonce(windowStart)!;
      // The same nonce on another instance (derived from the shared key, not stored).
      expect(b.nonce(windowStart + 119_999)).toBe(nonce);
      // The next window's nonce is another; the first is still accepted there (at least 2 minutes in all).
      const later = windowStart + 239_999;
      expect(b.nonce(later)).not.toBe(nonce);
      expect(await b.verify(await proof(h, { nonce, iat: later / 1000 }), later)).toBe(h.jkt);
      // Two windows on: refused, and asked to use the current one.
      const tooLate = windowStart + 240_000;
      expect(await refusal(b.verify(await proof(h, { nonce, iat: tooLate / 1000 }), tooLate))).toMatchObject({
        body: { error: 'use_dpop_nonce' },
        headers: { 'dpop-nonce': b.nonce(tooLate) },
      });
      // Another key gives other nonces.
      const other = new DpopVerifier({
        tokenEndpoint: ENDPOINT,
        replay: new MemoryReplay(),
        nonces: new DpopNonces(new Uint8Array(32).fill(8)),
      });
      expect(other.nonce(windowStart)).not.toBe(nonce);
    });

    it('without nonces, none is asked for and one sent is ignored', async () => {
      const h = await holder();
      const { dpop } = verifier();
      expect(dpop.nonce(NOW)).toBeUndefined();
      expect(await dpop.verify(await proof(h, { nonce: 'anything' }), NOW)).toBe(h.jkt);
    });
  });
});

describe('the token service with DPoP', () => {
  const client = (id: string, extra: Partial<KnownClient> = {}): KnownClient => ({
    id,
    enabled: true,
    secrets: [{ id: `sec_${id}`, digest: digestBytes(digestSecret(SECRET)), expiresAt: Infinity }],
    grants: new Map([[API, { scopes: new Set(['a:read']), scope: 'a:read', tokenExchange: false }]]),
    tokenTtl: null,
    quota: { perMinute: null, perDay: null },
    ...extra,
  });
  const clients = new Map([
    ['svc', client('svc')],
    ['bound', client('bound', { dpopBound: true })],
  ]);

  function setup(options: { nonces?: boolean; withVerifier?: boolean } = {}) {
    const failed: (string | undefined)[] = [];
    const signed: JWTPayload[] = [];
    const audit: { type: string; reason: string | null }[] = [];
    const quota: string[] = [];
    const { dpop, replay } = verifier({ nonces: options.nonces });
    const service = new TokenService({
      findClient: (id) => clients.get(id),
      peekClient: (id) => clients.get(id),
      findAudience: (url) =>
        url === API
          ? { url, tokenTtl: null, signingAlg: null, resourceServers: new Set<string>() }
          : undefined,
      sign: (payload) => {
        signed.push(payload);
        return 'signed.token.here';
      },
      now: () => NOW,
      newJti: () => 'token-jti',
      attempts: {
        blockedFor: () => 0,
        failed: async (id) => {
          failed.push(id);
        },
      },
      quotas: {
        take: async (id) => {
          quota.push(id);
          return 0;
        },
      },
      audit: (e) => audit.push({ type: e.type, reason: e.reason }),
      issuer: 'https://auth.example.com',
      defaultTtl: 1800,
      defaultAlg: 'ES256',
      ...(options.withVerifier === false ? {} : { dpop }),
    });
    return { service, failed, signed, audit, replay, quota, dpop };
  }

  const request = (id: string, dpop?: string): TokenRequest => ({
    params: { grant_type: 'client_credentials', client_id: id, client_secret: SECRET, audience: API },
    source: '192.0.2.1',
    ...(dpop === undefined ? {} : { dpop }),
  });

  it('a proof binds the token to its key (cnf.jkt after the registered claims) and the answer says DPoP', async () => {
    const h = await holder();
    const { service, signed } = setup();
    const issued = await service.issue(request('svc', await proof(h)));
    expect(issued.response).toEqual({
      access_token: 'signed.token.here',
      token_type: 'DPoP',
      expires_in: 1800,
      scope: 'a:read',
    });
    expect(signed[0]).toEqual({
      iss: 'https://auth.example.com',
      sub: 'svc',
      aud: API,
      client_id: 'svc',
      iat: NOW_S,
      exp: NOW_S + 1800,
      jti: 'token-jti',
      scope: 'a:read',
      cnf: { jkt: h.jkt },
    });
  });

  it('no proof from a client that is not bound: a Bearer token without cnf, and the verifier is not asked', async () => {
    const { service, signed, replay } = setup();
    const issued = await service.issue(request('svc'));
    expect(issued.response.token_type).toBe('Bearer');
    expect(signed[0]).not.toHaveProperty('cnf');
    expect(replay.calls).toEqual([]);
  });

  it('a bound client without a proof: invalid_dpop_proof saying one is required, a failed attempt, audited', async () => {
    const { service, failed, audit, quota } = setup();
    const description = 'a DPoP proof is required for this client (dpop_bound_access_tokens)';
    expect(await refusal(service.issue(request('bound')))).toEqual(invalid(description));
    expect(failed).toEqual(['bound']);
    expect(audit).toEqual([{ type: 'token.refused', reason: `invalid_dpop_proof: dpop: ${description}` }]);
    // A refused proof takes nothing of the client's quota.
    expect(quota).toEqual([]);
  });

  it('a bound client with a proof gets its DPoP token', async () => {
    const { service } = setup();
    const issued = await service.issue(request('bound', await proof(await holder())));
    expect(issued.response.token_type).toBe('DPoP');
  });

  it('a bad proof is a failed attempt and audited with its reason; the credentials are checked first', async () => {
    const h = await holder();
    const { service, failed, audit } = setup();
    expect(await refusal(service.issue(request('svc', await proof(h, { htm: 'GET' }))))).toEqual(
      invalid('DPoP proof htm must be POST'),
    );
    expect(failed).toEqual(['svc']);
    expect(audit).toEqual([
      { type: 'token.refused', reason: 'invalid_dpop_proof: dpop: DPoP proof htm must be POST' },
    ]);
    // A wrong secret with a bad proof: invalid_client, nothing said about the proof.
    const wrong = { ...request('svc', 'junk'), params: { ...request('svc').params, client_secret: 'wrong' } };
    expect((await refusal(service.issue(wrong))).body).toMatchObject({ error: 'invalid_client' });
  });

  it('use_dpop_nonce is not a failed attempt; the retry with the nonce gets the token', async () => {
    const h = await holder();
    const { service, failed, audit, dpop } = setup({ nonces: true });
    expect(service.dpopNonce()).toBe(dpop.nonce(NOW));
    expect((await refusal(service.issue(request('svc', await proof(h))))).body).toEqual({
      error: 'use_dpop_nonce',
      error_description: 'the authorization server requires a nonce in the DPoP proof',
    });
    expect(failed).toEqual([]);
    expect(audit).toEqual([{ type: 'token.refused', reason: 'use_dpop_nonce: dpop: proof without a nonce' }]);
    const issued = await service.issue(request('svc', await proof(h, { nonce: service.dpopNonce() })));
    expect(issued.response.token_type).toBe('DPoP');
  });

  it('without nonces the service has none to give', () => {
    expect(setup().service.dpopNonce()).toBeUndefined();
  });

  it('a service without a verifier refuses a proof rather than issue an unbound token', async () => {
    const { service } = setup({ withVerifier: false });
    expect(await refusal(service.issue(request('svc', await proof(await holder()))))).toEqual(
      invalid('DPoP proofs are not accepted here'),
    );
  });
});
