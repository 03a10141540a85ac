import { errors, type JWTPayload, type JWTVerifyGetKey, type ProtectedHeaderParameters } from 'jose';
import { TesseraError } from '../errors.js';
import { ASSERTION_ALGS, usableJti } from '../jose.js';
import type { KeyPlace } from '../known-client.js';
import { decodeJwt, type DecodedJwt } from './verify-jwt.js';

/*
 * What every client assertion (RFC 7523 §2.2) shares, whoever signed it: the client's own key (private_key_jwt,
 * private-key-jwt.ts) or a platform a client trusts (a federated credential, federated.ts). The request is the
 * same; the client's registration says which proof applies.
 */

/** RFC 7523 §2.2: the one client assertion type. */
export const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** Clock skew allowed on every time of an assertion (docs/interface.md). */
export const ASSERTION_SKEW_SECONDS = 60;
const ALGS: readonly string[] = ASSERTION_ALGS;
/** For verifyJwt's `algorithms`: never `none`, never HMAC. */
export const VERIFY_ALGS = ALGS;
export { verifyJwt } from './verify-jwt.js';

/** Whether the header names an algorithm an assertion may be signed with (checked before any key is sought). */
export const allowedAlg = (header: ProtectedHeaderParameters): boolean =>
  typeof header.alg === 'string' && ALGS.includes(header.alg);

/** A jti as a single-use check takes it: jose.ts's, the same as a DPoP proof's. */
export { usableJti };

/** Marks assertion ids as used until a time, across every instance (Redis, else the store). */
export interface ReplayGuard {
  /**
   * True if `jti` was not in use within `scope`; false if it is (a replay). `scope`: the client id for its own
   * assertions, the client and the issuer for a federated one (see federated.ts). `until`: ms since the epoch.
   * Throws Unavailable, or the 503 temporarily_unavailable itself, when it cannot tell (the store cannot record
   * the jti): answered 503 either way, and no failed proof.
   */
  use(scope: string, jti: string, until: number): Promise<boolean>;
}

/** Public keys published at a URL, fetched and cached (see keys/jwks-fetcher.ts). */
export interface RemoteKeys {
  /** The place's keys, fetched or cached; rejects with an Error whose message says why there are none. */
  keysFor(place: KeyPlace): Promise<JWTVerifyGetKey>;
  /** Fetches the place's keys again if an unknown kid did not in the last minute: the new keys, or undefined. */
  refetch(place: KeyPlace): Promise<JWTVerifyGetKey | undefined>;
}

/** A client assertion as it arrived: decoded once, as verifyJwt reads it, its payload a JSON object; not trusted. */
export interface ParsedAssertion extends DecodedJwt {
  readonly header: ProtectedHeaderParameters & Record<string, unknown>;
  readonly payload: JWTPayload;
}

/** `jwt` as a client assertion, or undefined when it is not a JWT whose header and payload are JSON objects. */
export function parseAssertion(jwt: string): ParsedAssertion | undefined {
  let decoded: DecodedJwt;
  try {
    decoded = decodeJwt(jwt);
  } catch {
    return undefined;
  }
  return decoded.payload === undefined ? undefined : (decoded as ParsedAssertion);
}

/** A refusal whose message is the audit trail's reason. */
export class AssertionFailed extends TesseraError {
  override get code(): string {
    return 'assertion_failed';
  }
}

/** No keys could be had at a place: the message says why. */
export class KeysUnavailable extends TesseraError {
  override get code(): string {
    return 'keys_unavailable';
  }
}

/**
 * `verify` with the keys published at `place`: the cached ones, and, when they lack the assertion's kid (the
 * signer may have rotated), those of one refetch, unless an unknown kid made one within the last minute; the
 * request that caused it is answered with the new keys. KeysUnavailable when there are none at all.
 */
export async function verifyAtPlace<T>(
  remote: RemoteKeys,
  place: KeyPlace,
  kid: string | undefined,
  verify: (keys: JWTVerifyGetKey) => Promise<T>,
): Promise<T> {
  let keys: JWTVerifyGetKey;
  try {
    keys = await remote.keysFor(place);
  } catch (error) {
    throw new KeysUnavailable((error as Error).message);
  }
  try {
    return await verify(keys);
  } catch (error) {
    if (!(error instanceof errors.JWKSNoMatchingKey) || kid === undefined) throw error;
    const fresh = await remote.refetch(place).catch(() => undefined);
    if (fresh === undefined) throw error;
    return verify(fresh);
  }
}

/** The iss of a client assertion, for the audit trail only (undefined if it does not decode). */
export function assertionIssuer(assertion: string | undefined): string | undefined {
  if (assertion === undefined || assertion === '') return undefined;
  const iss = parseAssertion(assertion)?.payload.iss;
  return typeof iss === 'string' ? iss : undefined;
}
