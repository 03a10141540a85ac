import { KeyObject, type webcrypto } from 'node:crypto';
import { errors, type CompactJWSHeaderParameters, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import {
  ASSERTION_ALGS,
  compactJws,
  jsonPart,
  signatureCheck,
  verifyingKeyFits,
  type AssertionAlg,
  type CompactJws,
  type SignatureBytesCheck,
} from '../jose.js';

/*
 * A signed JWT (RFC 7519 §7.2) checked as jose's jwtVerify checks it, with the same errors, for the options
 * client assertions and platform tokens use; the signature by node:crypto in one synchronous call, from the table
 * tokens are signed with (jose.ts). jose's verification goes through WebCrypto, whose per-call machinery (an async
 * job, its promise) cost half again the verification itself: an ES256 assertion 75.6 µs against 50.3 µs
 * (bench/servers/verify-loop.js). jose still finds the key in a set (createLocalJWKSet, the fetched sets of
 * keys/jwks-fetcher.ts) and imports it; each key it gives is turned into node:crypto's form once and kept with it.
 */

/** What is checked besides the signature: jose's JWTVerifyOptions of the same names, those Tessera uses. */
export interface JwtChecks {
  /** The algorithms the header may name (JOSEAlgNotAllowed otherwise): a subset of jose.ts's table. */
  algorithms: readonly string[];
  /** The exact iss. */
  issuer?: string;
  /** The exact sub. */
  subject?: string;
  /** The aud, or one of its values, must be one of these. */
  audience?: readonly string[];
  /** Seconds of skew allowed on exp and nbf. */
  clockTolerance: number;
  /** Now, in ms since the epoch. */
  now: number;
  /** Claims that must be present. */
  requiredClaims?: readonly string[];
}

/** A key as a key set gives it (a CryptoKey, or a KeyObject), with a signature check per algorithm it verified. */
const checks = new WeakMap<object, Map<AssertionAlg, SignatureBytesCheck>>();
const TABLE: readonly string[] = ASSERTION_ALGS;

/**
 * `key`'s check of `alg` signatures, made the first time and kept with the key. Refused as jose refuses it (not
 * made for `alg`, not a public key, not of the algorithm's type and curve, an RSA key under 2048 bits), and an RSA
 * key beyond the bounds jose does not set (verifyingKeyFits).
 */
function checkOf(key: unknown, alg: AssertionAlg): SignatureBytesCheck {
  if (typeof key !== 'object' || key === null) throw new TypeError('a key set gave no key');
  let byAlg = checks.get(key);
  let check = byAlg?.get(alg);
  if (check !== undefined) return check;
  let object: KeyObject;
  if (key instanceof KeyObject) object = key;
  else {
    // A CryptoKey (what jose's key sets give), made for this algorithm, as jose requires; KeyObject.from throws a
    // TypeError for anything that is not one.
    const { usages, algorithm } = key as Partial<webcrypto.CryptoKey>;
    if (!Array.isArray(usages) || !usages.includes('verify'))
      throw new TypeError('a key set gave a key that does not verify');
    if (!madeFor(alg, algorithm)) throw new TypeError(`a key set gave a key not made for ${alg}`);
    object = KeyObject.from(key as webcrypto.CryptoKey);
  }
  const problem = verifyingKeyFits(alg, object);
  if (problem !== undefined) throw new TypeError(problem);
  check = signatureCheck(alg, object);
  if (byAlg === undefined) checks.set(key, (byAlg = new Map()));
  byAlg.set(alg, check);
  return check;
}

/** WebCrypto's name of each algorithm's key (RFC 7518 §3 in WebCrypto's terms), with its hash or curve. */
const WEBCRYPTO: Record<AssertionAlg, { name: string; hash?: string; namedCurve?: string }> = {
  ES256: { name: 'ECDSA', namedCurve: 'P-256' },
  ES384: { name: 'ECDSA', namedCurve: 'P-384' },
  RS256: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
  PS256: { name: 'RSA-PSS', hash: 'SHA-256' },
  EdDSA: { name: 'Ed25519' },
  Ed25519: { name: 'Ed25519' },
};

/** Whether a CryptoKey's algorithm is `alg`'s (jose's checkCryptoKey): its name, and its hash or curve. */
function madeFor(alg: AssertionAlg, algorithm: unknown): boolean {
  const wanted = WEBCRYPTO[alg];
  const given = algorithm as { name?: unknown; hash?: { name?: unknown }; namedCurve?: unknown } | undefined;
  return (
    given?.name === wanted.name &&
    (wanted.hash === undefined || given.hash?.name === wanted.hash) &&
    (wanted.namedCurve === undefined || given.namedCurve === wanted.namedCurve)
  );
}

/**
 * RFC 7515 §4.1.11 as jose has it for a JWT: a crit must be a non-empty list of non-empty strings, each an
 * extension understood — b64 only (RFC 7797), and then present and a boolean; a JWT must not be unencoded.
 */
function checkCrit(header: Record<string, unknown>): void {
  const crit = header.crit;
  if (crit === undefined) return;
  if (
    !Array.isArray(crit) ||
    crit.length === 0 ||
    crit.some((name) => typeof name !== 'string' || name === '')
  )
    throw new errors.JWSInvalid(
      '"crit" (Critical) Header Parameter MUST be an array of non-empty strings when present',
    );
  for (const name of crit as string[]) {
    if (name !== 'b64')
      throw new errors.JOSENotSupported(`Extension Header Parameter "${name}" is not recognized`);
    if (header.b64 === undefined)
      throw new errors.JWSInvalid(`Extension Header Parameter "${name}" is missing`);
  }
  if (typeof header.b64 !== 'boolean')
    throw new errors.JWSInvalid('The "b64" (base64url-encode payload) Header Parameter must be a boolean');
  if (!header.b64) throw new errors.JWTInvalid('JWTs MUST NOT use unencoded payload');
}

const claimFailed = (payload: JWTPayload, claim: string, message = `unexpected "${claim}" claim value`) =>
  new errors.JWTClaimValidationFailed(message, payload, claim, 'check_failed');

/** A NumericDate claim: absent unless required, else a number (JWTClaimValidationFailed otherwise). */
function numericDate(payload: JWTPayload, claim: 'iat' | 'nbf' | 'exp'): number | undefined {
  const value = payload[claim];
  if (value === undefined) return undefined;
  if (typeof value !== 'number')
    throw new errors.JWTClaimValidationFailed(`"${claim}" claim must be a number`, payload, claim, 'invalid');
  return value;
}

/** The claims, checked as jose's validateClaimsSet checks them, in its order (so the same claim is named). */
function checkedClaims(claims: JWTPayload, options: JwtChecks): JWTPayload {
  const { issuer, subject, audience } = options;
  const present = [...(options.requiredClaims ?? [])];
  if (audience !== undefined) present.push('aud');
  if (subject !== undefined) present.push('sub');
  if (issuer !== undefined) present.push('iss');
  for (const claim of new Set(present.reverse()))
    if (!Object.hasOwn(claims, claim))
      throw new errors.JWTClaimValidationFailed(
        `missing required "${claim}" claim`,
        claims,
        claim,
        'missing',
      );
  if (issuer !== undefined && claims.iss !== issuer) throw claimFailed(claims, 'iss');
  if (subject !== undefined && claims.sub !== subject) throw claimFailed(claims, 'sub');
  if (audience !== undefined) {
    const aud = claims.aud;
    const ours =
      typeof aud === 'string'
        ? audience.includes(aud)
        : Array.isArray(aud) && audience.some((value) => aud.includes(value));
    if (!ours) throw claimFailed(claims, 'aud');
  }
  const now = Math.floor(options.now / 1000);
  const tolerance = options.clockTolerance;
  numericDate(claims, 'iat');
  const nbf = numericDate(claims, 'nbf');
  if (nbf !== undefined && nbf > now + tolerance)
    throw claimFailed(claims, 'nbf', '"nbf" claim timestamp check failed');
  const exp = numericDate(claims, 'exp');
  if (exp !== undefined && exp <= now - tolerance)
    throw new errors.JWTExpired('"exp" claim timestamp check failed', claims, 'exp', 'check_failed');
  return claims;
}

/** A JWT as verifyJwt reads it, decoded once and not trusted: its parts, its protected header and its claims. */
export interface DecodedJwt {
  readonly jwt: string;
  readonly jws: CompactJws;
  readonly header: Record<string, unknown>;
  /** Undefined when the payload is not a JSON object: verifyJwt refuses it once the signature holds, as jose. */
  readonly payload: JWTPayload | undefined;
}

/**
 * `jwt` decoded as jose reads it (base64url without padding, UTF-8, JSON objects): JWSInvalid when it is not a JWS
 * Compact Serialization with a JSON object for a header.
 */
export function decodeJwt(jwt: string): DecodedJwt {
  const jws = compactJws(jwt, 'jwt');
  const header = jws === undefined ? undefined : jsonPart(jws.header);
  if (jws === undefined || header === undefined) throw new errors.JWSInvalid('Invalid Compact JWS');
  return { jwt, jws, header, payload: jsonPart(jws.payload) };
}

/**
 * The claims of `token` (as text, or decoded by decodeJwt) when it is a JWS Compact Serialization whose protected
 * header names an algorithm of `options.algorithms`, signed by the key `getKey` finds for that header, and whose
 * claims hold (`options`); else rejects with jose's error for what failed, in jose's order. Without a kid, every
 * key of the set that fits the alg is tried (authlib sends none): only a signature that fails moves on to the next
 * key; a bad claim fails whatever the key.
 */
export async function verifyJwt(
  token: string | DecodedJwt,
  getKey: JWTVerifyGetKey,
  options: JwtChecks,
): Promise<JWTPayload> {
  const { jwt, jws, header, payload } = typeof token === 'string' ? decodeJwt(token) : token;
  checkCrit(header);
  const alg = header.alg;
  if (typeof alg !== 'string' || alg === '')
    throw new errors.JWSInvalid('JWS "alg" (Algorithm) Header Parameter missing or invalid');
  if (!options.algorithms.includes(alg) || !TABLE.includes(alg))
    throw new errors.JOSEAlgNotAllowed('"alg" (Algorithm) Header Parameter value not allowed');
  const input = Buffer.from(jws.signingInput);
  const verified = (key: unknown): boolean => checkOf(key, alg as AssertionAlg)(input, jws.signature);
  const parts = {
    payload: jws.payload,
    protected: jws.header,
    signature: jwt.slice(jws.signingInput.length + 1),
  };
  let signed = false;
  try {
    signed = verified(await getKey(header as CompactJWSHeaderParameters, parts));
  } catch (error) {
    if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error;
    // Only a signature that fails moves on; a key that cannot check this alg's signatures throws, as with jose.
    for await (const candidate of error as unknown as AsyncIterable<unknown>)
      if ((signed = verified(candidate))) break;
  }
  if (!signed) throw new errors.JWSSignatureVerificationFailed();
  if (payload === undefined) throw new errors.JWTInvalid('JWT Claims Set must be a top-level JSON object');
  return checkedClaims(payload, options);
}
