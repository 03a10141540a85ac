import { subjectClientOf } from './token-profiles.js';
import { compactJws, jsonPart, type SigningAlg } from './jose.js';

/*
 * Verifying Tessera's own access tokens (docs/design.md): introspection's, the admin API's, and token exchange's
 * subject and actor tokens. One function over what this process holds in memory: the keyring's published keys, the
 * denylist, and the standing of clients (revocations.ts and the directory keep both current through the change
 * feed). No store operation, no await: a verdict per call, from memory.
 */

/** Checks a JWS signature (raw bytes) over its signing input (`header.payload`), with one key. */
export type SignatureCheck = (input: string, signature: Buffer) => boolean;

/** A key this server publishes, as verification needs it. */
export interface VerificationKey {
  alg: SigningAlg;
  check: SignatureCheck;
}

export interface OwnTokenDeps {
  issuer: string;
  /** Milliseconds since the epoch. */
  now(): number;
  /** The key this server publishes under `kid`: the current ones, the next, and the retired until they expire. */
  key(kid: string): VerificationKey | undefined;
  /** Memory only: whether this token id is on the denylist. */
  revoked(jti: string): boolean;
  /**
   * Memory only: whether a client with this id exists. May throw (Unavailable, answered 503
   * temporarily_unavailable) when this process cannot tell, its view of the clients being stale.
   */
  clientExists(id: string): boolean;
  /**
   * Memory only: the client's tokens issued at or before this second (an iat) are inactive; Infinity for every
   * token (the client is disabled, or deleted), -Infinity for none.
   */
  cutOf(clientId: string): number;
}

/** The claims of a Tessera access token (RFC 9068 §2.2), as a verified token carries them. */
export interface OwnTokenClaims {
  iss: string;
  sub: string;
  aud: string | string[];
  client_id: string;
  iat: number;
  exp: number;
  jti: string;
  nbf?: number;
  scope?: string;
  cnf?: Record<string, unknown>;
  /** RFC 8693 §4.1: who acted for `sub` (an exchanged token), nesting who acted before. */
  act?: unknown;
  [claim: string]: unknown;
}

/** The DPoP key a token is bound to (RFC 9449 §6.1: cnf.jkt), if it is bound to one. */
export function dpopKeyOf(claims: OwnTokenClaims): string | undefined {
  const jkt = claims.cnf?.jkt;
  return typeof jkt === 'string' ? jkt : undefined;
}

/**
 * Why a token is inactive: it is no valid token of this server (malformed, another key or issuer, expired, ...),
 * it was revoked (on the denylist, or its client's tokens were revoked after it was issued), or its client is
 * disabled or deleted.
 */
type Inactivity = 'invalid' | 'revoked' | 'client';

/** The verdict on a token: its claims when it is active, else why not (for logs and descriptions, never a secret). */
export type OwnTokenVerdict =
  { active: true; claims: OwnTokenClaims } | { active: false; why: Inactivity; reason: string };

/** Longer than any token Tessera signs (custom claims are at most 4 KiB) by a wide margin. */
const MAX_TOKEN_LENGTH = 16 * 1024;

const inactive = (reason: string, why: Inactivity = 'invalid'): OwnTokenVerdict => ({
  active: false,
  why,
  reason,
});

const isTime = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);
const isText = (value: unknown): value is string => typeof value === 'string' && value !== '';
const isAudience = (value: unknown): value is string | string[] =>
  isText(value) || (Array.isArray(value) && value.length > 0 && value.every(isText));

/**
 * Whether `token` is one of this server's access tokens that is active now (docs/interface.md, "Revocation and
 * introspection"): a genuine one (readOwnToken) that is active now (activeNow).
 */
export function verifyOwnToken(token: string, deps: OwnTokenDeps): OwnTokenVerdict {
  const claims = readOwnToken(token, deps);
  return typeof claims === 'string' ? inactive(claims) : activeNow(claims, deps);
}

