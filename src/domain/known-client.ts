import type { JWTVerifyGetKey } from 'jose';
import type { SigningAlg } from './jose.js';
import type { Quota } from './limits.js';

/*
 * What the token path knows of clients and audiences: the domain's model of them, which the directory builds
 * from the store's rows when it caches them (read-model/known-client.ts, read-model/directory.ts).
 */

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
  /**
   * The custom claims' names that a token profile's own claims would repeat (PROFILE_CLAIMS): the profile's are
   * then left out. Undefined for none, as nearly every grant has.
   */
  profileClaimsTaken?: ReadonlySet<string> | undefined;
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
  /**
   * A tls_client_auth client (RFC 8705 §2.1.2): the one value its certificate must carry. Undefined for a client
   * of any other method.
   */
  tls?: KnownTlsIdentity | undefined;
  /**
   * A self_signed_tls_client_auth client (RFC 8705 §2.2): the x5t#S256 (base64url SHA-256 of the DER) of the first
   * certificate of each `x5c` of its jwks; or where that set is published (its jwks_uri), fetched as a
   * private_key_jwt client's keys are. Undefined for a client of any other method.
   */
  selfSigned?: ReadonlySet<string> | { readonly uri: string } | undefined;
  /** RFC 8705 §3 tls_client_certificate_bound_access_tokens: its tokens are bound to the certificate it asked with. */
  certificateBound?: boolean;
}

/** The kinds of value a tls_client_auth client registers exactly one of (RFC 8705 §2.1.2), by their field's suffix. */
export const TLS_IDENTITY_KINDS = ['subject_dn', 'san_dns', 'san_uri', 'san_ip', 'san_email'] as const;
export type TlsIdentityKind = (typeof TLS_IDENTITY_KINDS)[number];

/** A tls_client_auth client's registered value, as the token path compares it. */
export interface KnownTlsIdentity {
  readonly kind: TlsIdentityKind;
  /**
   * subject_dn: the canonical form of the registered DN (mtls/dn.ts, canonicalDn); san_ip: the address in Node's
   * canonical form (IPv6 compressed, lower case); san_dns and san_email: lower case; san_uri: as registered.
   */
  readonly value: string;
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
  /** The claims its tokens carry beyond RFC 9068's (token-profiles.ts); undefined: rfc9068. */
  tokenProfile?: 'auth0' | 'keycloak';
}
