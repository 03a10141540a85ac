import { generateKeyPairSync, sign, constants, type KeyObject } from 'node:crypto';
import {
  createLocalJWKSet,
  errors,
  importJWK,
  jwtVerify,
  type JWK,
  type JWTPayload,
  type JWTVerifyGetKey,
} from 'jose';
import { describe, expect, it } from 'vitest';
import { checkJwksKeys, rsaJwkProblem } from '../../src/domain/client-auth/jwks.js';
import { verifyJwt, type JwtChecks } from '../../src/domain/client-auth/verify-jwt.js';
import { ValidationError } from '../../src/domain/validate.js';
import { ASSERTION_ALGS } from '../../src/domain/jose.js';

/*
 * verifyJwt against jose's jwtVerify, which it replaced on the token path: for every token below, the same
 * answer — the same claims, or the same error class naming the same claim. The reference is the verification as
 * it was (jose, trying each key of a set when the token has no kid).
 */

type KeyLike = Parameters<typeof jwtVerify>[1] & object;

async function reference(jwt: string, getKey: JWTVerifyGetKey, options: JwtChecks): Promise<JWTPayload> {
  const joseOptions = {
    algorithms: [...options.algorithms],
    ...(options.issuer !== undefined && { issuer: options.issuer }),
    ...(options.subject !== undefined && { subject: options.subject }),
    ...(options.audience !== undefined && { audience: [...options.audience] }),
    clockTolerance: options.clockTolerance,
    currentDate: new Date(options.now),
    ...(options.requiredClaims !== undefined && { requiredClaims: [...options.requiredClaims] }),
  };
  try {
    return (await jwtVerify(jwt, getKey, joseOptions)).payload;
  } catch (error) {
    if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error;
    let last: unknown = error;
    for await (const key of error as unknown as AsyncIterable<KeyLike>) {
      try {
        return (await jwtVerify(jwt, key, joseOptions)).payload;
      } catch (failed) {
        last = failed;
        if (!(failed instanceof errors.JWSSignatureVerificationFailed)) throw failed;
      }
    }
    throw last;
  }
}

/** What a verification came to: the claims, or the error's class and the claim it names. */
async function outcome(run: () => Promise<JWTPayload>): Promise<unknown> {
  try {
    return { claims: await run() };
  } catch (error) {
    const { name, claim } = error as { name: string; claim?: string };
    return { error: name, ...(claim !== undefined && { claim }) };
  }
}

const b64 = (data: string | Buffer) => Buffer.from(data).toString('base64url');
const ECDSA = { dsaEncoding: 'ieee-p1363' } as const;

interface Signer {
  alg: string;
  jwk: JWK;
  sign(input: Buffer): Buffer;
}

function signer(
  alg: string,
  kid: string | undefined,
  pair: { publicKey: KeyObject; privateKey: KeyObject },
): Signer {
  const jwk: JWK = { ...pair.publicKey.export({ format: 'jwk' }), ...(kid !== undefined && { kid }) };
  const signWith = (input: Buffer): Buffer => {
    switch (alg) {
      case 'ES256':
        return sign('sha256', input, { key: pair.privateKey, ...ECDSA });
      case 'ES384':
        return sign('sha384', input, { key: pair.privateKey, ...ECDSA });
      case 'RS256':
        return sign('sha256', input, pair.privateKey);
      case 'PS256':
        return sign('sha256', input, {
          key: pair.privateKey,
          padding: constants.RSA_PKCS1_PSS_PADDING,
          saltLength: 32,
        });
      default:
        return sign(null, input, pair.privateKey);
    }
  };
  return { alg, jwk, sign: signWith };
}

const es256 = signer('ES256', 'es', generateKeyPairSync('ec', { namedCurve: 'P-256' }));
const es256b = signer('ES256', 'es-b', generateKeyPairSync('ec', { namedCurve: 'P-256' }));
const es384 = signer('ES384', 'es384', generateKeyPairSync('ec', { namedCurve: 'P-384' }));
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const rs256 = signer('RS256', 'rs', rsa);
const ps256 = signer('PS256', 'ps', rsa);
const ed = signer('EdDSA', 'ed', generateKeyPairSync('ed25519'));
const ed25519 = signer('Ed25519', 'ed', generateKeyPairSync('ed25519'));
const rs1024 = signer('RS256', 'small', generateKeyPairSync('rsa', { modulusLength: 1024 }));

const NOW = 1_800_000_000_000;
const nowS = NOW / 1000;
const ISS = 'client-1';
const AUD = ['https://tessera.example', 'https://tessera.example/oauth/token'];
const CHECKS: JwtChecks = {
  algorithms: ASSERTION_ALGS,
  issuer: ISS,
  subject: ISS,
  audience: AUD,
  clockTolerance: 60,
  now: NOW,
  requiredClaims: ['exp', 'jti'],
};
const CLAIMS = { iss: ISS, sub: ISS, aud: AUD[1], exp: nowS + 300, iat: nowS, jti: 'j-1' };

