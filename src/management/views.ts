import type { Audience, AuditEvent, Client } from '../store/types.js';
import type { KeyView } from './keys.js';

/**
 * Records as every face shows them in JSON (snake_case, as OAuth and MANAGEMENT.md name them): the CLI's
 * `--json` and the admin API's answers are the same documents.
 */
/** The fields of an audience an operator sets (in audienceJson's names); the others are the store's. */
export const AUDIENCE_FIELDS = ['name', 'token_ttl', 'signing_alg'] as const;
/** The fields of a client an operator sets, but its grants and secret (in clientJson's names). */
export const CLIENT_FIELDS = ['name', 'enabled', 'token_ttl', 'quota_per_minute', 'quota_per_day'] as const;

export const audienceJson = (a: Audience) => ({
  url: a.url,
  name: a.name,
  token_ttl: a.tokenTtl,
  signing_alg: a.signingAlg,
  created_at: a.createdAt,
  updated_at: a.updatedAt,
});

export const clientJson = (c: Client) => ({
  client_id: c.id,
  name: c.name,
  enabled: c.enabled,
  token_ttl: c.tokenTtl,
  quota_per_minute: c.quotaPerMinute,
  quota_per_day: c.quotaPerDay,
  audiences: c.audiences,
  created_at: c.createdAt,
  updated_at: c.updatedAt,
  secret_rotated_at: c.secretRotatedAt,
});

export const keyJson = ({ key, status }: KeyView) => ({
  kid: key.kid,
  alg: key.alg,
  status,
  created_at: key.createdAt,
  activates_at: key.activatesAt,
  retired_at: key.retiredAt,
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
