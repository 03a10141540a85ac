import type { FeedFollower } from './directory.js';
import {
  actorOf,
  type Change,
  type ClientStanding,
  type RevocationStore,
  type RevokedToken,
} from '../store/types.js';
import type { Clock, Job } from '../clock.js';

/** Rows read a query at start (load). */
const LOAD_PAGE = 5000;
/** Expired entries are forgotten (in memory, and deleted from the store) this often, */
const PRUNE_EVERY_MS = 60_000;
/** this many rows a statement. */
const PRUNE_BATCH = 2000;
/**
 * A client made anew under the id of one deleted (its old tokens carry the same client_id) has the tokens issued
 * before it cut: those with an iat more than this many seconds before its creation, so that a token of the new
 * client from an instance whose clock is a little behind is not cut with them.
 */
const CREATION_SKEW_SECONDS = 1;

export interface RevocationsOptions {
  /** Time of day and the prune job (clock.ts). */
  clock: Clock;
  /** The longest a token lives, in seconds: a cut older than that affects no token that has not expired. */
  maxTokenTtl: number;
  onError?: (error: unknown) => void;
}

type RevocationReads = Pick<
  RevocationStore,
  | 'listRevokedTokens'
  | 'pruneRevokedTokens'
  | 'pruneClientDeletions'
  | 'listClientStandings'
  | 'findClientStandings'
>;

/**
 * What makes this server's own tokens inactive before they expire, in memory (docs/interface.md, "Revocation and
 * introspection"), so that verifying one (domain/own-tokens.ts) asks the store nothing: the denylist of single
 * tokens (jti until exp) and, per client, the iat at or before which its tokens are inactive (revoked_before;
 * every token while it is disabled or once it is deleted). Loaded at start and kept by the change feed (the
 * Directory hands every batch of changes here before it moves past them): a token revoked, a client's tokens
 * revoked, disabled or deleted on any instance, by any face, is known here within a poll (a PostgreSQL NOTIFY: at
 * once). Memory stays bounded: an entry is forgotten once every token it concerns has expired.
 */
export class Revocations implements FeedFollower {
  /** jti → exp (seconds since the epoch). */
  private readonly denied = new Map<string, number>();
  /**
   * client id → the second (iat) at or before which its tokens are inactive (Infinity: every token), for the
   * clients whose cut still matters. A bare number, not an object with it: a store whose clients were all made
   * within the token lifetime has a cut for each (see setCut): 100 000 took 13.4 MiB as objects, 8.1 as numbers.
   * A finite cut is forgotten once (iat + the longest lifetime) has passed; a disabled client's never.
   */
  private readonly cuts = new Map<string, number>();
  /** client id → when the tokens of a deleted client have all expired (ms since the epoch): its cut is Infinity. */
  private readonly deleted = new Map<string, number>();
  private job: Job | undefined;
  private pruning = false;

  constructor(
    private readonly store: RevocationReads & Pick<RevocationStore, 'revokeToken'>,
    private readonly options: RevocationsOptions,
  ) {}

  /**
   * Reads the denylist and the clients whose tokens may be cut (the Directory calls it at start), LOAD_PAGE rows a
   * query: read whole, a store whose 100 000 clients were all made within the token lifetime left ~50 MB of rows
   * behind, promoted to the old generation and resident long after (the server at rest: 224 MB; 188 MB a page at
   * a time).
   */
  async load(): Promise<void> {
    const now = this.options.clock.now();
    const seconds = Math.floor(now / 1000);
    for (let after: string | null = null; ;) {
      const tokens = await this.store.listRevokedTokens(seconds, { after, limit: LOAD_PAGE });
      for (const { jti, exp } of tokens) this.denied.set(jti, exp);
      if (tokens.length < LOAD_PAGE) break;
      after = tokens[tokens.length - 1]!.jti;
    }
    const since = new Date(now - this.options.maxTokenTtl * 1000).toISOString();
    for (let after: string | null = null; ;) {
      const standings = await this.store.listClientStandings(since, { after, limit: LOAD_PAGE });
      for (const standing of standings) this.setCut(standing, now);
      if (standings.length < LOAD_PAGE) break;
      after = standings[standings.length - 1]!.id;
    }
  }

