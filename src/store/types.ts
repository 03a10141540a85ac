import type { TokenProfile } from '../domain/token-profiles.js';
import { TesseraError } from '../domain/errors.js';
import type { SigningAlg } from '../domain/jose.js';
import type { AuthMethodName, FederatedCredential, PublicJwks } from '../domain/client-auth/index.js';
import type { TlsIdentityKind } from '../domain/known-client.js';
import type { AuditStore, ChangeAudit } from './audit-events.js';

export * from './audit-events.js';

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
  /**
   * Its resource servers (`resource_server_client_ids`): the clients that receive its tokens, and so may exchange
   * one for a token of another audience (docs/interface.md, "Token exchange"). Client ids, sorted, each once.
   */
  resourceServerClientIds: string[];
  /** The claims its tokens carry beyond RFC 9068's (domain/token-profiles.ts); null: rfc9068. */
  tokenProfile: Exclude<TokenProfile, 'rfc9068'> | null;
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
  /** `token_exchange`: the client may exchange a token it received for one of this audience (RFC 8693). */
  tokenExchange: boolean;
}

/** A grant as seen from its audience: which client holds it. */
interface AudienceGrant extends Grant {
  clientId: string;
}

/** New scopes for one client's grant of an audience (see AudienceStore.updateAudience). */
export interface GrantScopes {
  clientId: string;
  scopes: readonly string[];
}

/** Custom claims: a JSON object (docs/interface.md, "Custom claims"). */
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

/** A new secret of a client, made by the management layer (management/secret-rules.ts). */
interface NewSecret {
  id: string;
  /** `sha256:<base64url>`. */
  digest: string;
  createdAt: string;
  expiresAt: string | null;
}

/** What one write of a client's secrets does, in this order: deletes some, expires some, adds one. */
export interface SecretChange {
  delete?: readonly string[];
  /** These secrets expire at `at` instead. */
  expire?: { ids: readonly string[]; at: string };
  /** A new secret: it becomes the client's current one (secretDigest; secretRotatedAt is its createdAt). */
  add?: NewSecret;
}

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
  /** The platforms' tokens it accepts in place of a secret or key (workload identity federation); [] for none. */
  federatedCredentials: FederatedCredential[];
  /** RFC 9449 §5.2 dpop_bound_access_tokens: it gets no token without a DPoP proof. */
  dpopBoundAccessTokens: boolean;
  /** A tls_client_auth client's one registered tls_client_auth_* value (RFC 8705 §2.1.2); null for any other. */
  tlsClientAuth: TlsClientAuth | null;
  /** RFC 8705 §3.4 tls_client_certificate_bound_access_tokens: its tokens are bound to its certificate. */
  certificateBoundAccessTokens: boolean;
  /**
   * Its tokens issued at or before this time, truncated to the second, are inactive (revoke-tokens, and
   * disabling, set it to the moment they happen); null: never set.
   */
  revokedBefore: string | null;
}

/**
 * The value a tls_client_auth client's certificate must carry (RFC 8705 §2.1.2): the kind names its field
 * (`subject_dn`: tls_client_auth_subject_dn, ...); the value is as registered (trimmed), its canonical form is the
 * read model's.
 */
