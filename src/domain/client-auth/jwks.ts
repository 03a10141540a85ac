import { createPublicKey, KeyObject, type JsonWebKey } from 'node:crypto';
import { isIP } from 'node:net';
import { importJWK, type JWK } from 'jose';
import { isPublicAddress } from '../addresses.js';
import { ASSERTION_ALGS, keyFitsAlg, rsaKeyProblem, type AssertionAlg } from '../jose.js';
import { checkNesting, ValidationError } from '../validate.js';

/*
 * A private_key_jwt client's public keys as it registers them: the shape of a JWK Set, the assertion
 * algorithms each key can verify, and where a set may be published (jwks_uri). Checked when a client is
 * written (management) and when a published set is fetched (keys/jwks-fetcher.ts).
 */

/** The algorithms a client assertion may be signed with: jose.ts's table, where discovery and DPoP read them too. */
export { ASSERTION_ALGS, type AssertionAlg };

/** A client's public keys, as registered (RFC 7517 JWK Set). */
export interface PublicJwks {
  keys: JWK[];
}

/** At most this many keys in a client's set: a rotation needs two or three. */
export const MAX_CLIENT_KEYS = 10;
/** A JWK Set registered inline, as JSON, at most this many bytes. */
const MAX_JWKS_BYTES = 16 * 1024;

/** Members that only a private or symmetric key has: a set holding one is refused, never stored. */
export const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const;

/** The assertion algorithms a key can verify, by its type and curve (jose.ts's table), in the table's order. */
export function algsForKey(jwk: JWK): AssertionAlg[] {
  return ASSERTION_ALGS.filter((alg) => keyFitsAlg(alg, jwk));
}

/**
 * A client's JWK Set, by its shape: 1 to MAX_CLIENT_KEYS public signing keys (RSA, EC P-256 or P-384,
 * Ed25519), each with an `alg` (if any) it can verify, distinct `kid`s, no private member, at most
 * MAX_JWKS_BYTES as JSON. checkJwksKeys then imports each one.
 */
export function validateJwks(value: unknown): PublicJwks {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ValidationError('jwks must be a JSON object with a "keys" list (a JWK Set, RFC 7517 §5)');
  checkNesting(value, 'jwks');
  const bytes = Buffer.byteLength(JSON.stringify(value));
  if (bytes > MAX_JWKS_BYTES)
    throw new ValidationError(`jwks is ${bytes} bytes as JSON; at most ${MAX_JWKS_BYTES}`);
  const keys = (value as { keys?: unknown }).keys;
  if (!Array.isArray(keys) || keys.length === 0)
    throw new ValidationError('jwks must have a non-empty "keys" list');
  if (keys.length > MAX_CLIENT_KEYS)
    throw new ValidationError(`jwks has ${keys.length} keys; at most ${MAX_CLIENT_KEYS}`);
  const kids = new Set<string>();
  keys.forEach((key: unknown, i) => {
    const where = `jwks key ${i + 1}`;
    if (typeof key !== 'object' || key === null || Array.isArray(key))
      throw new ValidationError(`${where} must be a JSON object (a JWK)`);
    const jwk = key as JWK & Record<string, unknown>;
    for (const member of PRIVATE_MEMBERS)
      if (member in jwk)
        throw new ValidationError(
          `${where} has "${member}": register public keys only (a private or symmetric key is refused)`,
        );
    const algs = algsForKey(jwk);
    if (algs.length === 0)
      throw new ValidationError(`${where} must be an RSA, EC P-256, EC P-384 or Ed25519 public key`);
    if (jwk.alg !== undefined && !(algs as string[]).includes(jwk.alg as string))
      throw new ValidationError(
        `${where} has alg ${String(jwk.alg)}; this key can verify ${algs.join(', ')}`,
      );
    if (jwk.use !== undefined && jwk.use !== 'sig')
      throw new ValidationError(`${where} has use ${String(jwk.use)}; a signing key has "sig" or none`);
    if (jwk.kid !== undefined) {
      if (typeof jwk.kid !== 'string' || jwk.kid === '' || jwk.kid.length > 256)
        throw new ValidationError(`${where}: kid must be a string of 1 to 256 characters`);
      if (kids.has(jwk.kid)) throw new ValidationError(`${where}: kid ${jwk.kid} appears twice`);
      kids.add(jwk.kid);
    }
  });
  return { keys: keys as JWK[] };
}

/** Imports every key of a set that passed validateJwks, with jose: a key that does not import is refused. */
export async function checkJwksKeys(jwks: PublicJwks): Promise<void> {
  for (const [i, jwk] of jwks.keys.entries()) {
    const alg = (jwk.alg as AssertionAlg | undefined) ?? algsForKey(jwk)[0]!;
    let key: Awaited<ReturnType<typeof importJWK>>;
    try {
      key = await importJWK(jwk, alg);
    } catch (error) {
      throw new ValidationError(
        `jwks key ${i + 1} is not a valid ${alg} public key: ${(error as Error).message}`,
      );
    }
    const problem = key instanceof Uint8Array ? undefined : rsaKeyProblem(KeyObject.from(key));
    if (problem !== undefined) throw new ValidationError(`jwks key ${i + 1}: ${problem}`);
  }
}

/**
 * Why a published RSA key is not used (rsaKeyProblem), for a key set fetched from a URL, which jose imports only
 * when a token names a key. Undefined for any other key, and for one node:crypto cannot read (jose refuses it too).
 */
export function rsaJwkProblem(jwk: JWK): string | undefined {
  if (jwk.kty !== 'RSA') return undefined;
  let key: KeyObject;
  try {
    key = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' });
  } catch {
    return undefined;
  }
  return rsaKeyProblem(key);
}

/**
 * Where a client publishes its keys: an absolute https URL (http only outside production), without
 * credentials or fragment, and, unless `allowPrivate` (TESSERA_JWKS_ALLOW_PRIVATE), not on an IP address in a
 * refused range (addresses.ts). A host name is not resolved here: what it resolves to is checked at each
 * fetch (jwks-fetcher.ts), since that may change after it is set.
 */
export function validateJwksUri(raw: string, production: boolean, allowPrivate: boolean): string {
  if (raw.length > 2048) throw new ValidationError('jwks_uri is longer than 2048 characters');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ValidationError(`jwks_uri must be an absolute URL, got "${raw.slice(0, 100)}"`);
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && !production))
    throw new ValidationError(
      production ? 'jwks_uri must be an https URL' : 'jwks_uri must be an http or https URL',
    );
  if (raw.includes('#')) throw new ValidationError('jwks_uri must not have a fragment');
  if (url.username || url.password) throw new ValidationError('jwks_uri must not carry credentials');
  // Server-side request forgery (docs/interface.md, "Client authentication"): the WHATWG URL parser has already
  // written an IPv4 host in any spelling (2130706433, 0x7f.1, 127.1) as a dotted quad and an IPv6 one in
  // compressed lower case between brackets; every IPv6 form of an IPv4 address is judged as that address.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!allowPrivate && isIP(host) !== 0 && !isPublicAddress(host))
    throw new ValidationError(
      `jwks_uri's host ${url.hostname} is not a public address (loopback, private, link-local, unique-local or reserved)`,
    );
  return raw;
}
