/**
 * What the audit trail records (docs/management.md, "Every change is audited"; README, "Audit trail"): the
 * types of its events, their actors, the event of a management change, the token endpoint's events as the
 * spool carries them, and how events read back.
 */

// Events of the token endpoint (the domain's, written through the audit spool, audit/recorder.ts): `token.issued`,
// `token.exchanged` (a token issued by token exchange, RFC 8693: client_id the acting client, audience the target,
// reason `sub <original caller> act <first actor>>...><acting client>`), `token.refused`, and `token.throttled`
// (refusals of a blocked caller or a client over its quota, summed per caller and minute: `count`).
import { TOKEN_EVENT_TYPES, type AuditEntry } from '../domain/token-events.js';

/**
 * Refused admin API calls (docs/management.md): a failed authentication (401, or 429 once its address is blocked) and
 * a refused authorization (403), summed per source address and minute, written through the audit spool.
 */
const ADMIN_REFUSAL_TYPES = ['admin.auth_failed', 'admin.forbidden'] as const;
/** The events the audit spool carries to the store (audit/recorder.ts). */
export const SPOOLED_EVENT_TYPES = [...TOKEN_EVENT_TYPES, ...ADMIN_REFUSAL_TYPES] as const;
/** Changes made through the management layer (any face): written in the transaction of the change. */
const CHANGE_EVENT_TYPES = [
  'audience.created',
  'audience.updated',
  'audience.deleted',
  'client.created',
  'client.updated',
  'client.secret_rotated',
  'client.secret_added',
  'client.secret_revoked',
  'client.federated_credential_added',
  'client.federated_credential_updated',
  'client.federated_credential_removed',
  'client.deleted',
  'client.tokens_revoked',
  'grant.created',
  'grant.updated',
  'grant.deleted',
  'key.rotated',
  'key.retired',
  'operator.created',
  'operator.updated',
  'operator.reset',
  'operator.enrolled',
  'operator.deleted',
  // A token put on the denylist by the client it was issued to (POST /oauth/revoke): actor client:<id>.
  'token.revoked',
] as const;
/** The console's sessions: written by the management layer as change events are (actor, target, source). */
const SESSION_EVENT_TYPES = ['operator.login', 'operator.login_failed', 'operator.logout'] as const;
export const AUDIT_EVENT_TYPES = [
  ...TOKEN_EVENT_TYPES,
  ...ADMIN_REFUSAL_TYPES,
  ...CHANGE_EVENT_TYPES,
  ...SESSION_EVENT_TYPES,
] as const;
export type AuditEventType = (typeof AUDIT_EVENT_TYPES)[number];
export type ChangeEventType = (typeof CHANGE_EVENT_TYPES)[number] | (typeof SESSION_EVENT_TYPES)[number];
export type AdminRefusalType = (typeof ADMIN_REFUSAL_TYPES)[number];
export type SpooledEventType = (typeof SPOOLED_EVENT_TYPES)[number];

/**
 * The actors of the audit trail (docs/management.md): each says what kind it is, `kind:name`. Client ids have no
 * colon, and the kind comes first, so no client id or email can make an event look as if another kind of actor
 * made it; the server itself is `tessera`, without a colon.
 */
export const SERVER_ACTOR = 'tessera';
export const actorOf = {
  client: (clientId: string): string => `client:${clientId}`,
  operator: (email: string): string => `operator:${email}`,
  cli: (user: string): string => `cli:${user}`,
} as const;

/**
 * The audit event of a management change, written by the store in the change's own transaction: there is
 * no change without its event, and no event of a change that did not happen. Never a secret, never a key.
 */
export interface ChangeAudit {
  type: ChangeEventType;
  /**
   * Who (see actors): `client:<id>`, `operator:<email>`, `cli:<os user>`, or `tessera` (automatic rotation);
   * null for nobody known (a failed login for an email no operator has).
   */
  actor: string | null;
  /** The address the change came from (the admin API's caller), or null (the CLI). */
  source: string | null;
  /** The id of what changed: a client id, an audience URL, a key id, an operator id; null for none (a login
   * attempt for an email nobody has). */
  target: string | null;
  clientId?: string | null;
  audience?: string | null;
  /** The fields that changed: `{ field: { from, to } }` for an update, the values of what was created. */
  changes: Record<string, unknown> | null;
  /** Why, for an event that is a refusal (a failed login); null or absent otherwise. */
  reason?: string | null;
}

