import type { JWTPayload } from 'jose';
import { invalidRequest, invalidScope, invalidTarget } from '../errors.js';
import type { KnownAudience, KnownClient, KnownGrant } from '../known-client.js';
import type { OwnTokenDeps } from '../own-tokens.js';
import { present, type TokenParams, type TokenResponse } from '../token-request.js';
import { SCOPE_TOKEN } from '../validate.js';

/*
 * Grant types (docs/design.md, "Where the next capabilities plug in"): each is a handler the token service
 * dispatches on by `grant_type`, as fosite and oidc-provider do. A handler is given the authenticated client and
 * the request's parameters, checks what its grant requires, and returns the claims to sign; what every grant
 * shares (client authentication before it, the DPoP proof, the quota, signing, the answer and the audit trail
 * after it) stays in the token service.
 */

/** RFC 8693 §4.1: the acting party, nesting the one that acted before it. */
export interface ActClaim {
  sub: string;
  act?: ActClaim;
}

/** The claims a grant handler returns: RFC 9068 §2.2's, the scopes, and for an exchange the actor chain. */
export interface GrantClaims extends JWTPayload {
  iss: string;
  sub: string;
  /** A registered audience's URL: the token service signs with its algorithm and the grant's custom claims. */
  aud: string;
  client_id: string;
  iat: number;
  exp: number;
  jti: string;
  scope?: string;
  act?: ActClaim;
  /** RFC 7800: what the token is bound to, a member per proof of possession (possession/). */
  cnf?: Record<string, string>;
}

/** What a grant handler reads: the audiences, the clock, token ids, and (token exchange) this server's tokens. */
interface GrantDeps {
  findAudience(url: string): KnownAudience | undefined;
  /** Milliseconds since the epoch. */
  now(): number;
  newJti(): string;
  issuer: string;
  defaultTtl: number;
  /** What verifying this server's own tokens reads, all in memory (own-tokens.ts); token exchange needs it. */
  ownTokens?: OwnTokenDeps | undefined;
}

/**
 * What a grant handler decided: the claims to sign, the audience and grant it checked them against (whose
 * signing algorithm and custom claims the token service signs with, without looking them up again), and what
 * its answer and its audit event say beyond what every grant's do.
 */
export interface GrantResult {
  claims: GrantClaims;
  audience: KnownAudience;
  grant: KnownGrant;
  /**
   * Whether the new token must be bound to a DPoP key whatever the client's registration says (docs/interface.md: a
   * sender-constrained token never becomes a bearer token through token exchange).
   */
  dpopRequired?: boolean;
  /**
   * Whether the new token must be bound to a TLS client certificate whatever the client's registration says (a
   * certificate-bound subject token, RFC 8705 §3: the same rule as DPoP's).
   */
  certificateRequired?: boolean;
  /** The audit event of the token: token.exchanged for a token exchange (RFC 8693), token.issued otherwise. */
  type: 'token.issued' | 'token.exchanged';
  /** What the audit trail says of the token beyond its client and audience (an exchange: who acted). */
  note?: string;
  /** The grant's own members of the answer (RFC 8693 §2.2.1: issued_token_type). */
  answer?: Pick<TokenResponse, 'issued_token_type'>;
}

/**
 * One grant type: synchronous (everything it reads is in memory once the client is authenticated), so the
 * warm path awaits nothing more than it did. Throws an OAuthError for a refusal.
 */
export type GrantHandler = (params: TokenParams, client: KnownClient, deps: GrantDeps) => GrantResult;

/** `audience` (Auth0, Hydra) and `resource` (RFC 8707) name the same thing; one of them, not both. */
export function requestedAudience(params: TokenParams): string {
  const audience = present(params.audience);
  const resource = present(params.resource);
  if (audience !== undefined && resource !== undefined) {
    throw invalidRequest('send audience or resource, not both');
  }
  const value = audience ?? resource;
  if (value === undefined) throw invalidRequest('audience is required');
  return value;
}

/**
 * The scopes a token carries (docs/interface.md, Scopes): without `scope` in the request every granted one; with
 * it exactly those asked for (each once, sorted), each granted, else invalid_scope naming the first that is not.
 */
export function scopeOf(grant: KnownGrant, requested: string | undefined): string | undefined {
  if (requested === undefined) return grant.scope;
  const asked = requested.split(' ');
  for (const token of asked) {
    if (!SCOPE_TOKEN.test(token))
      // "section", not the sign: an error_description is printable ASCII only (RFC 6749 §5.2).
      throw invalidScope('scope must be scope tokens separated by single spaces (RFC 6749 section 3.3)');
    if (!grant.scopes.has(token))
      throw invalidScope(`scope ${token.slice(0, 128)} is not granted to this client for this audience`);
  }
  return [...new Set(asked)].sort().join(' ');
}

/** The audience asked for and the client's grant of it: invalid_target when it is not registered, or not granted. */
export function grantedAudience(
  url: string,
  client: KnownClient,
  deps: Pick<GrantDeps, 'findAudience'>,
): { audience: KnownAudience; granted: KnownGrant } {
  const audience = deps.findAudience(url);
  if (!audience) throw invalidTarget('the requested audience is not registered');
  const granted = client.grants.get(audience.url);
  if (!granted) throw invalidTarget('the requested audience is not granted to this client');
  return { audience, granted };
}

/**
 * RFC 9068 §2.2's claims (iss, exp, aud, sub, client_id, iat, jti) of a token for `sub` at `audience`, issued to
 * `client` now: it lives the client's TTL, else the audience's, else the server's, and never past `notAfter`
 * (seconds; an exchanged token never outlives its subject token).
 */
export function accessTokenClaims(
  deps: GrantDeps,
  client: KnownClient,
  audience: KnownAudience,
  sub: string,
  notAfter = Infinity,
): GrantClaims {
  const ttl = client.tokenTtl ?? audience.tokenTtl ?? deps.defaultTtl;
  const iat = Math.floor(deps.now() / 1000);
  return {
    iss: deps.issuer,
    sub,
    aud: audience.url,
    client_id: client.id,
    iat,
    exp: Math.min(iat + ttl, notAfter),
    jti: deps.newJti(),
  };
}