/** A compact JWS of these header and payload (objects as JSON, text and bytes as they are), signed by `by`. */
function jws(
  by: Signer,
  header: Record<string, unknown> | string | Buffer = {},
  payload: Record<string, unknown> | string | Buffer = CLAIMS,
): string {
  const part = (value: Record<string, unknown> | string | Buffer) =>
    b64(typeof value === 'string' || Buffer.isBuffer(value) ? value : JSON.stringify(value));
  const protectedHeader =
    typeof header === 'string' || Buffer.isBuffer(header)
      ? header
      : { alg: by.alg, ...(by.jwk.kid !== undefined && { kid: by.jwk.kid }), ...header };
  const input = `${part(protectedHeader)}.${part(payload)}`;
  return `${input}.${b64(by.sign(Buffer.from(input)))}`;
}

const setOf = (...signers: Signer[]) => createLocalJWKSet({ keys: signers.map((s) => s.jwk) });
const withoutKid = (s: Signer): Signer => {
  const { kid: _kid, ...jwk } = s.jwk;
  return { ...s, jwk };
};

async function same(jwt: string, keys: JWTVerifyGetKey, options: JwtChecks = CHECKS): Promise<unknown> {
  const expected = await outcome(() => reference(jwt, keys, options));
  const actual = await outcome(() => verifyJwt(jwt, keys, options));
  expect(actual).toEqual(expected);
  return actual;
}

