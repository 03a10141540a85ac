import type { JWTVerifyGetKey } from 'jose';
import type { SigningAlg } from './jose.js';

/*
 * The token path's vocabulary: the request as it arrives, what the path knows of clients and audiences, the
 * limiters it asks, and what it answers and tells the audit trail. The token service, the client
 * authentication methods, the directory that caches clients and the limits all speak it; none of them is
 * imported for its types alone.
 */

/**
 * The request parameters Tessera reads at the endpoints where a client authenticates (RFC 6749 §4.4.2, RFC 8707
 * §2; token exchange's, RFC 8693 §2.1; the token of revocation and introspection, RFC 7009 §2.1 and RFC 7662
 * §2.1); others are ignored.
 */
export const TOKEN_PARAMS = [
  'grant_type',
  'client_id',
  'client_secret',
  'audience',
  'resource',
  'scope',
  'client_assertion_type',
  'client_assertion',
  'subject_token',
  'subject_token_type',
  'actor_token',
  'actor_token_type',
  'requested_token_type',
  'token',
  'token_type_hint',
] as const;
export type TokenParam = (typeof TOKEN_PARAMS)[number];
export type TokenParams = Partial<Record<TokenParam, string>>;

/** Empty values count as missing (RFC 6749 §3.2: "Parameters sent without a value MUST be treated as if omitted"). */
export const present = (value: string | undefined): string | undefined => (value === '' ? undefined : value);

export interface TokenRequest {
  params: TokenParams;
  /** The Authorization header, if any (client_secret_basic). */
  authorization?: string | undefined;
  /** The caller's address, for the failed-attempt limits. */
  source: string;
  /** The DPoP header, if any (RFC 9449 §4): several arrive joined by commas. */
  dpop?: string | undefined;
}

/** Tokens per minute and per day a client may get; null is no limit. */
export interface Quota {
  perMinute: number | null;
  perDay: number | null;
}

/** Issuance quotas (see limits/quotas.ts). */
export interface QuotaLimiter {
  /** Counts one token; resolves with the seconds to wait if that is over a quota, else 0. */
  take(clientId: string, quota: Quota): Promise<number>;
}

/** Failed authentications, counted per client id + source and per source (see limits/attempts.ts). */
export interface AttemptLimiter {
  /** Seconds the caller must still wait, or 0; answered from memory. */
  blockedFor(clientId: string | undefined, source: string): number;
  /** Counts a failure; the caller does not wait for it. */
  failed(clientId: string | undefined, source: string): Promise<void>;
}

export interface TokenResponse {
  access_token: string;
  /** Token exchange's answer only (RFC 8693 §2.2.1): the type of the token issued, always an access token. */
  issued_token_type?: 'urn:ietf:params:oauth:token-type:access_token';
  /** DPoP when the token is bound to the key of a DPoP proof (RFC 9449 §5). */
  token_type: 'Bearer' | 'DPoP';
  expires_in: number;
  /** The token's scopes, when it carries any (RFC 6749 §5.1). */
  scope?: string;
}

export interface KnownSecret {
  id: string;
  /** The raw 32 bytes of its SHA-256, as a latin1 string (see digestBytes). */
  digest: string;
  expiresAt: number;
}

/** A client's grant of an audience as the token path needs it: computed once, when the client is cached. */
export interface KnownGrant {
  scopes: ReadonlySet<string>;
  /** Every granted scope, sorted and space-delimited (a request without `scope` gets them); undefined: none. */
  scope: string | undefined;
  /**
   * The custom claims of this client for this audience (the grant's over the client's), serialised once as
   * the inside of a JSON object; undefined: none.
   */
  claims?: string | undefined;
  /** The grant's `token_exchange` (docs/interface.md, "Token exchange"): the client may exchange into this audience. */
  tokenExchange: boolean;
}

/** A client's grants, looked up by audience URL (a Map satisfies it; the cache keeps a smaller form). */
export interface GrantsByAudience {
  get(audience: string): KnownGrant | undefined;
  /** The audiences, in the order of the client's grants. */
  keys(): Iterable<string>;
}

