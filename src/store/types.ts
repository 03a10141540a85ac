import type { SigningAlg } from '../domain/algorithms.js';
import type { AuthMethodName, PublicJwks } from '../domain/client-keys.js';

/** A permission an audience defines (RFC 6749 §3.3 scope-token syntax). */
export interface AudienceScope {
  name: string;
  description: string | null;
}

export interface Audience {
  /** Server-made and stable (`aud_...`): the admin API's paths use it. */
  id: string;
  url: string;
  name: string | null;
  /** Token lifetime in seconds for this audience, or null for the server default. */
  tokenTtl: number | null;
  /** JWS algorithm for this audience, or null for the server default. */
  signingAlg: SigningAlg | null;
  /** The scopes it defines, sorted by name. */
  scopes: AudienceScope[];
  createdAt: string;
  updatedAt: string;
}

/** A client's grant of one audience. */
export interface Grant {
  audience: string;
  /** The audience's scopes the client may have, sorted. */
  scopes: string[];
  /** Custom claims for tokens of this audience, over the client's; null for none. */
  claims: Claims | null;
}

/** Custom claims: a JSON object (INTERFACE.md, "Custom claims"). */
export type Claims = Record<string, unknown>;

/** One of a client's secrets (its digest; the secret itself is never stored). */
export interface ClientSecret {
  id: string;
  /** `sha256:<base64url>`. */
  digest: string;
  createdAt: string;
  /** When it stops working, or null for never. */
  expiresAt: string | null;
  /** When it last authenticated a token request (written at most once a minute), or null. */
  lastUsedAt: string | null;
}

export { MAX_LIVE_SECRETS } from '../domain/secrets.js';

export interface Client {
  id: string;
  name: string;
  description: string | null;
  /** `sha256:<base64url>`; the secret itself is never stored. */
  secretDigest: string;
  enabled: boolean;
  /** Token lifetime in seconds for this client, or null (then the audience's, then the default). */
  tokenTtl: number | null;
  createdAt: string;
  updatedAt: string;
  secretRotatedAt: string;
  /** Tokens per minute, or null for no limit. */
  quotaPerMinute: number | null;
  /** Tokens per day, or null for no limit. */
  quotaPerDay: number | null;
  /** Audience URLs granted to this client, sorted. */
  audiences: string[];
  /** The same grants with their scopes, in the same order. */
  grants: Grant[];
  /** Custom claims in every token of this client; null for none. */
  claims: Claims | null;
  /** Its secrets, oldest first, expired ones included until they are pruned. */
  secrets: ClientSecret[];
  /** How it authenticates at the token endpoint (RFC 7591 `token_endpoint_auth_method`). */
  authMethod: AuthMethodName;
  /** Its public keys for private_key_jwt, inline; null when none (or they are at jwksUri). */
  jwks: PublicJwks | null;
  /** Where its public keys for private_key_jwt are published; null when none. */
  jwksUri: string | null;
}

export interface SigningKey {
  kid: string;
  alg: SigningAlg;
  publicJwk: string;
  privateJwkSealed: string;
  createdAt: string;
  activatesAt: string;
  retiredAt: string | null;
}

export type ChangeEntity = 'client' | 'audience' | 'grant' | 'key';

export interface Change {
  seq: number;
  entity: ChangeEntity;
  /** The client id, the audience URL, `<client id> <audience URL>` for a grant, or the kid. */
  key: string;
}

export interface NewAudience {
  /** Made by the store when left out. */
  id?: string;
  url: string;
  name: string | null;
  tokenTtl: number | null;
  signingAlg: SigningAlg | null;
  scopes?: AudienceScope[];
}

