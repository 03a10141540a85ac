import type { Selectable } from 'kysely';
import type { SigningAlg } from '../../domain/jose.js';
import type { AuthMethodName, FederatedCredential, PublicJwks } from '../../domain/client-auth/index.js';
import type { TlsIdentityKind } from '../../domain/known-client.js';
import type {
  AudiencesTable,
  AuditEventsTable,
  ClientSecretsTable,
  ClientsTable,
  OperatorsTable,
  SigningKeysTable,
} from '../schema.js';
import type {
  Audience,
  AudienceScope,
  AuditEvent,
  AuditEventType,
  Claims,
  Client,
  ClientSecret,
  Grant,
  Operator,
  OperatorRole,
  SigningKey,
  TlsClientAuth,
} from '../types.js';

// Rows into the records of types.ts (and back where a record is written whole), in one place: booleans are
// integers, int8 columns (counts, bigserial ids) may arrive as strings from PostgreSQL, lists and objects are
// JSON or space-delimited text.

const numberOrNull = (value: number | string | null): number | null =>
  value === null ? null : Number(value);

/** A grant's scopes as stored: sorted, space-delimited, each once. */
export const scopeText = (scopes: readonly string[]): string => [...new Set(scopes)].sort().join(' ');
export const scopeList = (text: string): string[] => (text === '' ? [] : text.split(' '));

export const claimsOf = (text: string | null): Claims | null =>
  text === null ? null : (JSON.parse(text) as Claims);
/** Custom claims as stored: null for none (an empty object included). */
export const claimsText = (claims: Claims | null | undefined): string | null =>
  claims == null || Object.keys(claims).length === 0 ? null : JSON.stringify(claims);

export const toAudience = (row: Selectable<AudiencesTable>): Audience => ({
  id: row.id,
  url: row.url,
  name: row.name,
  tokenTtl: numberOrNull(row.token_ttl),
  signingAlg: row.signing_alg as SigningAlg | null,
  scopes: JSON.parse(row.scopes) as AudienceScope[],
  resourceServerClientIds: JSON.parse(row.resource_server_client_ids) as string[],
  tokenProfile: (row.token_profile ?? null) as Audience['tokenProfile'],
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

export const toGrant = (row: {
  audience_url: string;
  scopes: string;
  claims: string | null;
  token_exchange: number;
}): Grant => ({
  audience: row.audience_url,
  scopes: scopeList(row.scopes),
  claims: claimsOf(row.claims),
  tokenExchange: Number(row.token_exchange) === 1,
});

/** An audience's resource servers as stored: a JSON list of client ids, sorted, each once. */
export const clientIdsText = (ids: readonly string[]): string => JSON.stringify([...new Set(ids)].sort());

export const toSecret = (row: Selectable<ClientSecretsTable>): ClientSecret => ({
  id: row.id,
  digest: row.digest,
  createdAt: row.created_at,
  expiresAt: row.expires_at,
  lastUsedAt: row.last_used_at,
});

/** Secrets oldest first (then by id), as every read returns them. */
const bySecretAge = (a: ClientSecret, b: ClientSecret): number =>
  a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;

export const toClient = (
  row: Selectable<ClientsTable>,
  grants: Grant[],
  secrets: ClientSecret[],
): Client => ({
  id: row.id,
  name: row.name,
  description: row.description,
  secretDigest: row.secret_digest,
  enabled: Number(row.enabled) === 1,
  tokenTtl: numberOrNull(row.token_ttl),
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  secretRotatedAt: row.secret_rotated_at,
  quotaPerMinute: numberOrNull(row.quota_per_minute),
  quotaPerDay: numberOrNull(row.quota_per_day),
  audiences: grants.map((g) => g.audience),
  grants,
  claims: claimsOf(row.claims),
  secrets: [...secrets].sort(bySecretAge),
  authMethod: row.token_endpoint_auth_method as AuthMethodName,
  jwks: row.jwks === null ? null : (JSON.parse(row.jwks) as PublicJwks),
  jwksUri: row.jwks_uri,
  federatedCredentials:
    row.federated_credentials === null
      ? []
      : (JSON.parse(row.federated_credentials) as FederatedCredential[]),
  dpopBoundAccessTokens: Number(row.dpop_bound_access_tokens) === 1,
  revokedBefore: row.revoked_before,
  // Null, and 0, on a store older than 0017 (`tessera migrate`'s own steps read one).
  tlsClientAuth:
    row.tls_client_auth_kind == null || row.tls_client_auth_value == null
      ? null
      : { kind: row.tls_client_auth_kind as TlsIdentityKind, value: row.tls_client_auth_value },
  certificateBoundAccessTokens: Number(row.tls_client_certificate_bound_access_tokens) === 1,
});

/** A client's tls_client_auth value as its two columns. */
export const tlsColumns = (tls: TlsClientAuth | null | undefined) => ({
  tls_client_auth_kind: tls?.kind ?? null,
  tls_client_auth_value: tls?.value ?? null,
});

/** Rows of several clients, grouped by client id (each group in the rows' order). */
export function byClient<R extends { client_id: string }, T>(
  rows: R[],
  map: (row: R) => T,
): Map<string, T[]> {
  const grouped = new Map<string, T[]>();
  for (const row of rows) {
    const list = grouped.get(row.client_id);
    if (list) list.push(map(row));
    else grouped.set(row.client_id, [map(row)]);
  }
  return grouped;
}

export const toOperator = (row: Selectable<OperatorsTable>): Operator => ({
  id: row.id,
  email: row.email,
  role: row.role as OperatorRole,
  enabled: Number(row.enabled) === 1,
  enrolled: row.password_hash !== null,
  enrollmentExpiresAt: row.enroll_expires_at,
  lastLoginAt: row.last_login_at,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

export const toSigningKey = (row: Selectable<SigningKeysTable>): SigningKey => ({
  kid: row.kid,
  alg: row.alg as SigningAlg,
  publicJwk: row.public_jwk,
  privateJwkSealed: row.private_jwk_sealed,
  createdAt: row.created_at,
  activatesAt: row.activates_at,
  retiredAt: row.retired_at,
});

/** A signing key as its row. */
export const signingKeyRow = (key: SigningKey): Selectable<SigningKeysTable> => ({
  kid: key.kid,
  alg: key.alg,
  public_jwk: key.publicJwk,
  private_jwk_sealed: key.privateJwkSealed,
  created_at: key.createdAt,
  activates_at: key.activatesAt,
  retired_at: key.retiredAt,
});

export const toAuditEvent = (row: Selectable<AuditEventsTable>): AuditEvent => ({
  id: Number(row.id),
  at: new Date(Number(row.at)).toISOString(),
  type: row.type as AuditEventType,
  clientId: row.client_id,
  audience: row.audience,
  jti: row.jti,
  reason: row.reason,
  source: row.source,
  count: numberOrNull(row.count),
  actor: row.actor,
  target: row.target,
  changes: row.changes === null ? null : (JSON.parse(row.changes) as Record<string, unknown>),
});

/**
 * The columns a patch sets: for each field it defines (undefined: left as it is), the columns its mapping
 * gives. The updates of audiences, clients and operators read their patches this way.
 */
export function columnsOf<P extends object, C>(
  patch: P,
  mapping: { [K in keyof P]-?: (value: Exclude<P[K], undefined>) => Partial<C> },
): Partial<C> {
  const columns: Partial<C> = {};
  for (const field of Object.keys(mapping) as (keyof P)[]) {
    const value = patch[field];
    if (value !== undefined) Object.assign(columns, mapping[field](value as Exclude<P[keyof P], undefined>));
  }
  return columns;
}