describe('verifyJwt, against jose', () => {
  const keys = setOf(es256, es384, rs256, ps256, ed, ed25519);

  it('accepts a token of every algorithm, and returns its claims', async () => {
    for (const by of [es256, es384, rs256, ps256, ed, ed25519])
      expect(await same(jws(by), keys)).toEqual({ claims: CLAIMS });
  });

  it('refuses what the signature does not cover, and a signature of another key', async () => {
    const good = jws(es256);
    const [h, p, s] = good.split('.');
    const other = jws(es256b, { kid: 'es' });
    expect(await same(other, keys)).toEqual({ error: 'JWSSignatureVerificationFailed' });
    expect(await same(`${h}.${b64(JSON.stringify({ ...CLAIMS, sub: 'x' }))}.${s}`, keys)).toEqual({
      error: 'JWSSignatureVerificationFailed',
    });
    expect(await same(`${h}.${p}.${b64(Buffer.alloc(64))}`, keys)).toEqual({
      error: 'JWSSignatureVerificationFailed',
    });
    // An ES256 signature of the wrong length.
    expect(await same(`${h}.${p}.${b64(Buffer.alloc(10))}`, keys)).toEqual({
      error: 'JWSSignatureVerificationFailed',
    });
  });

  it('refuses an algorithm outside the list, none and HMAC among them, before any key is sought', async () => {
    const [, p] = jws(es256).split('.');
    for (const alg of ['none', 'HS256', 'RS512', 'ES512'])
      expect(await same(`${b64(JSON.stringify({ alg, kid: 'es' }))}.${p}.${b64('x')}`, keys)).toEqual({
        error: 'JOSEAlgNotAllowed',
      });
    expect(await same(jws(rs256), keys, { ...CHECKS, algorithms: ['ES256'] })).toEqual({
      error: 'JOSEAlgNotAllowed',
    });
    for (const header of [{ alg: '' }, { alg: 7 }, { kid: 'es' }])
      expect(await same(`${b64(JSON.stringify(header))}.${p}.${b64('x')}`, keys)).toEqual({
        error: 'JWSInvalid',
      });
  });

  it('refuses a header or payload that is not a JSON object, and one that is not UTF-8', async () => {
    for (const header of ['nope', '[1]', '"x"', 'null', Buffer.from([0x7b, 0xff, 0x7d])])
      expect(await same(jws(es256, header), keys)).toEqual({ error: 'JWSInvalid' });
    const invalidUtf8 = Buffer.concat([
      Buffer.from('{"iss":"'),
      Buffer.from([0xc3, 0x28]),
      Buffer.from('"}'),
    ]);
    for (const payload of ['nope', '[1]', '12', invalidUtf8])
      expect(await same(jws(es256, {}, payload), keys)).toEqual({ error: 'JWTInvalid' });
  });

  it('reads crit as jose does: b64 alone is understood, and a JWT must be encoded', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ crit: ['exp'], exp: 1 }, 'JOSENotSupported'],
      [{ crit: [] }, 'JWSInvalid'],
      [{ crit: 'b64' }, 'JWSInvalid'],
      [{ crit: [''] }, 'JWSInvalid'],
      [{ crit: ['b64'] }, 'JWSInvalid'],
      [{ crit: ['b64'], b64: 'yes' }, 'JWSInvalid'],
      [{ crit: ['b64'], b64: false }, 'JWTInvalid'],
    ];
    for (const [header, error] of cases) expect(await same(jws(es256, header), keys)).toEqual({ error });
    expect(await same(jws(es256, { crit: ['b64'], b64: true }), keys)).toEqual({ claims: CLAIMS });
    // b64 without crit is not an extension in use: ignored, as jose ignores it.
    expect(await same(jws(es256, { b64: false }), keys)).toEqual({ claims: CLAIMS });
  });

  it('refuses what is not three parts of base64url', async () => {
    const good = jws(es256);
    for (const bad of ['', 'a.b', `${good}.x`, `.${good.split('.')[1]}.x`])
      expect(await outcome(() => verifyJwt(bad, keys, CHECKS))).toEqual({ error: 'JWSInvalid' });
    // An empty signature is a signature that does not verify (an unsecured JWT's is empty: refused for its alg).
    expect(await same(good.replace(/\.[^.]+$/, '.'), keys)).toEqual({
      error: 'JWSSignatureVerificationFailed',
    });
    // Padding and characters outside base64url are not base64url (RFC 7515 §2), where jose's decoder reads them.
    expect(await outcome(() => verifyJwt(`${good}=`, keys, CHECKS))).toEqual({ error: 'JWSInvalid' });
    expect(await outcome(() => verifyJwt(good.replace('.', '+.'), keys, CHECKS))).toEqual({
      error: 'JWSInvalid',
    });
  });

  it('checks every claim as jose does, and names the same one', async () => {
    const cases: Record<string, unknown>[] = [
      { ...CLAIMS, iss: 'other' },
      { ...CLAIMS, sub: 'other' },
      { ...CLAIMS, aud: 'https://elsewhere' },
      { ...CLAIMS, aud: ['https://elsewhere', AUD[0]] },
      { ...CLAIMS, aud: ['https://elsewhere'] },
      { ...CLAIMS, aud: 7 },
      { ...CLAIMS, aud: [7] },
      { ...CLAIMS, exp: undefined },
      { ...CLAIMS, jti: undefined },
      { ...CLAIMS, iss: undefined },
      { ...CLAIMS, sub: undefined, iss: undefined, aud: undefined, exp: undefined, jti: undefined },
      { ...CLAIMS, exp: nowS - 59 },
      { ...CLAIMS, exp: nowS - 60 },
      { ...CLAIMS, exp: nowS - 61 },
      { ...CLAIMS, exp: '9999999999' },
      { ...CLAIMS, exp: null },
      { ...CLAIMS, nbf: nowS + 60 },
      { ...CLAIMS, nbf: nowS + 61 },
      { ...CLAIMS, nbf: 'soon' },
      { ...CLAIMS, iat: 'now' },
      { ...CLAIMS, iat: nowS + 3600 },
      { ...CLAIMS, exp: nowS + 0.5, iat: nowS - 0.5 },
      { ...CLAIMS, jti: 5 },
      { ...CLAIMS, extra: { deep: [1, 2] } },
    ];
    for (const claims of cases) await same(jws(es256, {}, JSON.parse(JSON.stringify(claims))), keys);
    // Without the options, only what every JWT is checked for.
    const loose: JwtChecks = { algorithms: ASSERTION_ALGS, clockTolerance: 60, now: NOW };
    for (const claims of cases) await same(jws(es256, {}, JSON.parse(JSON.stringify(claims))), keys, loose);
    expect(await same(jws(es256, {}, { ...CLAIMS, exp: nowS - 61 }), keys)).toEqual({
      error: 'JWTExpired',
      claim: 'exp',
    });
    expect(await same(jws(es256, {}, { ...CLAIMS, aud: ['x'] }), keys)).toEqual({
      error: 'JWTClaimValidationFailed',
      claim: 'aud',
    });
  });

  it('finds the key by kid; without one, tries each key that fits until one verifies', async () => {
    expect(await same(jws(es256, { kid: 'unknown' }), keys)).toEqual({ error: 'JWKSNoMatchingKey' });
    const twoWithoutKid = setOf(withoutKid(es256b), withoutKid(es256));
    const noKid = jws(withoutKid(es256));
    expect(await same(noKid, twoWithoutKid)).toEqual({ claims: CLAIMS });
    expect(await same(jws(withoutKid(es384)), twoWithoutKid)).toEqual({ error: 'JWKSNoMatchingKey' });
    const neither = setOf(
      withoutKid(es256b),
      withoutKid(signer('ES256', undefined, generateKeyPairSync('ec', { namedCurve: 'P-256' }))),
    );
    expect(await same(noKid, neither)).toEqual({ error: 'JWSSignatureVerificationFailed' });
    // A bad claim fails whatever key verified.
    expect(await same(jws(withoutKid(es256), {}, { ...CLAIMS, iss: 'x' }), twoWithoutKid)).toEqual({
      error: 'JWTClaimValidationFailed',
      claim: 'iss',
    });
  });

  it('refuses an RSA key under 2048 bits, as jose does', async () => {
    expect(await same(jws(rs1024), setOf(rs1024))).toEqual({ error: 'TypeError' });
  });

  it('refuses a key its set made for another algorithm, as jose does', async () => {
    // An RSA key imported for RS256 handed over for a PS256 token: not what createLocalJWKSet does, but a set may.
    const forRs256 = await importJWK(rs256.jwk, 'RS256');
    const given: JWTVerifyGetKey = async () => forRs256 as never;
    expect(await same(jws(ps256), given)).toEqual({ error: 'TypeError' });
    const forEs384 = await importJWK(es384.jwk, 'ES384');
    expect(await same(jws(es256), async () => forEs384 as never)).toEqual({ error: 'TypeError' });
  });

  it('refuses a signature with a character past its bytes, which Node would read and jose refuses', async () => {
    // ES384 signatures are 96 bytes, 128 characters: one more is no base64url, however it decodes.
    for (const extra of ['A', '_'])
      expect(await same(`${jws(es384)}${extra}`, keys)).toEqual({ error: 'JWSInvalid' });
  });

  it('answers as jose for every one-character change of a token', async () => {
    const alphabet = 'AZaz09-_';
    for (const by of [es256, rs256, ed]) {
      const good = jws(by);
      for (let i = 0; i < good.length; i += 3) {
        if (good[i] === '.') continue;
        const changed = good.slice(0, i) + alphabet[i % alphabet.length] + good.slice(i + 1);
        await same(changed, keys);
      }
    }
  });
});

