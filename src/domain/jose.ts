import { constants, sign, verify, type KeyObject, type SigningOptions } from 'node:crypto';

/*
 * Tessera's JWS (RFC 7515) in one place: the algorithms it knows and what node:crypto needs for each, the one
 * reading of a JWS Compact Serialization, the signature made and checked from that table, and the bound on a
 * jti. Access tokens are signed (keys/jws.ts) and read (own-tokens.ts) with it, DPoP proofs (dpop.ts), client
 * assertions and platform tokens (client-auth/verify-jwt.ts) verified.
 *
 * The cryptography is node:crypto's, one synchronous call a signature: jose signs through WebCrypto, whose
 * per-call machinery (an async job, DOMException and structuredClone setup) costs more than the signature itself.
 * jose still imports, exports, seals and thumbprints the keys.
 */

/** What node:crypto needs to make and check one JWS algorithm's signature, and the key it takes. */
interface JwsAlgorithm {
  /** The hash node:crypto applies first; null for EdDSA, which hashes by itself (RFC 8032 §5.1.6). */
  digest: 'sha256' | 'sha384' | null;
  /** The JWK key type the algorithm signs with (RFC 7518 §6.1, RFC 8037 §2). */
  kty: 'EC' | 'RSA' | 'OKP';
  /** The curve, where the key type has several (RFC 7518 §6.2.1.1, RFC 8037 §2); any RSA modulus will do. */
  crv?: 'P-256' | 'P-384' | 'Ed25519';
  /** node:crypto's key options that make its output the JWS form; none where its default is that form. */
  options?: SigningOptions;
  /** Whether Tessera signs access tokens with it (RFC 9068 §2.1); every algorithm here it verifies. */
  signsAccessTokens: boolean;
}

/** ECDSA's JWS signature is r || s, each as long as the curve's order (RFC 7518 §3.4), not DER. */
const ECDSA: SigningOptions = { dsaEncoding: 'ieee-p1363' };
/** RSASSA-PSS with MGF1 and a salt as long as the hash: SHA-256's 32 bytes (RFC 7518 §3.5). */
const PSS: SigningOptions = { padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 };

/**
 * Every JWS algorithm Tessera knows (RFC 7518 §3.1, RFC 8037 §3.1), in the order discovery publishes them:
 * asymmetric ones only, never `none`, never HMAC. `Ed25519` is RFC 9864's fully-specified name for EdDSA with
 * Ed25519, which openid-client and jose sign with.
 */
const JWS_ALGORITHMS = {
  ES256: { digest: 'sha256', kty: 'EC', crv: 'P-256', options: ECDSA, signsAccessTokens: true },
  ES384: { digest: 'sha384', kty: 'EC', crv: 'P-384', options: ECDSA, signsAccessTokens: false },
  RS256: { digest: 'sha256', kty: 'RSA', signsAccessTokens: true },
  PS256: { digest: 'sha256', kty: 'RSA', options: PSS, signsAccessTokens: true },
  EdDSA: { digest: null, kty: 'OKP', crv: 'Ed25519', signsAccessTokens: true },
  Ed25519: { digest: null, kty: 'OKP', crv: 'Ed25519', signsAccessTokens: false },
} as const satisfies Record<string, JwsAlgorithm>;

/** An algorithm a client assertion or a DPoP proof may be signed with: any of the table's. */
export type AssertionAlg = keyof typeof JWS_ALGORITHMS;
/** An algorithm Tessera signs access tokens with. */
export type SigningAlg = {
  [A in AssertionAlg]: (typeof JWS_ALGORITHMS)[A]['signsAccessTokens'] extends true ? A : never;
}[AssertionAlg];

/** The table's row for `alg`, as the row type (whose members every row may be asked for). */
const algorithm = (alg: AssertionAlg): JwsAlgorithm => JWS_ALGORITHMS[alg];

/**
 * The algorithms a client assertion or a DPoP proof may be signed with (docs/interface.md), in the table's order,
 * which discovery publishes.
 */
export const ASSERTION_ALGS = Object.keys(JWS_ALGORITHMS) as readonly AssertionAlg[];