  /** A batch of the change feed: revoked tokens come with their exp; changed clients are read again. */
  async apply(changes: readonly Change[]): Promise<void> {
    const clients = new Set<string>();
    for (const change of changes) {
      if (change.entity === 'client') clients.add(change.key);
      else if (change.entity === 'token') {
        const space = change.key.indexOf(' ');
        // A string of its own: a slice would keep the whole key in memory as long as the entry lives.
        const jti = Buffer.from(change.key.slice(space + 1)).toString();
        this.denied.set(jti, Number(change.key.slice(0, space)));
      }
    }
    if (clients.size === 0) return;
    const now = this.options.clock.now();
    const found = new Map(
      (await this.store.findClientStandings([...clients])).map((standing) => [standing.id, standing]),
    );
    for (const id of clients) {
      const standing = found.get(id);
      // Deleted: its tokens are inactive until the last of them has expired (docs/interface.md).
      if (standing === undefined) {
        this.cuts.set(id, Infinity);
        this.deleted.set(id, now + this.options.maxTokenTtl * 1000);
      } else this.setCut(standing, now);
    }
  }

  private setCut(standing: ClientStanding, now: number): void {
    this.deleted.delete(standing.id);
    if (!standing.enabled) {
      this.cuts.set(standing.id, Infinity);
      return;
    }
    const revoked =
      standing.revokedBefore === null ? -Infinity : Math.floor(Date.parse(standing.revokedBefore) / 1000);
    const created = Math.floor(Date.parse(standing.createdAt) / 1000) - 1 - CREATION_SKEW_SECONDS;
    const iat = Math.max(revoked, created);
    if (!this.expired(iat, now)) this.cuts.set(standing.id, iat);
    else this.cuts.delete(standing.id);
  }

  /** Whether every token a finite cut at `iat` concerns has expired by `now` (ms). */
  private expired(iat: number, now: number): boolean {
    return Number.isFinite(iat) && (iat + this.options.maxTokenTtl) * 1000 <= now;
  }

  /**
   * Deletes PRUNE_BATCH rows a statement, with a turn of the event loop between them, until fewer were left (or the
   * pruning was stopped meanwhile).
   */
  private async inBatches(prune: (limit: number) => Promise<number>): Promise<void> {
    while ((await prune(PRUNE_BATCH)) === PRUNE_BATCH && this.job !== undefined)
      await new Promise((resolve) => setImmediate(resolve));
  }

  /** Memory only: whether this token id is on the denylist. */
  isRevoked(jti: string): boolean {
    return this.denied.has(jti);
  }

  /** Memory only: the iat at or before which the client's tokens are inactive (see own-tokens.ts). */
  cutOf(clientId: string): number {
    return this.cuts.get(clientId) ?? -Infinity;
  }

  /**
   * Puts a token on the denylist (RFC 7009: the client it was issued to revoked it): in the store, with its change
   * for the other instances and its audit event, then here at once. A token listed already writes nothing.
   */
  async revoke(token: RevokedToken, source: string | null): Promise<void> {
    await this.store.revokeToken(token, {
      type: 'token.revoked',
      actor: actorOf.client(token.clientId),
      source,
      target: token.jti,
      clientId: token.clientId,
      changes: { exp: new Date(token.exp * 1000).toISOString() },
    });
    this.denied.set(token.jti, token.exp);
  }

  /** How much is held: denylist entries and clients with a cut. */
  size(): { tokens: number; clients: number } {
    return { tokens: this.denied.size, clients: this.cuts.size };
  }

  /** Forgets what has expired, and deletes it from the store, once a minute. */
  start(): void {
    this.job = this.options.clock.every(PRUNE_EVERY_MS, () => void this.prune());
  }

  stop(): void {
    this.job?.stop();
    this.job = undefined;
  }

  /**
   * Forgets the entries whose tokens have all expired, then deletes the expired rows of the denylist and the
   * tombstones of clients deleted longer ago than the longest lifetime from the store, PRUNE_BATCH a statement with a turn of the event loop between them. Never rejects.
   */
  async prune(): Promise<void> {
    if (this.pruning) return;
    this.pruning = true;
    try {
      const now = this.options.clock.now();
      const seconds = Math.floor(now / 1000);
      for (const [jti, exp] of this.denied) if (exp <= seconds) this.denied.delete(jti);
      for (const [id, iat] of this.cuts) if (this.expired(iat, now)) this.cuts.delete(id);
      for (const [id, until] of this.deleted)
        if (until <= now) {
          this.deleted.delete(id);
          this.cuts.delete(id);
        }
      await this.inBatches((limit) => this.store.pruneRevokedTokens(seconds, limit));
      // A deleted client's tombstone matters while its tokens may live (see the store's deleteClient).
      const before = new Date(now - this.options.maxTokenTtl * 1000).toISOString();
      await this.inBatches((limit) => this.store.pruneClientDeletions(before, limit));
    } catch (error) {
      this.options.onError?.(error);
    } finally {
      this.pruning = false;
    }
  }
}