describe('RSA keys a check could be made slow with', () => {
  // jose bounds neither the modulus nor the public exponent: a check with a 3072-bit exponent took 13 ms, on the
  // thread that answers every request.
  const large = signer(
    'RS256',
    'large-e',
    generateKeyPairSync('rsa', { modulusLength: 2048, publicExponent: 2 ** 31 + 1 }),
  );
  const fine = signer(
    'RS256',
    'e-max',
    generateKeyPairSync('rsa', { modulusLength: 2048, publicExponent: 2 ** 31 - 1 }),
  );

  it('are refused at verification, where jose would check them', async () => {
    expect(await outcome(() => reference(jws(large), setOf(large), CHECKS))).toEqual({ claims: CLAIMS });
    const refused = await verifyJwt(jws(large), setOf(large), CHECKS).catch((error: Error) => error);
    expect(refused).toEqual(new TypeError("an RSA key's public exponent must be at most 2^31 - 1"));
    expect(await verifyJwt(jws(fine), setOf(fine), CHECKS)).toEqual(CLAIMS);
  });

  it('are refused when registered, and left out of a fetched set', async () => {
    await expect(checkJwksKeys({ keys: [rs256.jwk, large.jwk] })).rejects.toEqual(
      new ValidationError("jwks key 2: an RSA key's public exponent must be at most 2^31 - 1"),
    );
    await expect(checkJwksKeys({ keys: [rs1024.jwk] })).rejects.toEqual(
      new ValidationError('jwks key 1: an RSA key must have 2048 to 8192 bits (this one has 1024)'),
    );
    await expect(checkJwksKeys({ keys: [rs256.jwk, fine.jwk, es256.jwk, ed.jwk] })).resolves.toBe(undefined);
    expect(rsaJwkProblem(large.jwk)).toBe("an RSA key's public exponent must be at most 2^31 - 1");
    expect(rsaJwkProblem(fine.jwk)).toBe(undefined);
    expect(rsaJwkProblem(rs1024.jwk)).toBe('an RSA key must have 2048 to 8192 bits (this one has 1024)');
    // A modulus of 8193 bits (a 1 then 8192 zero bits), and one of 8192 with leading zero bytes, as it decodes.
    const n8193 = Buffer.concat([Buffer.from([1]), Buffer.alloc(1024)]).toString('base64url');
    expect(rsaJwkProblem({ kty: 'RSA', n: n8193, e: 'AQAB' })).toBe(
      'an RSA key must have 2048 to 8192 bits (this one has 8193)',
    );
    const n8192 = Buffer.concat([Buffer.alloc(3), Buffer.from([0x80]), Buffer.alloc(1023)]).toString(
      'base64url',
    );
    expect(rsaJwkProblem({ kty: 'RSA', n: n8192, e: 'AQAB' })).toBe(undefined);
    expect(rsaJwkProblem(es256.jwk)).toBe(undefined);
  });
});
