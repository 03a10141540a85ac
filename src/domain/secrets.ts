import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Client secrets are generated here, never chosen by people: 256 random bits. With that much entropy a
 * SHA-256 digest is as strong a verifier as bcrypt and a thousand times cheaper (docs/design.md), and no
 * slow hash is needed on the token path.
 */
const SECRET_BYTES = 32;

/** At most this many secrets of a client work at once (docs/interface.md, "Secrets, with overlap"). */
export const MAX_LIVE_SECRETS = 5;
const DIGEST_PREFIX = 'sha256:';

export function generateSecret(): string {
  return randomBytes(SECRET_BYTES).toString('base64url');
}

/**
 * The fewest characters of a secret that is given rather than generated (a mounted file of the bootstrap admin or of
 * an apply file; MANAGEMENT.md): 32, as many as `openssl rand -base64 24` prints. Such a secret is digested like a
 * generated one, so it must be as random: the documentation says to make it so.
 */
const MIN_GIVEN_SECRET_LENGTH = 32;

/** Why a given secret is refused, or undefined: at least MIN_GIVEN_SECRET_LENGTH characters, visible ASCII only. */
export function givenSecretProblem(secret: string): string | undefined {
  if (secret.length < MIN_GIVEN_SECRET_LENGTH)
    return `a secret must have at least ${MIN_GIVEN_SECRET_LENGTH} characters; this one has ${secret.length}`;
  // What a client can send in a form and a Basic header alike (RFC 6749 §2.3.1, Appendix A: VSCHAR).
  if (!/^[\x20-\x7e]+$/.test(secret)) return 'a secret may hold only printable ASCII characters';
  return undefined;
}

/** Whether one of `digests` (stored, `sha256:…`) is the digest of `secret`; every one compared in constant time. */
export function matchesDigest(secret: string, digests: readonly string[]): boolean {
  const presented = digestOf(secret);
  let found = false;
  for (const stored of digests) if (digestsEqual(presented, digestBytes(stored))) found = true;
  return found;
}

/** 128 random bits as 32 hex digits: never starts with '-', needs no escaping in a URL, a form or a shell. */
export function generateClientId(): string {
  return randomBytes(16).toString('hex');
}

/** The stored form of a secret: `sha256:<base64url digest>`; the prefix leaves room for another scheme. */
export function digestSecret(secret: string): string {
  return DIGEST_PREFIX + createHash('sha256').update(secret, 'utf8').digest('base64url');
}

/**
 * The raw 32 bytes of a stored digest, as the cache keeps them for comparison: a latin1 string of 32
 * characters, one per byte. A string of its own costs 48 bytes of heap; a Buffer of its own (a pool slice
 * would keep its whole 8 KiB slab alive) costs about 280 with its ArrayBuffer, in every cached client.
 */
export function digestBytes(stored: string): string {
  if (!stored.startsWith(DIGEST_PREFIX)) throw new Error('unknown secret digest scheme');
  const decoded = Buffer.from(stored.slice(DIGEST_PREFIX.length), 'base64url');
  if (decoded.length !== 32) throw new Error('malformed secret digest');
  return decoded.toString('latin1');
}

/**
 * A digest that matches no secret, so that an unknown client id takes the same path, the same work and
 * the same time as a known one with a wrong secret (docs/interface.md).
 */
export const DUMMY_DIGEST: string = randomBytes(32).toString('latin1');

/** The SHA-256 of a presented secret, computed once per request and compared with each candidate. */
export const digestOf = (presented: string): Buffer =>
  createHash('sha256').update(presented, 'utf8').digest();

/** The kept digest being compared, as bytes: one buffer reused (comparisons are synchronous), none per slot. */
const KEPT = Buffer.alloc(32);

/** Constant-time comparison of a presented secret's digest with a kept one (digestBytes), 32 bytes each. */
export function digestsEqual(presented: Buffer, kept: string): boolean {
  KEPT.write(kept, 'latin1');
  return timingSafeEqual(presented, KEPT);
}