/**
 * The claims of `token` if it is a genuine access token of this server, active or not: a JWS signed by a key this
 * server publishes (by its `kid`, with that key's `alg`), `typ` at+jwt (RFC 9068 §2.1), `iss` this server, its
 * claims of the right types; else why it is not one. Token exchange reads its subject token so before it tells
 * whether the token is active, which only a client the token was meant for may learn.
 */
export function readOwnToken(
  token: string,
  deps: Pick<OwnTokenDeps, 'issuer' | 'key'>,
): OwnTokenClaims | string {
  if (token.length > MAX_TOKEN_LENGTH) return 'not a token of this server';
  // Every part base64url without padding: not ours, whatever a lenient decoder would make of it.
  const jws = compactJws(token, 'base64url');
  if (jws === undefined) return 'not a compact JWS';
  const header = jsonPart(jws.header);
  if (header === undefined) return 'not a compact JWS';
  // RFC 9068 §2.1 (and RFC 7515 §4.1.11: Tessera understands no critical extension).
  if (header.typ !== 'at+jwt' || header.crit !== undefined) return 'not an access token';
  if (typeof header.kid !== 'string') return 'not signed by a key of this server';
  const key = deps.key(header.kid);
  if (key === undefined || header.alg !== key.alg) return 'not signed by a key of this server';
  if (!key.check(jws.signingInput, jws.signature)) return 'bad signature';

  // Decoded only once its signature holds.
  const claims = jsonPart(jws.payload);
  if (claims === undefined) return 'not a JWT';
  if (claims.iss !== deps.issuer) return 'issued by another issuer';
  const { exp, iat, nbf, jti, client_id: clientId } = claims;
  if (
    !isTime(exp) ||
    !isTime(iat) ||
    (nbf !== undefined && !isTime(nbf)) ||
    !isText(jti) ||
    !isText(clientId) ||
    !isText(claims.sub) ||
    !isAudience(claims.aud)
  )
    return 'a claim is missing or malformed';
  return claims as OwnTokenClaims;
}

/**
 * Whether a genuine token of this server (readOwnToken's claims) is active now: not expired (no clock leeway for
 * our own tokens: inactive from `exp`), not before its `nbf` if it has one, not on the denylist, issued to a client
 * that exists, is enabled, and whose tokens were not revoked at or after the token's `iat`; and when its `sub` is
 * another client than its `client_id` (an exchanged token's original caller), that client too.
 */
export function activeNow(claims: OwnTokenClaims, deps: OwnTokenDeps): OwnTokenVerdict {
  const { exp, iat, nbf, jti, client_id: clientId } = claims;
  const now = deps.now();
  if (now >= exp * 1000) return inactive('expired');
  if (nbf !== undefined && now < nbf * 1000) return inactive('not valid yet');
  if (deps.revoked(jti)) return inactive('revoked', 'revoked');
  if (!deps.clientExists(clientId)) return inactive('its client is deleted', 'client');
  const cut = deps.cutOf(clientId);
  if (cut === Infinity) return inactive('its client is disabled or deleted', 'client');
  if (iat <= cut) return inactive("its client's tokens were revoked", 'revoked');
  // A token obtained by token exchange (RFC 8693) is for its `sub`, the original caller, a client too: it is
  // worth no more than a token of that client would be (never a token for a disabled or deleted original client;
  // Keycloak's CVE-2025-14559). A client credentials token has sub = client_id, and pays nothing for this.
  const sub = subjectClientOf(claims.sub);
  if (sub !== clientId) {
    if (!deps.clientExists(sub)) return inactive('its subject client is deleted', 'client');
    const subjectCut = deps.cutOf(sub);
    if (subjectCut === Infinity) return inactive('its subject client is disabled or deleted', 'client');
    if (iat <= subjectCut) return inactive("its subject client's tokens were revoked", 'revoked');
  }
  return { active: true, claims };
}