/**
 * One audit event as the spool carries it to the store: a token endpoint's entry (the token path's AuditEntry)
 * or a refused admin call, either of them perhaps a sum. Never a secret, never a token.
 */
export interface AuditRecord extends Omit<AuditEntry, 'type'> {
  type: SpooledEventType;
  /** How many requests a summary stands for (`token.throttled`, `admin.*`); null for one request. */
  count: number | null;
}

/** One audit event as it is read back: with its id, and its time as RFC 3339 (UTC, milliseconds). */
export interface AuditEvent extends Omit<AuditRecord, 'at' | 'type'> {
  id: number;
  at: string;
  type: AuditEventType;
  /** Of a change event (see ChangeAudit); null for a token event. */
  actor: string | null;
  target: string | null;
  changes: Record<string, unknown> | null;
}

/** Where a query continues: the events that come after this one, newest first (a keyset cursor). */
export interface AuditCursor {
  at: string;
  id: number;
}

export interface AuditFilter {
  clientId?: string | undefined;
  audience?: string | undefined;
  /** One type, or any of several. */
  types?: readonly AuditEventType[] | undefined;
  /** RFC 3339 times: from `since` (inclusive) to `until` (exclusive). */
  since?: string | undefined;
  until?: string | undefined;
  /** Only events after this one in the order of the answer (newest first). */
  after?: AuditCursor | undefined;
  limit: number;
}

/** Audit events per insert statement that the recorder writes by default; stores may prepare that size. */
export const AUDIT_BATCH = 500;

/** How far one spool segment has been written to the store: its name, and the byte offset just past it. */
export interface SpoolPosition {
  segment: string;
  offset: number;
}

/** The token endpoint's outcomes in one minute (the console's chart). */
export interface TokenCount {
  /** The minute's start, RFC 3339. */
  minute: string;
  issued: number;
  /** Refused and throttled requests. */
  refused: number;
}

/** Where a call of appendAuditEvents stands in a row of calls committed together (see there). */
export interface AuditBatchPart {
  first: boolean;
  last: boolean;
}

export interface AuditStore {
  /**
   * Writes the events, and adds them to the per-minute token counts; with a spool position, records it in the
   * same transaction, so that a process that crashes after the write replays the segment from there and
   * writes no event, and counts no token, twice. Resolves true once they are committed.
   *
   * `part`: the call is one of several in a row of one flush (the spool's chunks, one after the other). An engine
   * may then hold the writes of every call but the `last` in one open transaction and commit them all with the
   * last: a held call resolves false (not committed yet); one that resolves true committed its writes and every
   * held one before it. A call that is not `first` continues the calls before it, and rejects if the engine rolled
   * back what it held of them. If any call rejects, nothing held is committed. The server's SQLite store does
   * this on its maintenance thread, and commits before the last when one of the server's own writes waits for
   * the lock (store/sqlite-maintenance.ts); the others commit every call.
   */
  appendAuditEvents(
    events: readonly AuditRecord[],
    position?: SpoolPosition,
    part?: AuditBatchPart,
  ): Promise<boolean>;
  /**
   * Makes the statements appendAuditEvents writes with ready before the first batch: compiled, and on SQLite
   * prepared on the connection. Otherwise the first batches under load compile and prepare them on the thread
   * that answers requests (SQLite preparing the 256-row insert: 17 ms of it). The server calls it at start.
   */
  prepareAuditWrites(): void;
  /** The offset recorded for a spool segment (0 if none). */
  spoolPosition(segment: string): Promise<number>;
  /** Forgets the positions of segments that were written whole and removed. */
  forgetSpoolSegments(segments: readonly string[]): Promise<void>;
  /** Newest first. */
  queryAuditEvents(filter: AuditFilter): Promise<AuditEvent[]>;
  /** Deletes at most `limit` of the oldest events older than the given time; returns how many. */
  pruneAuditEvents(olderThan: Date, limit: number): Promise<number>;
  /**
   * The token endpoint's outcomes per minute from `since` (inclusive) to `until` (exclusive), ms since the
   * epoch; only the minutes that had any, oldest first. appendAuditEvents adds to them.
   */
  tokenCounts(since: number, until: number): Promise<TokenCount[]>;
  /** Deletes the counts of minutes before the given time. */
  pruneTokenCounts(olderThan: Date): Promise<number>;
}
