import type { SigningAlg } from '../domain/algorithms.js';
import type { AuditEntry } from '../domain/token-service.js';

export interface Audience {
  url: string;
  name: string | null;
  /** Token lifetime in seconds for this audience, or null for the server default. */
  tokenTtl: number | null;
  /** JWS algorithm for this audience, or null for the server default. */
  signingAlg: SigningAlg | null;
  createdAt: string;
  updatedAt: string;
}

export interface Client {
  id: string;
  name: string;
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
  url: string;
  name: string | null;
  tokenTtl: number | null;
  signingAlg: SigningAlg | null;
}

export interface NewClient {
  id: string;
  name: string;
  secretDigest: string;
  tokenTtl: number | null;
  quotaPerMinute?: number | null;
  quotaPerDay?: number | null;
  audiences: string[];
}

export interface AudienceStore {
  addAudience(audience: NewAudience): Promise<Audience>;
  findAudience(url: string): Promise<Audience | undefined>;
  listAudiences(): Promise<Audience[]>;
  /** Removes the audience and every grant of it. */
  removeAudience(url: string): Promise<void>;
}

export interface ClientStore {
  /** Creates the client with its grants in one transaction. */
  createClient(client: NewClient): Promise<Client>;
  /** One client with its grants (the CLI's `client show`); the same query as findClients. */
  findClient(id: string): Promise<Client | undefined>;
  /**
   * The one query of the token path, made only on a cache miss: the clients among `ids` that exist, in no
   * particular order. The cache asks at once for every id that missed in one batch of token requests.
   */
  findClients(ids: readonly string[]): Promise<Client[]>;
  listClients(): Promise<Client[]>;
  countClients(): Promise<number>;
  setClientSecret(id: string, secretDigest: string): Promise<Client>;
  setClientEnabled(id: string, enabled: boolean): Promise<Client>;
  setClientQuota(id: string, quota: { perMinute: number | null; perDay: number | null }): Promise<Client>;
  deleteClient(id: string): Promise<void>;
}

export interface GrantStore {
  /** Returns false if the grant already existed. */
  addGrant(clientId: string, audienceUrl: string): Promise<boolean>;
  removeGrant(clientId: string, audienceUrl: string): Promise<void>;
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
  changeSigningKeys(plan: (keys: SigningKey[]) => KeyChange | undefined): Promise<KeyChange | undefined>;
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

/** One thing that happened at the token endpoint (the token service's audit entry, as stored). */
export type AuditEvent = AuditEntry;

export interface AuditFilter {
  clientId?: string | undefined;
  audience?: string | undefined;
  outcome?: AuditEvent['outcome'] | undefined;
  since?: string | undefined;
  until?: string | undefined;
  limit: number;
}

/** Audit events per insert statement that the recorder writes by default; stores may prepare that size. */
export const AUDIT_BATCH = 500;

export interface AuditStore {
  appendAuditEvents(events: readonly AuditEvent[]): Promise<void>;
  /** Newest first. */
  queryAuditEvents(filter: AuditFilter): Promise<AuditEvent[]>;
  /** Deletes events older than the given time; returns how many. */
  pruneAuditEvents(olderThan: Date): Promise<number>;
}

export interface Store extends AudienceStore, ClientStore, GrantStore, KeyStore, ChangeFeed, AuditStore {
  readonly engine: 'sqlite' | 'postgres';
  /** Runs pending migrations; returns the names it ran. */
  migrate(): Promise<string[]>;
  /** Resolves if the store answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** A stable `code` that the CLI and HTTP layers switch on. */
export class StoreError extends Error {
  override name = 'StoreError';
  constructor(
    readonly code: 'not_found' | 'conflict',
    message: string,
  ) {
    super(message);
  }
}