/** The algorithms Tessera signs access tokens with (RFC 9068 §2.1 forbids `none`), in the table's order. */
export const SIGNING_ALGS: readonly SigningAlg[] = ASSERTION_ALGS.filter(
  (alg): alg is SigningAlg => JWS_ALGORITHMS[alg].signsAccessTokens,
);

export function isSigningAlg(value: string): value is SigningAlg {
  return (SIGNING_ALGS as readonly string[]).includes(value);
}

/** Whether a JWK is of the key type (and curve, where it has one) that `alg` signs with. */
export function keyFitsAlg(alg: AssertionAlg, jwk: { kty?: unknown; crv?: unknown }): boolean {
  const { kty, crv } = algorithm(alg);
  return jwk.kty === kty && (crv === undefined || jwk.crv === crv);
}

/** The smallest RSA modulus a signature is checked with (RFC 7518 §3.3, §3.5; jose refuses smaller ones too). */
const MIN_RSA_BITS = 2048;
/**
 * The largest: a check with an 8192-bit key takes ~0.3 ms on the thread that answers requests (a 2048-bit one
 * 0.03), and a DPoP proof's length limit has room for one. jose sets no bound.
 */
const MAX_RSA_BITS = 8192;
/**
 * The largest RSA public exponent (Go's crypto/rsa bound; 65537 is everyone's): the check of a signature is a
 * modular exponentiation by it, and one as long as the modulus made a check of a 3072-bit key take 13 ms.
 */
const MAX_RSA_EXPONENT = 2n ** 31n - 1n;

/** Why an RSA key is refused for its size or public exponent; undefined when it is not, or is no RSA key. */
export function rsaKeyProblem(key: KeyObject): string | undefined {
  if (key.asymmetricKeyType !== 'rsa' && key.asymmetricKeyType !== 'rsa-pss') return undefined;
  const { modulusLength = 0, publicExponent = 0n } = key.asymmetricKeyDetails ?? {};
  if (modulusLength < MIN_RSA_BITS || modulusLength > MAX_RSA_BITS)
    return `an RSA key must have ${MIN_RSA_BITS} to ${MAX_RSA_BITS} bits (this one has ${modulusLength})`;
  if (publicExponent > MAX_RSA_EXPONENT) return `an RSA key's public exponent must be at most 2^31 - 1`;
  return undefined;
}

/** node:crypto's names of the table's curves. */
const CURVE_NAMES = { 'P-256': 'prime256v1', 'P-384': 'secp384r1' } as const;

/**
 * Why a public key cannot check `alg` signatures — not public, not of the algorithm's type and curve, an RSA key
 * rsaKeyProblem refuses — or undefined when it can: what jose checks of a key before it verifies, and the bounds on
 * RSA keys it does not set.
 */
export function verifyingKeyFits(alg: AssertionAlg, key: KeyObject): string | undefined {
  if (key.type !== 'public') return `${alg} signatures are checked with a public key`;
  const { kty, crv } = algorithm(alg);
  const type = key.asymmetricKeyType;
  switch (kty) {
    case 'EC':
      if (type !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== CURVE_NAMES[crv as 'P-256' | 'P-384'])
        return `${alg} signatures are checked with an EC ${crv} key`;
      return undefined;
    case 'RSA':
      if (type !== 'rsa' && !(type === 'rsa-pss' && alg === 'PS256'))
        return `${alg} signatures are checked with an RSA key`;
      return rsaKeyProblem(key);
    case 'OKP':
      return type === 'ed25519' ? undefined : `${alg} signatures are checked with an Ed25519 key`;
  }
}

/** node:crypto's key argument for `alg`: the key itself, or the key with the options of the JWS form. */
function keyInput(alg: AssertionAlg, key: KeyObject): KeyObject | (SigningOptions & { key: KeyObject }) {
  const options = algorithm(alg).options;
  return options === undefined ? key : { key, ...options };
}

/**
 * Makes the JWS Signature (RFC 7515 §5.1 step 5) of a signing input under `alg`, with a private key; the table's
 * options are read once, when it is built for a key, and each signature is one node:crypto call.
 */
