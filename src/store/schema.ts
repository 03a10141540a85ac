import type { Generated } from 'kysely';

/** Table shapes as the query layer sees them. Booleans are integers and times ISO-8601 text on every engine. */
export interface Database {
  audiences: AudiencesTable;
  clients: ClientsTable;
  grants: GrantsTable;
  signing_keys: SigningKeysTable;
  changes: ChangesTable;
  audit_events: AuditEventsTable;
  audit_spool_positions: AuditSpoolPositionsTable;
  client_secrets: ClientSecretsTable;
  assertion_jtis: AssertionJtisTable;
  operators: OperatorsTable;
  operator_sessions: OperatorSessionsTable;
  token_counts: TokenCountsTable;
  revoked_tokens: RevokedTokensTable;
  client_deletions: ClientDeletionsTable;
}

/** Clients deleted whose tokens may not have expired yet: a new client of the same id starts with them cut. */
interface ClientDeletionsTable {
  id: string;
  /** RFC 3339, UTC. */
  deleted_at: string;
}

/** The denylist: tokens revoked one by one (RFC 7009), each kept until its exp. */
interface RevokedTokensTable {
  jti: string;
  /** The client it was issued to. */
  client_id: string;
  /** Seconds since the epoch: the token's exp. */
  exp: number | string;
}

/** The console's operators: people, apart from clients. Never a password, only its scrypt hash. */
export interface OperatorsTable {
  id: string;
  /** Lower case; unique. */
  email: string;
  /** `admin` or `viewer`. */
  role: string;
  enabled: number;
  /** `scrypt$...` (see management/passwords.ts), or null until the operator enrolls. */
  password_hash: string | null;
  /** SHA-256 (base64url) of the open enrollment link's token, or null when there is none. */
  enroll_digest: string | null;
  /** When that link stops working (RFC 3339). */
  enroll_expires_at: string | null;
  last_login_at: string | null;
  created_at: string;
  updated_at: string;
}

/** Console sessions: the digest of the cookie's random id (never the id itself); times in ms since the epoch. */
interface OperatorSessionsTable {
  id: string;
  operator_id: string;
  created_at: number | string;
  /** Written at most once a minute (the idle timeout's clock). */
  last_seen_at: number | string;
  /** The absolute end: created_at + the longest a session lasts. */
  expires_at: number | string;
  /** The address the session was opened from. */
  source: string | null;
}

/** The token endpoint's outcomes per minute (the console's chart), added to with each audit batch. */
interface TokenCountsTable {
  /** The minute's start, ms since the epoch. */
  minute: number | string;
  issued: number | string;
  /** token.refused and token.throttled (each throttled summary counts its requests). */
  refused: number | string;
}

/** Client assertion ids already used (private_key_jwt), until the assertion could no longer be valid. */
interface AssertionJtisTable {
  /** base64url SHA-256 of `<client id> <jti>`: fixed size whatever the jti. */
  id: string;
  /** Milliseconds since the epoch. */
  expires_at: number | string;
}

/** A client's secrets: digests only, never the secrets. */
export interface ClientSecretsTable {
  id: string;
  client_id: string;
  /** `sha256:<base64url>`. */
  digest: string;
  created_at: string;
  /** When it stops working (RFC 3339), or null for never. */
  expires_at: string | null;
  last_used_at: string | null;
}

/** The audit trail: never a secret, never a token. */
export interface AuditEventsTable {
  id: Generated<number>;
  /** Milliseconds since the epoch: 6 to 8 bytes in the row and in each index, where RFC 3339 text took 25. */
  at: number;
  type: string;
  client_id: string | null;
  audience: string | null;
  jti: string | null;
  reason: string | null;
  source: string | null;
  count: number | null;
  /** Of a change event: who, what (an id), and the fields that changed (JSON). Null for token events. */
  actor: string | null;
  target: string | null;
  changes: string | null;
}

/** How far each audit spool segment has been written to the store (see audit/spool.ts). */
interface AuditSpoolPositionsTable {
  segment: string;
  position: number;
  /** Milliseconds since the epoch. */
  updated_at: number;
}

export interface AudiencesTable {
  /** Server-made (`aud_...`), stable; set on every row since migration 0006. */
  id: string;
  url: string;
  name: string | null;
  token_ttl: number | null;
  signing_alg: string | null;
  /** The scopes it defines: JSON `[{ "name", "description" }]`, sorted by name. */
  scopes: string;
  /** The clients that receive its tokens (token exchange): JSON list of client ids, sorted (migration 0015). */
  resource_server_client_ids: Generated<string>;
  /** `auth0` or `keycloak`; null: rfc9068 (migration 0018). */
  token_profile: Generated<string | null>;
  created_at: string;
  updated_at: string;
}

export interface ClientsTable {
  id: string;
  name: string;
  description: string | null;
  secret_digest: string;
  enabled: number;
  token_ttl: number | null;
  created_at: string;
  updated_at: string;
  secret_rotated_at: string;
  quota_per_minute: number | null;
  quota_per_day: number | null;
  /** Custom claims: a JSON object, or null. */
  claims: string | null;
  /** `client_secret_basic`, `client_secret_post` or `private_key_jwt` (RFC 7591 names). */
  token_endpoint_auth_method: string;
  /** Public keys for private_key_jwt: a JWK Set as JSON, or null. */
  jwks: string | null;
  /** Where the public keys for private_key_jwt are published, or null. */
  jwks_uri: string | null;
  /** Its federated credentials: a JSON list, or null for none (migration 0012). */
  federated_credentials: string | null;
  /** 1: it gets no token without a DPoP proof (RFC 9449 §5.2; migration 0013). */
  dpop_bound_access_tokens: number;
  /** Its tokens issued at or before this time (truncated to the second) are inactive, or null (migration 0014). */
  revoked_before: string | null;
  /**
   * tls_client_auth (RFC 8705 §2.1.2): the kind of its one registered value (`subject_dn`, `san_dns`, `san_uri`,
   * `san_ip`, `san_email`) and the value as given, or both null (migration 0017).
   */
  tls_client_auth_kind: string | null;
  tls_client_auth_value: string | null;
  /** 1: its tokens are bound to its certificate (RFC 8705 §3.4; migration 0017). */
  tls_client_certificate_bound_access_tokens: number;
}

interface GrantsTable {
  client_id: string;
  audience_url: string;
  /** The scopes the grant carries: sorted, space-delimited ('' for none). */
  scopes: string;
  /** Custom claims for this audience, overriding the client's: a JSON object, or null. */
  claims: string | null;
  /** 1: its client may exchange a token it received for one of this audience (RFC 8693; migration 0015). */
  token_exchange: Generated<number>;
  created_at: string;
}

export interface SigningKeysTable {
  kid: string;
  alg: string;
  public_jwk: string;
  /** The private JWK as a compact JWE (dir + A256GCM) under the master key. */
  private_jwk_sealed: string;
  created_at: string;
  /** From this time on the key may sign; before it, it is only published. */
  activates_at: string;
  /** When it stopped signing; it stays published until every token it signed has expired. */
  retired_at: string | null;
}

/** The change feed: every write appends a row in the same transaction, so other processes can follow. */
interface ChangesTable {
  seq: Generated<number>;
  entity: string;
  key: string;
  created_at: string;
}
