/*
 * What the token path tells the audit trail: the token service's audit dependency receives these entries,
 * which the recorder spools and stores (audit/recorder.ts, store/audit-events.ts).
 */

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
