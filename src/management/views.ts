import type { Audience, AuditEvent, Client, ClientSecret, Grant, Operator } from '../store/types.js';
import type { FederatedCredential } from '../domain/client-auth/index.js';
import { TLS_IDENTITY_FIELDS } from '../domain/client-auth/certificate-registration.js';
import type { TlsIdentityKind } from '../domain/known-client.js';
import type { KeyView, Retirement, RotationResult } from './keys.js';

/*
 * Records as every face shows them in JSON (snake_case, as OAuth and docs/management.md name them): the CLI's
 * `--json` and the admin API's answers are the same documents, made here and nowhere else. A view is made of
 * records and operation results; no operation's rule is here, and nothing here reads the store.
 */

export { etagOf } from './etag.js';

/** The fields of an audience an operator sets (in audienceJson's names); the others are the store's. */
export const AUDIENCE_FIELDS = [
  'name',
  'token_ttl',
  'signing_alg',
  'scopes',
  'resource_server_client_ids',
  'token_profile',
] as const;
/** The fields of a client an operator sets, but its grants and secret (in clientJson's names). */
export const CLIENT_FIELDS = [
  'name',
  'description',
  'enabled',
  'token_ttl',
  'quota_per_minute',
  'quota_per_day',
  'claims',
  'token_endpoint_auth_method',
  'jwks',
  'jwks_uri',
  'dpop_bound_access_tokens',
  ...TLS_IDENTITY_FIELDS,
  'tls_client_certificate_bound_access_tokens',
] as const;

export const audienceJson = (a: Audience) => ({
  id: a.id,
  identifier: a.url,
  name: a.name,
  token_ttl: a.tokenTtl,
  signing_alg: a.signingAlg,
  scopes: a.scopes,
  resource_server_client_ids: a.resourceServerClientIds,
  token_profile: a.tokenProfile ?? 'rfc9068',
  created_at: a.createdAt,
  updated_at: a.updatedAt,
});

/** A client's tls_client_auth_<kind> as registered, or null (of another kind, or not tls_client_auth). */
const tlsValue = (c: Client, kind: TlsIdentityKind): string | null =>
  c.tlsClientAuth?.kind === kind ? c.tlsClientAuth.value : null;

export const clientJson = (c: Client) => ({
  client_id: c.id,
  name: c.name,
  description: c.description,
  enabled: c.enabled,
  token_endpoint_auth_method: c.authMethod,
  jwks: c.jwks,
  jwks_uri: c.jwksUri,
  dpop_bound_access_tokens: c.dpopBoundAccessTokens,
  tls_client_auth_subject_dn: tlsValue(c, 'subject_dn'),
  tls_client_auth_san_dns: tlsValue(c, 'san_dns'),
  tls_client_auth_san_uri: tlsValue(c, 'san_uri'),
  tls_client_auth_san_ip: tlsValue(c, 'san_ip'),
  tls_client_auth_san_email: tlsValue(c, 'san_email'),
  tls_client_certificate_bound_access_tokens: c.certificateBoundAccessTokens,
  token_ttl: c.tokenTtl,
  quota_per_minute: c.quotaPerMinute,
  quota_per_day: c.quotaPerDay,
  claims: c.claims,
  audiences: c.audiences,
  created_at: c.createdAt,
  updated_at: c.updatedAt,
  secret_rotated_at: c.secretRotatedAt,
  revoked_before: c.revokedBefore,
});

/** What revoke-tokens did: the moment before which (to the second) the client's tokens are inactive. */
export const tokensRevokedJson = (c: Client) => ({ revoked_before: c.revokedBefore! });

/** The fields of a federated credential that can be changed (in federatedCredentialJson's names). */
export const FEDERATED_FIELDS = [
  'name',
  'issuer',
  'jwks',
  'jwks_uri',
  'subject',
  'audience',
  'claims',
  'max_lifetime',
  'once',
] as const;

export const federatedCredentialJson = (f: FederatedCredential) => ({
  id: f.id,
  name: f.name,
  issuer: f.issuer,
  jwks: f.jwks,
  jwks_uri: f.jwksUri,
  subject: f.subject,
  audience: f.audience,
  claims: f.claims,
  max_lifetime: f.maxLifetime,
  once: f.once,
  created_at: f.createdAt,
  updated_at: f.updatedAt,
});

export const grantJson = (clientId: string, audience: Pick<Audience, 'id' | 'url'>, grant: Grant) => ({
  client_id: clientId,
  audience_id: audience.id,
  audience: audience.url,
  scopes: grant.scopes,
  claims: grant.claims,
  token_exchange: grant.tokenExchange,
});

export const secretJson = (s: ClientSecret) => ({
  id: s.id,
  created_at: s.createdAt,
  expires_at: s.expiresAt,
  last_used_at: s.lastUsedAt,
});

export const keyJson = ({ key, status }: KeyView) => ({
  kid: key.kid,
  alg: key.alg,
  status,
  created_at: key.createdAt,
  activates_at: key.activatesAt,
  retires_at: key.retiredAt,
});

/** What `keys rotate` did for one algorithm (the admin API's POST /keys/rotate lists them as its items). */
export const rotationJson = (r: RotationResult) => ({
  alg: r.alg,
  kid: r.kid,
  activates_at: r.activatesAt,
  already_scheduled: r.alreadyScheduled,
  retiring: r.retiring,
});

/** What `keys retire` did: the key retired, the key that signs now, the keys of its algorithm afterwards. */
export const retirementJson = (r: Retirement) => ({
  retired: r.retired.kid,
  signing: r.signing,
  keys: r.keys.map(keyJson),
});

/** The fields of an operator that can be changed (in operatorJson's names). */
export const OPERATOR_FIELDS = ['role', 'enabled'] as const;

export const operatorJson = (o: Operator) => ({
  id: o.id,
  email: o.email,
  role: o.role,
  enabled: o.enabled,
  enrolled: o.enrolled,
  enrollment_expires_at: o.enrollmentExpiresAt,
  last_login_at: o.lastLoginAt,
  created_at: o.createdAt,
  updated_at: o.updatedAt,
});

/** An operator with the one-time link that enrolls them (operators.addOperator, resetOperator). */
export const enrollmentJson = (enrollment: { operator: Operator; url: string }) => ({
  ...operatorJson(enrollment.operator),
  enrollment_url: enrollment.url,
});

export const auditEventJson = (e: AuditEvent) => ({
  id: e.id,
  time: e.at,
  type: e.type,
  client_id: e.clientId,
  audience: e.audience,
  jti: e.jti,
  source: e.source,
  reason: e.reason,
  count: e.count,
  actor: e.actor,
  target: e.target,
  changes: e.changes,
});