export interface NewClient {
  id: string;
  name: string;
  description?: string | null;
  /** Its first secret; null for a client without secrets (private_key_jwt). */
  secretDigest: string | null;
  /** client_secret_basic when left out. */
  authMethod?: AuthMethodName;
  jwks?: PublicJwks | null;
  jwksUri?: string | null;
  tokenTtl: number | null;
  quotaPerMinute?: number | null;
  quotaPerDay?: number | null;
  /** True when left out. */
  enabled?: boolean;
  audiences: string[];
  /** The scopes of some of those grants (by audience URL); none for the others. */
  scopes?: Record<string, string[]>;
  /** The custom claims of some of those grants (by audience URL). */
  grantClaims?: Record<string, Claims>;
  claims?: Claims | null;
}

/** The fields of an audience to change; those left undefined keep their value. */
export interface AudiencePatch {
  name?: string | null;
  tokenTtl?: number | null;
  signingAlg?: SigningAlg | null;
  scopes?: AudienceScope[];
}

/** The fields of a client to change; those left undefined keep their value. */
export interface ClientPatch {
  name?: string;
  description?: string | null;
  enabled?: boolean;
  tokenTtl?: number | null;
  quotaPerMinute?: number | null;
  quotaPerDay?: number | null;
  claims?: Claims | null;
  authMethod?: AuthMethodName;
  jwks?: PublicJwks | null;
  jwksUri?: string | null;
}

export interface AudienceStore {
  addAudience(audience: NewAudience, audit?: ChangeAudit): Promise<Audience>;
  findAudience(url: string): Promise<Audience | undefined>;
  findAudienceById(id: string): Promise<Audience | undefined>;
  listAudiences(): Promise<Audience[]>;
  /**
   * Changes the fields given, stamps updated_at, records a change. New scopes take those it no longer defines
   * from every grant of it, in the same transaction.
   */
  updateAudience(url: string, patch: AudiencePatch, audit?: ChangeAudit): Promise<Audience>;
  /** Removes the audience and every grant of it. */
  removeAudience(url: string, audit?: ChangeAudit): Promise<void>;
}

export interface ClientStore {
  /** Creates the client with its grants in one transaction. */
  createClient(client: NewClient, audit?: ChangeAudit): Promise<Client>;
  /** One client with its grants (the CLI's `client show`); the same query as findClients. */
  findClient(id: string): Promise<Client | undefined>;
  /**
   * The one query of the token path, made only on a cache miss: the clients among `ids` that exist, in no
   * particular order. The cache asks at once for every id that missed in one batch of token requests.
   */
  findClients(ids: readonly string[]): Promise<Client[]>;
  listClients(): Promise<Client[]>;
  /**
   * A page of clients in id order: those after `after` (an id), at most `limit`; with `search`, only those
   * whose id or name contains it (case-insensitive for ASCII letters).
   */
  listClientsPage(after: string | null, limit: number, search?: string): Promise<Client[]>;
  countClients(): Promise<number>;
  /**
   * A page of client ids, nothing else, in id order (code-unit order): those after `after`, at most `limit`.
   * The server reads every id this way at start (store/client-ids.ts), so it must stay one narrow query.
   */
  listClientIds(after: string | null, limit: number): Promise<string[]>;
  setClientSecret(id: string, secretDigest: string, audit?: ChangeAudit): Promise<Client>;
  /**
   * Adds a secret, made now; the client's other secrets that would outlive now + `othersGraceSeconds` expire
   * then (0: they stop at once; null: they stay as they are). Secrets expired by now are pruned. Refused
   * (conflict, resource `secret`) when the client would hold more than MAX_LIVE_SECRETS live ones.
   */
  addClientSecret(
    clientId: string,
    /** It expires at `expiresAt`, or `expiresInSeconds` after it is made (the store's clock), or never. */
    secret: { id: string; digest: string; expiresAt: string | null; expiresInSeconds?: number },
    othersGraceSeconds: number | null,
    audit?: ChangeAudit,
  ): Promise<Client>;
  /** Deletes one secret (not_found, resource `secret`, when the client has no such secret). */
  revokeClientSecret(clientId: string, secretId: string, audit?: ChangeAudit): Promise<Client>;
  /**
   * Records that these secrets were used at `at` (off the token path, in batches of any size, a statement per
   * thousand); never moves a time back; no change for the feed.
   */
  markSecretsUsed(ids: readonly string[], at: string): Promise<void>;
  /**
   * Records a client assertion's id (a digest of client id and jti) as used until `expiresAt` (ms since the
   * epoch): true if it was not in use, false if it is (a replay). One statement, outside any transaction; an
   * entry past its time counts as free.
   */
  useAssertionJti(id: string, expiresAt: number): Promise<boolean>;
  /** Deletes at most `limit` assertion ids whose time is over (by `now`, ms); returns how many. */
  pruneAssertionJtis(now: number, limit: number): Promise<number>;
  setClientEnabled(id: string, enabled: boolean, audit?: ChangeAudit): Promise<Client>;
  setClientQuota(
    id: string,
    quota: { perMinute: number | null; perDay: number | null },
    audit?: ChangeAudit,
  ): Promise<Client>;
  deleteClient(id: string, audit?: ChangeAudit): Promise<void>;
  /**
   * Changes the fields given (not the secret), stamps updated_at, records a change. A change of method to
   * private_key_jwt deletes the client's secrets in the same transaction.
   */
  updateClient(id: string, patch: ClientPatch, audit?: ChangeAudit): Promise<Client>;
}