export function signatureMaker(alg: AssertionAlg, key: KeyObject): (input: Buffer) => Buffer {
  if (key.type !== 'private') throw new Error('a signing key must be a private key');
  const digest = algorithm(alg).digest;
  const input = keyInput(alg, key);
  return (data) => sign(digest, data, input);
}

/** Checks a JWS Signature (raw bytes) over its signing input (bytes), with one key. */
export type SignatureBytesCheck = (input: Buffer, signature: Buffer) => boolean;

/**
 * Checks JWS Signatures (RFC 7515 §5.2 step 8) under `alg` with a public key: the mirror of signatureMaker, built
 * once for a key. Whatever node:crypto cannot take as a signature of that key is none of it: false, not a throw.
 */
export function signatureCheck(alg: AssertionAlg, key: KeyObject): SignatureBytesCheck {
  if (key.type !== 'public') throw new Error('a verifying key must be a public key');
  const digest = algorithm(alg).digest;
  const input = keyInput(alg, key);
  return (data, signature) => {
    try {
      return verify(digest, data, input, signature);
    } catch {
      // A signature of the wrong length for the key, for instance: not a signature of it.
      return false;
    }
  };
}

/** A JWS Compact Serialization (RFC 7515 §7.1) split into its parts: nothing of the header or payload decoded. */
export interface CompactJws {
  /** BASE64URL(UTF8(JWS Protected Header)), as it arrived. */
  header: string;
  /** BASE64URL(JWS Payload), as it arrived. */
  payload: string;
  /** `header.payload`, the JWS Signing Input (RFC 7515 §5.2 step 8): a slice of the text, not a new join. */
  signingInput: string;
  /** The JWS Signature, decoded. */
  signature: Buffer;
}

/** Three parts, each base64url without padding (RFC 7515 §2) and none empty: one test of the whole text. */
const BASE64URL_COMPACT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
/** The same, the signature possibly empty (an unsecured JWT's). */
const BASE64URL_JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * `text`'s three parts, or undefined when it has not exactly three (two dots). With `'base64url'`, undefined too
 * when a part is empty or not base64url without padding, which a lenient decoder would read anyway: Tessera's own
 * tokens are refused so. `'jwt'` is the same but for an empty signature, which an unsecured JWT (alg none) has
 * and its verification refuses for its alg, as jose does (client assertions, client-auth/verify-jwt.ts). With
 * `'any'` the parts are only decoded, and one that does not decode fails the check of what it holds (a DPoP
 * proof's).
 */
export function compactJws(text: string, parts: 'base64url' | 'jwt' | 'any'): CompactJws | undefined {
  if (parts === 'base64url' && !BASE64URL_COMPACT.test(text)) return undefined;
  if (parts === 'jwt' && !BASE64URL_JWT.test(text)) return undefined;
  const first = text.indexOf('.');
  const second = first === -1 ? -1 : text.indexOf('.', first + 1);
  if (second === -1 || text.includes('.', second + 1)) return undefined;
  // Base64 without padding is never 1 character past a multiple of 4; Node's decoder would drop the extra one, and
  // a second text would carry the same signature (jose refuses it).
  if ((text.length - second - 1) % 4 === 1) return undefined;
  return {
    header: text.slice(0, first),
    payload: text.slice(first + 1, second),
    signingInput: text.slice(0, second),
    signature: Buffer.from(text.slice(second + 1), 'base64url'),
  };
}

export const isJsonObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A header or payload part's JSON object (RFC 7515 §5.2 steps 2, 3 and 7: UTF-8, as jose reads it too), or
 * undefined if it is not one.
 */
export function jsonPart(part: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(strictUtf8.decode(Buffer.from(part, 'base64url')));
    return isJsonObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** A jti longer than this is refused (a jti is kept as a digest; this only bounds the work). */
export const MAX_JTI_LENGTH = 512;

/** A jti as a single-use check takes it (RFC 7519 §4.1.7): a string of 1 to MAX_JTI_LENGTH characters. */
export const usableJti = (jti: unknown): jti is string =>
  typeof jti === 'string' && jti !== '' && jti.length <= MAX_JTI_LENGTH;