/** A client as the token path sees it: what authentication and the grant check need, nothing more. */
export interface KnownClient {
  id: string;
  enabled: boolean;
  /** Its secrets: the raw 32-byte SHA-256 of each, and when it expires (ms since the epoch; Infinity: never). */
  secrets: readonly KnownSecret[];
  /** By audience URL. */
  grants: GrantsByAudience;
  tokenTtl: number | null;
  quota: Quota;
  /**
   * For a private_key_jwt client: where its public keys are, or the issuers it trusts instead (federated
   * credentials); it has no secret that works. Undefined for a client of a secret method.
   */
  keys?: ClientKeys | undefined;
  /** RFC 9449 §5.2 dpop_bound_access_tokens: it gets no token without a DPoP proof. */
  dpopBound?: boolean;
}

/**
 * Where public keys are published, to be fetched (keys/jwks-fetcher.ts): a private_key_jwt client's
 * jwks_uri; or a trusted issuer's (`issuer` set), at its jwks_uri, or found by discovery when `uri` is null.
 * An issuer's keys are cached apart from every other issuer's and client's, even at the same URL.
 */
export type KeyPlace =
  | { readonly uri: string; readonly issuer?: undefined }
  | { readonly issuer: string; readonly uri: string | null };

/** A JWK Set resolver made once from an inline set (jose's createLocalJWKSet), when the client is cached. */
interface InlineKeys {
  readonly inline: JWTVerifyGetKey;
}

/**
 * A private_key_jwt client's public keys (inline, or at its jwks_uri); or, for a client with neither, the
 * federated credentials it authenticates with (none yet: it gets no token).
 */
export type ClientKeys =
  InlineKeys | { readonly uri: string } | { readonly federated: readonly KnownFederatedCredential[] };

/**
 * One federated credential as the token path checks it (docs/interface.md, "Workload identity federation"): made
 * once, when the directory caches the client.
 */
export interface KnownFederatedCredential {
  /** `fed_…`. */
  readonly id: string;
  /** The exact `iss`. */
  readonly issuer: string;
  /** The issuer's keys: inline, or where they are fetched (`issuer` is this credential's). */
  readonly keys: InlineKeys | { readonly issuer: string; readonly uri: string | null };
  /** The exact `sub`. */
  readonly subject: string;
  /** The `aud`, or one of its values. */
  readonly audience: string;
  /** Further top-level claims, each to be strictly equal to its value. */
  readonly claims: readonly (readonly [name: string, value: string | number | boolean])[];
  /** Seconds. */
  readonly maxLifetime: number;
  /** The jti is required and single-use. */
  readonly once: boolean;
  /** What the audit trail says of a token issued by it: the credential and the platform's subject. */
  readonly note: string;
}

export interface KnownAudience {
  url: string;
  tokenTtl: number | null;
  signingAlg: SigningAlg | null;
  /**
   * The audience's `resource_server_client_ids`: the clients that receive its tokens, and so may exchange a
   * token of this audience for one of another (docs/interface.md, "Token exchange").
   */
  resourceServers: ReadonlySet<string>;
}

/**
 * The events of the token endpoint in the audit trail, written through the audit spool (audit/recorder.ts):
 * `token.exchanged` is a token issued by token exchange (RFC 8693), its reason `sub <caller> act <B>...<actor>`.
 */
export const TOKEN_EVENT_TYPES = [
  'token.issued',
  'token.exchanged',
  'token.refused',
  'token.throttled',
] as const;
type TokenEventType = (typeof TOKEN_EVENT_TYPES)[number];

/**
 * What the audit trail learns of one token request. Never a secret, never a token. A `token.throttled` entry
 * (a 429: a blocked caller, a client over its quota) is summed by the recorder, not stored one by one.
 */
export interface AuditEntry {
  /** Milliseconds since the epoch. */
  at: number;
  type: TokenEventType;
  clientId: string | null;
  audience: string | null;
  jti: string | null;
  reason: string | null;
  source: string | null;
}