export interface GrantStore {
  /** Returns false if the grant already existed. */
  addGrant(clientId: string, audienceUrl: string, audit?: ChangeAudit): Promise<boolean>;
  /** Creates the grant with these scopes and claims, or sets them; returns true if it created it. */
  putGrant(
    clientId: string,
    audienceUrl: string,
    scopes: string[],
    audit?: ChangeAudit,
    claims?: Claims | null,
  ): Promise<boolean>;
  removeGrant(clientId: string, audienceUrl: string, audit?: ChangeAudit): Promise<void>;
}

/** What one key operation writes: a new key, and new times for existing ones. */
export interface KeyChange {
  insert?: SigningKey;
  /** `retiredAt: null` cancels a scheduled retirement. */
  update?: { kid: string; activatesAt?: string; retiredAt?: string | null }[];
}

export interface KeyStore {
  listSigningKeys(): Promise<SigningKey[]>;
  insertSigningKey(key: SigningKey): Promise<void>;
  /**
   * Reads the keys and writes what `plan` makes of them, in one transaction serialised with every other
   * writer, so two instances deciding at once (first key, rotation) cannot both act. A plan that returns
   * undefined writes nothing. Returns what was written.
   */
  changeSigningKeys(
    plan: (keys: SigningKey[]) => KeyChange | undefined,
    /** The audit event of the change the plan made, written in its transaction. */
    audit?: (change: KeyChange) => ChangeAudit,
  ): Promise<KeyChange | undefined>;
}

export interface ChangeFeed {
  /** Changes after `seq`, oldest first. */
  changesSince(seq: number, limit: number): Promise<Change[]>;
  latestChange(): Promise<number>;
  /** Drops changes older than the given time; followers are expected to have read them long before. */
  pruneChanges(olderThan: Date): Promise<number>;
  /**
   * Calls `listener` soon after any change commits, where the engine can push (PostgreSQL LISTEN/NOTIFY),
   * and after a lost connection comes back. Followers still poll: a push is a shortcut, not a guarantee.
   */
  subscribe?(listener: () => void, onError: (error: unknown) => void): Promise<() => Promise<void>>;
}

/**
 * What an audit event records. The token endpoint's: `token.issued`, `token.refused`, and `token.throttled`
 * (refusals of a blocked caller or a client over its quota, summed per caller and minute: `count`).
 */
/** Events of the token endpoint: written through the audit spool (audit/recorder.ts). */
export const TOKEN_EVENT_TYPES = ['token.issued', 'token.refused', 'token.throttled'] as const;
/**
 * Refused admin API calls (MANAGEMENT.md): a failed authentication (401, or 429 once its address is blocked) and
 * a refused authorization (403), summed per source address and minute, written through the audit spool.
 */