export interface TlsClientAuth {
  kind: TlsIdentityKind;
  value: string;
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

export type ChangeEntity = 'client' | 'audience' | 'grant' | 'key' | 'token';

export interface Change {
  seq: number;
  entity: ChangeEntity;
  /**
   * The client id, the audience URL, `<client id> <audience URL>` for a grant, the kid, or `<exp> <jti>` for a
   * revoked token (see tokenChangeKey).
   */
  key: string;
}

/** A revoked token's change key: its exp (seconds since the epoch) and its jti, so followers need no query. */
export const tokenChangeKey = (token: { exp: number; jti: string }): string => `${token.exp} ${token.jti}`;

export interface NewAudience {
  /** Made by the store when left out. */
  id?: string;
  url: string;
  name: string | null;
  tokenTtl: number | null;
  signingAlg: SigningAlg | null;
  scopes?: AudienceScope[];
  /** Its resource servers: client ids, sorted, each once; none when left out. */
  resourceServerClientIds?: string[];
  /** Its token profile; rfc9068 (null) when left out. */
  tokenProfile?: Exclude<TokenProfile, 'rfc9068'> | null;
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
  /** Its federated credentials (a private_key_jwt client without jwks or jwks_uri); none when left out. */
  federatedCredentials?: FederatedCredential[];
  tokenTtl: number | null;
  quotaPerMinute?: number | null;
  quotaPerDay?: number | null;
  /** True when left out. */
  enabled?: boolean;
  /** False when left out. */
  dpopBoundAccessTokens?: boolean;
  /** tls_client_auth: its registered value; none when left out. */
  tlsClientAuth?: TlsClientAuth | null;
  /** False when left out. */
  certificateBoundAccessTokens?: boolean;
  audiences: string[];
  /** The scopes of some of those grants (by audience URL); none for the others. */
  scopes?: Record<string, string[]>;
  /** The custom claims of some of those grants (by audience URL). */
  grantClaims?: Record<string, Claims>;
  /** The audience URLs of those grants that allow token exchange; none when left out. */
  grantTokenExchange?: readonly string[];
  claims?: Claims | null;
}

/** The fields of an audience to change; those left undefined keep their value. */
export interface AudiencePatch {
  name?: string | null;
  tokenTtl?: number | null;
  signingAlg?: SigningAlg | null;
  scopes?: AudienceScope[];
  /** Its resource servers: client ids, sorted, each once (the whole list). */
  resourceServerClientIds?: string[];
  tokenProfile?: Exclude<TokenProfile, 'rfc9068'> | null;
}

/** The fields of a client to change; those left undefined keep their value. */
export interface ClientPatch {
  name?: string;
  description?: string | null;
  enabled?: boolean;
  tokenTtl?: number | null;
  quotaPerMinute?: number | null;
  quotaPerDay?: number | null;
  /** Custom claims in every token of the client (null or {} for none). */
  claims?: Claims | null;
  /** RFC 7591 token_endpoint_auth_method. */
  authMethod?: AuthMethodName;
  /** private_key_jwt: the public keys inline (a JWK Set), or null. */
  jwks?: PublicJwks | null;
  /** private_key_jwt: where the public keys are published, or null. */
  jwksUri?: string | null;
  /** Workload identity federation: the whole list of the client's federated credentials. */
  federatedCredentials?: FederatedCredential[];
  /** RFC 9449 §5.2: no token without a DPoP proof. */
  dpopBoundAccessTokens?: boolean;
  /** tls_client_auth: its registered value (RFC 8705 §2.1.2), or null. */
  tlsClientAuth?: TlsClientAuth | null;
  /** RFC 8705 §3.4: its tokens are bound to its certificate. */
  certificateBoundAccessTokens?: boolean;
  /** Its tokens issued at or before this time (to the second) are inactive from now on. */
  revokedBefore?: string;
}

export interface AudienceStore {
  addAudience(audience: NewAudience, audit?: ChangeAudit): Promise<Audience>;
  findAudience(url: string): Promise<Audience | undefined>;
  findAudienceById(id: string): Promise<Audience | undefined>;
  listAudiences(): Promise<Audience[]>;
  /**
   * Changes the fields given, stamps updated_at, records a change; with `grants`, sets the scopes of those
   * grants of it in the same write (not_found, resource `grant`, for a client it is not granted to).
   */
  updateAudience(
    url: string,
    patch: AudiencePatch,
    audit?: ChangeAudit,
    grants?: readonly GrantScopes[],
  ): Promise<Audience>;
  /** Removes the audience and every grant of it. */
  removeAudience(url: string, audit?: ChangeAudit): Promise<void>;
}

export interface ClientStore {
  /** Creates the client with its grants (and its first secret, if it has one) in one transaction. */
  createClient(client: NewClient, audit?: ChangeAudit): Promise<Client>;
  /**
   * Creates many clients as createClient does each (rows, audit event, change record), in one transaction with
   * a few multi-row statements for them all: conflict for an id taken (or given twice), not_found for an
   * audience that does not exist; nothing written then.
   */
  createClients(clients: readonly { client: NewClient; audit?: ChangeAudit }[]): Promise<void>;
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
   * The server reads every id this way at start (read-model/client-ids.ts), so it must stay one narrow query.
   */
  listClientIds(after: string | null, limit: number): Promise<string[]>;
  /**
   * Changes the fields given, stamps updated_at, records a change; with `secrets`, writes that change of its
   * secrets in the same write (see SecretStore.changeSecrets).
   */
  updateClient(id: string, patch: ClientPatch, audit?: ChangeAudit, secrets?: SecretChange): Promise<Client>;
  /**
   * Deletes the client with its grants and secrets, and takes it off every audience's resource servers (each
   * such audience stamped and recorded as changed), in one transaction.
   */
  deleteClient(id: string, audit?: ChangeAudit): Promise<void>;
}

/** A client's secrets. The rules (how many, whose expiry) are the management layer's (secret-rules.ts). */
export interface SecretStore {
  /**
   * Writes a change of the client's secrets, stamps its updated_at and records a change of it, in one
   * transaction; not_found (resource `client`) for no such client, (resource `secret`) for a secret to delete
   * or expire that it does not have.
   */
  changeSecrets(clientId: string, change: SecretChange, audit?: ChangeAudit): Promise<Client>;
  /**
   * Records that these secrets were used at `at` (off the token path, in batches of any size, a statement per
   * thousand); never moves a time back; no change for the feed.
   */
  markSecretsUsed(ids: readonly string[], at: string): Promise<void>;
}

/** The ids of client assertions (private_key_jwt) in use: the store's side of the replay guard. */
export interface AssertionJtiStore {
  /**
   * Records a client assertion's id (a digest of client id and jti) as used until `expiresAt` (ms since the
   * epoch): true if it was not in use, false if it is (a replay); an entry past its time counts as free. Both
   * stores record the ids of one turn of the event loop together (useAssertionJtis, src/per-turn.ts).
   */
  useAssertionJti(id: string, expiresAt: number): Promise<boolean>;
  /**
   * Several ids at once, as useAssertionJti each, in order, in one statement (one commit for all): an id given twice is a replay the second time. Rejects if it fails; the ids are then
   * recorded or not (on PostgreSQL a timeout or a lost connection may come after the commit), so that a later
   * use of one is at worst a replay refused, never a replay accepted.
   */
  useAssertionJtis(uses: readonly { id: string; expiresAt: number }[]): Promise<boolean[]>;
  /** Deletes at most `limit` assertion ids whose time is over (by `now`, ms); returns how many. */
  pruneAssertionJtis(now: number, limit: number): Promise<number>;
}

/** A token revoked on its own (RFC 7009): on the denylist until its exp. */
export interface RevokedToken {
  jti: string;
  /** The client it was issued to. */
  clientId: string;
  /** Its exp: seconds since the epoch. */
  exp: number;
}

/** What decides whether a client's tokens are still active, besides each token's own claims. */
export interface ClientStanding {
  id: string;
  enabled: boolean;
  revokedBefore: string | null;
  createdAt: string;
}

/** A page of a list in key order: at most `limit` rows whose key comes after `after` (null: from the first). */
interface Page {
  after: string | null;
  limit: number;
}

/** Revocation: the denylist of single tokens, and what makes a client's tokens inactive all at once. */
export interface RevocationStore {
  /**
   * Puts a token on the denylist, records a change of it (entity `token`, see tokenChangeKey) and its audit event,
   * in one transaction. False, and nothing written, when it is on the list already.
   */
  revokeToken(token: RevokedToken, audit?: ChangeAudit): Promise<boolean>;
  /**
   * The tokens on the denylist whose exp is after `now` (seconds since the epoch): every one, or with `page`, at
   * most `limit` of them whose jti comes after `after` (null: from the first), in jti order.
   */
  listRevokedTokens(now: number, page?: Page): Promise<Pick<RevokedToken, 'jti' | 'exp'>[]>;
  /** Deletes at most `limit` entries whose exp is at or before `now` (seconds); returns how many. */
  pruneRevokedTokens(now: number, limit: number): Promise<number>;
  /**
   * Deletes up to `limit` tombstones of clients deleted before `before` (RFC 3339; every token of theirs has
   * expired), the oldest first; how many it deleted.
   */
  pruneClientDeletions(before: string, limit: number): Promise<number>;
  /**
   * The clients whose tokens may be inactive for who they are: those disabled, and those whose revoked_before or
   * created_at is at or after `since` (RFC 3339): every one, or with `page`, at most `limit` of them whose id comes
   * after `after` (null: from the first), in id order. Read once at start, a page at a time.
   */
  listClientStandings(since: string, page?: Page): Promise<ClientStanding[]>;
  /** The standing of these clients (those that exist), after the change feed said they changed. */
  findClientStandings(ids: readonly string[]): Promise<ClientStanding[]>;
}

export interface GrantStore {
  /** Returns false if the grant already existed. */
  addGrant(clientId: string, audienceUrl: string, audit?: ChangeAudit): Promise<boolean>;
  /** Creates the grant with these scopes, claims and token_exchange (false when left out), or sets them; returns true if it created it. */
  putGrant(
    clientId: string,
    audienceUrl: string,
    scopes: string[],
    audit?: ChangeAudit,
    claims?: Claims | null,
    tokenExchange?: boolean,
  ): Promise<boolean>;
  removeGrant(clientId: string, audienceUrl: string, audit?: ChangeAudit): Promise<void>;
  /** Every grant of an audience, by client id. */
  listGrantsOf(audienceUrl: string): Promise<AudienceGrant[]>;
}

/** What one key operation writes: a new key, and new times for existing ones. */
export interface KeyChange {
  insert?: SigningKey;
  /** `retiredAt: null` cancels a scheduled retirement. */
  update?: { kid: string; activatesAt?: string; retiredAt?: string | null }[];
}

export interface KeyStore {
  listSigningKeys(): Promise<SigningKey[]>;
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
interface OperatorPatch {
  role?: OperatorRole;
  enabled?: boolean;
  /** A new enrollment link, which replaces the open one; the password is cleared (enrolled again by the link). */
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
}

/** The console's sessions, and the events of logins that open none. */
export interface SessionStore {
  /** Opens a session, stamps the operator's last login, and writes the login's event, in one transaction. */
  createOperatorSession(session: OperatorSession, audit?: ChangeAudit): Promise<void>;
  /** A session and its operator, if the session exists (whatever its times: the caller judges them). */
  findOperatorSession(id: string): Promise<{ session: OperatorSession; operator: Operator } | undefined>;
  /** Moves a session's last-seen time forward (never back). */
  touchOperatorSession(id: string, at: number): Promise<void>;
  /** Ends a session; with an audit event (logout) in the same transaction. */
  deleteOperatorSession(id: string, audit?: ChangeAudit): Promise<void>;
  /** Ends every session of an operator. */
  endOperatorSessions(operatorId: string): Promise<void>;
  /** Deletes sessions past their end or idle since before `idleBefore`; returns how many. */
  pruneOperatorSessions(now: number, idleBefore: number): Promise<number>;
  /** Writes an event that goes with no change (a failed login). */
  recordEvent(audit: ChangeAudit): Promise<void>;
}

/**
 * The whole store: every resource's interface, and what a transaction needs (a bound store offers all of it,
 * inside one transaction). The management layer takes it; every other caller takes only the interface, or the
 * methods, it uses (read-model/directory.ts, audit/recorder.ts, limits/replay.ts, keys/, health).
 */
export interface Store
  extends
    AudienceStore,
    ClientStore,
    SecretStore,
    GrantStore,
    KeyStore,
    ChangeFeed,
    AuditStore,
    OperatorStore,
    SessionStore,
    AssertionJtiStore,
    RevocationStore {
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

export interface SchemaState {
  applied: string[];
  pending: string[];
  unknown: string[];
}

/** What a StoreError is about: the management layer names its error after it (client_not_found, ...). */
export type StoreResource = 'audience' | 'client' | 'grant' | 'signing_key' | 'secret' | 'operator';

/** A refusal of the store, with a stable `code` that the management layer switches on (errors.ts). */
export class StoreError extends TesseraError {
  override name = 'StoreError';
  constructor(
    override readonly code: 'not_found' | 'conflict',
    message: string,
    readonly resource?: StoreResource,
  ) {
    super(message);
  }
}