export const ADMIN_REFUSAL_TYPES = ['admin.auth_failed', 'admin.forbidden'] as const;
/** The events the audit spool carries to the store (audit/recorder.ts). */
export const SPOOLED_EVENT_TYPES = [...TOKEN_EVENT_TYPES, ...ADMIN_REFUSAL_TYPES] as const;
/** Changes made through the management layer (any face): written in the transaction of the change. */
export const CHANGE_EVENT_TYPES = [
  'audience.created',
  'audience.updated',
  'audience.deleted',
  'client.created',
  'client.updated',
  'client.secret_rotated',
  'client.secret_added',
  'client.secret_revoked',
  'client.deleted',
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
] as const;
/** The console's sessions: written by the management layer as change events are (actor, target, source). */
export const SESSION_EVENT_TYPES = ['operator.login', 'operator.login_failed', 'operator.logout'] as const;
export const AUDIT_EVENT_TYPES = [
  ...TOKEN_EVENT_TYPES,
  ...ADMIN_REFUSAL_TYPES,
  ...CHANGE_EVENT_TYPES,
  ...SESSION_EVENT_TYPES,
] as const;
export type AuditEventType = (typeof AUDIT_EVENT_TYPES)[number];
export type ChangeEventType = (typeof CHANGE_EVENT_TYPES)[number] | (typeof SESSION_EVENT_TYPES)[number];
export type TokenEventType = (typeof TOKEN_EVENT_TYPES)[number];
export type AdminRefusalType = (typeof ADMIN_REFUSAL_TYPES)[number];
export type SpooledEventType = (typeof SPOOLED_EVENT_TYPES)[number];

/**
 * The actors of the audit trail (MANAGEMENT.md): each says what kind it is, `kind:name`. Client ids have no
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

/** One audit event as the spool carries it to the store. Never a secret, never a token. */
export interface AuditRecord {
  /** Milliseconds since the epoch. */
  at: number;
  type: SpooledEventType;
  clientId: string | null;
  audience: string | null;
  jti: string | null;
  reason: string | null;
  source: string | null;
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

export interface AuditStore {
  /**
   * Writes the events, and adds them to the per-minute token counts; with a spool position, records it in the
   * same transaction, so that a process that crashes after the write replays the segment from there and
   * writes no event, and counts no token, twice.
   */
  appendAuditEvents(events: readonly AuditRecord[], position?: SpoolPosition): Promise<void>;
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

/** The token endpoint's outcomes in one minute (the console's chart). */
export interface TokenCount {
  /** The minute's start, RFC 3339. */
  minute: string;
  issued: number;
  /** Refused and throttled requests. */
  refused: number;
}

export type OperatorRole = 'admin' | 'viewer';

/** A person who manages Tessera in the console. */
export interface Operator {
  id: string;
  /** Lower case. */
  email: string;
  role: OperatorRole;
  enabled: boolean;
  /** Whether a password is set (the hash itself is read only by findOperatorCredentials). */
  enrolled: boolean;
  /** When the open enrollment link stops working, or null when there is none. */
  enrollmentExpiresAt: string | null;
  lastLoginAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface NewOperator {
  id: string;
  email: string;
  role: OperatorRole;
  /** The enrollment link's token digest and expiry. */
  enrollDigest: string;
  enrollExpiresAt: string;
}

/** What may change of an operator; undefined fields stay as they are. */
export interface OperatorPatch {
  role?: OperatorRole;
  /** false ends the operator's sessions in the same transaction. */
  enabled?: boolean;
  /**
   * A new enrollment link: the password is cleared and the operator's sessions end, in the same transaction
   * (`tessera operator reset`).
   */
  enrollment?: { digest: string; expiresAt: string };
}

/** A console session as the store keeps it: times in ms since the epoch. */
export interface OperatorSession {
  /** The digest of the cookie's id. */
  id: string;
  operatorId: string;
  createdAt: number;
  lastSeenAt: number;
  expiresAt: number;
  source: string | null;
}

export interface OperatorStore {
  /** Refused (conflict, resource `operator`) when the email is taken. */
  addOperator(operator: NewOperator, audit?: ChangeAudit): Promise<Operator>;
  /** By id or by email (lower case). */
  findOperator(idOrEmail: string): Promise<Operator | undefined>;
  /** An operator with its password hash, by email: login only. */
  findOperatorCredentials(
    email: string,
  ): Promise<{ operator: Operator; passwordHash: string | null } | undefined>;
  /** The operator whose open enrollment link has this digest (expired or not). */
  findOperatorByEnrollment(digest: string): Promise<Operator | undefined>;
  /** By email. */
  listOperators(): Promise<Operator[]>;
  /** not_found (resource `operator`) when there is no such operator. */
  updateOperator(id: string, patch: OperatorPatch, audit?: ChangeAudit): Promise<Operator>;
  /** Deletes the operator and its sessions. */
  removeOperator(id: string, audit?: ChangeAudit): Promise<void>;
  /**
   * Sets the password of the operator whose open link has this digest, if the link has not expired by `now`
   * and the operator is enabled, and closes the link, in one transaction: a link works once, even when two
   * requests present it at the same moment. Undefined when it does not work.
   */
  enrollOperator(
    digest: string,
    passwordHash: string,
    now: string,
    audit: (operator: Operator) => ChangeAudit,
  ): Promise<Operator | undefined>;
  /** Opens a session, stamps the operator's last login, and writes the login's event, in one transaction. */
  createOperatorSession(session: OperatorSession, audit?: ChangeAudit): Promise<void>;
  /** A session and its operator, if the session exists (whatever its times: the caller judges them). */
  findOperatorSession(id: string): Promise<{ session: OperatorSession; operator: Operator } | undefined>;
  /** Moves a session's last-seen time forward (never back). */
  touchOperatorSession(id: string, at: number): Promise<void>;
  /** Ends a session; with an audit event (logout) in the same transaction. */
  deleteOperatorSession(id: string, audit?: ChangeAudit): Promise<void>;
  /** Deletes sessions past their end or idle since before `idleBefore`; returns how many. */
  pruneOperatorSessions(now: number, idleBefore: number): Promise<number>;
  /** Writes an event that goes with no change (a failed login). */
  recordEvent(audit: ChangeAudit): Promise<void>;
}

export interface Store
  extends AudienceStore, ClientStore, GrantStore, KeyStore, ChangeFeed, AuditStore, OperatorStore {
  readonly engine: 'sqlite' | 'postgres';
  /** Runs pending migrations (all, or up to and including `upTo`); returns the names it ran. */
  migrate(upTo?: string): Promise<string[]>;
  /** The schema's migrations: applied, pending (known to this code, not applied), unknown (applied, newer). */
  schema(): Promise<SchemaState>;
  /**
   * Runs `fn` with a store bound to one transaction: all its operations commit together when `fn` resolves,
   * and none when it throws. Called on a bound store, it joins the transaction already open.
   */
  transaction<T>(fn: (store: Store) => Promise<T>): Promise<T>;
  /** Resolves if the store answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** A stable `code` that the CLI and HTTP layers switch on. */
export interface SchemaState {
  applied: string[];
  pending: string[];
  unknown: string[];
}

/** What a StoreError is about: the management layer names its error after it (client_not_found, ...). */
export type StoreResource = 'audience' | 'client' | 'grant' | 'signing_key' | 'secret' | 'operator';

export class StoreError extends Error {
  override name = 'StoreError';
  constructor(
    readonly code: 'not_found' | 'conflict',
    message: string,
    readonly resource?: StoreResource,
  ) {
    super(message);
  }
}
