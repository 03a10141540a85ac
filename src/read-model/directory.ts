import type { LRUCache } from 'lru-cache';
import { clientSpan } from '../telemetry/client-span.js';
import { boundedLru } from '../lru.js';
import { Unavailable } from '../domain/errors.js';
import {
  ClientIdSetBuilder,
  idHash,
  type ClientIdSet,
  type ClientIdStats,
  type IdHash,
} from './client-ids.js';
import type { KnownAudience, KnownClient } from '../domain/known-client.js';
import { ClientCache } from './client-cache.js';
import { toKnownClient } from './known-client.js';
import type { Audience, AudienceStore, Change, ChangeFeed, ClientStore } from '../store/types.js';
import { systemClock, type Clock } from '../clock.js';
import { FeedReader } from './feed.js';

export interface DirectoryOptions {
  /** Backstop lifetime of a cached client, in milliseconds; the change feed normally invalidates sooner. */
  ttlMs: number;
  /** Most clients (known or unknown ids) kept at once. */
  max: number;
  /** How often the change feed is read, in milliseconds. */
  pollMs: number;
  /**
   * How long (ms) cached clients are still served when the change feed cannot be read (the store is down):
   * after that, every request is refused with 503 until the store answers again.
   */
  staleWindowMs?: number;
  /** Seconds a 503 asks the client to wait (`Retry-After`, TESSERA_RETRY_AFTER) when the store cannot answer. */
  retryAfter: number;
  onError?: (
    error: unknown,
    during: 'change feed' | 'change listener' | 'client lookup' | 'client ids',
  ) => void;
  /** A cache miss waits this long (ms) for the store at most, then answers 503: a hung store is a down one. */
  lookupTimeoutMs?: number;
  /** The store's engine, as a trace's CLIENT span of a lookup names it (db.system.name); sqlite when left out. */
  engine?: 'sqlite' | 'postgresql';
  /** The feed was read without error (after failures, this is the recovery). */
  onRecovered?: () => void;
  /** The change listener is connected again, or delivered a notification (after failures, its recovery). */
  onListening?: () => void;
  /** Called after signing keys changed in the store. */
  onKeysChanged?: () => Promise<void>;
  /** Called after the audiences were reloaded. */
  onAudiencesChanged?: (audiences: readonly Audience[]) => void | Promise<void>;
  /** Time of day (cache entries' ages, the full refresh, the feed's pruning) and the poll job (clock.ts). */
  clock?: Clock;
  /** The hash of the client id set (client-ids.ts); a random key of this process's when left out. */
  idHash?: IdHash;
  /** What else this process keeps from the change feed (revocations.ts). */
  followers?: readonly FeedFollower[];
}

/**
 * Something else a process keeps in memory from the change feed (revocations.ts), beside the directory's own
 * clients and audiences: loaded at start once the feed's position is taken (so that nothing written meanwhile is
 * lost: it is read, or it comes through the feed, or both), then given every batch of changes.
 */
export interface FeedFollower {
  load(): Promise<void>;
  /** A batch of changes, before the feed moves past it: a failure has the batch read again (apply it idempotently). */
  apply(changes: readonly Change[]): Promise<void>;
}

/**
 * What the directory reads of the store: the change feed, the audiences, and clients (a batch of them on a
 * cache miss, their ids when the id set is built).
 */
export type DirectoryStore = ChangeFeed &
  Pick<AudienceStore, 'listAudiences'> &
  Pick<ClientStore, 'findClients' | 'countClients' | 'listClientIds'>;

/**
 * Ids looked up and not found are remembered too, so repeating a wrong id does not reach the store each
 * time; in their own, smaller LRU, so that a flood of made-up ids cannot push real clients out of the cache.
 */
const UNKNOWN_MAX = 10_000;

const LOOKUP_TIMEOUT_MS = 2000;
/** Most ids asked of the store in one query. */
const BATCH_MAX = 100;

interface LookupBatch {
  /** The directory's generation when the batch was opened. */
  generation: number;
  /** The ids to look up, each with the lookup waiting for it (findClient shares one per id). */
  waiting: Map<string, { resolve(client: KnownClient | undefined): void; reject(error: unknown): void }>;
}

function deadline<T>(work: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the store did not answer within ${ms} ms`)), ms);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error as Error);
      },
    );
  });
}
/** Client ids read per query when the id set is built. */
const ID_PAGE = 10_000;
/** After a failed build of the id set, the next is tried this much later at the earliest (ms). */
const ID_RETRY_MS = 10_000;

/**
 * The lookup side of the read model: the in-memory view of clients, grants and audiences that the token path
 * reads, so that a warm request does no store I/O (the feed-following side, FeedReader in feed.ts, keeps it
 * current). Clients are loaded on first use and kept in an LRU; audiences are few and kept whole;
 * every client id is kept too, compactly (client-ids.ts), so that an id no client has costs no lookup.
 * Changes made elsewhere (the CLI, another instance) arrive through the store's change feed, read every
 * `pollMs`; the TTL is only a backstop.
 */
export class Directory {
  private readonly clients: ClientCache;
  private readonly unknown: LRUCache<string, true>;
  private readonly pending = new Map<string, Promise<KnownClient | undefined>>();
  /** The ids missed since the last lookup went out, looked up together (see load). */
  private batch: LookupBatch | undefined;
  private audiences = new Map<string, KnownAudience>();
  private audienceList: readonly Audience[] = [];
  /** Bumped by every invalidation, so that a lookup in flight across one does not cache what it read before. */
  private generation = 0;
  private readonly clock: Clock;
  /** The feed-following side: what keeps this directory current (feed.ts). */
  private readonly feed: FeedReader;
  private lastFullRefresh = 0;
  private readonly staleWindowMs: number;
  /**
   * Every client id, for lookups that miss the cache: undefined until it is built (start), and until then the
   * directory answers as it did before it had one (see findClient and registered).
   */
  private ids: ClientIdSet | undefined;
  private readonly idHash: IdHash;
  /** The build of the id set in progress (see buildIds). */
  private idsBuilding: Promise<void> | undefined;
  /** While the id set is built: the ids of the `client` changes applied meanwhile, added to it at the end. */
  private idsSeen: string[] | undefined;
  /** `client` changes applied since the id set was built: some may be deletions, whose ids it keeps. */
  private clientChanges = 0;
  /** When the last build of the id set failed (the clock's time: it is tried again ID_RETRY_MS later). */
  private idsFailedAt = -Infinity;
  private stopped = false;
  /**
   * Client lookups answered from memory (known, or known not to exist), sent to the store, and answered
   * after a read of the change feed because the id set lacks the id (unregistered).
   */
  readonly stats = { hits: 0, unknownHits: 0, misses: 0, unregistered: 0 };

  constructor(
    private readonly store: DirectoryStore,
    private readonly options: DirectoryOptions,
  ) {
    this.clock = options.clock ?? systemClock;
    this.staleWindowMs = options.staleWindowMs ?? Infinity;
    this.idHash = options.idHash ?? idHash();
    this.clients = new ClientCache(options.max, options.ttlMs);
    this.unknown = boundedLru<string, true>(Math.min(options.max, UNKNOWN_MAX), {
      ttl: options.ttlMs,
      ttlAutopurge: false,
    });
    this.feed = new FeedReader(
      store,
      { apply: (changes) => this.apply(changes), afterRead: (now) => this.afterRead(now) },
      {
        pollMs: options.pollMs,
        clock: this.clock,
        onError: options.onError,
        onRecovered: options.onRecovered,
        onListening: options.onListening,
      },
    );
  }

  /** Loads the audiences and the client ids, notes where the change feed stands, and starts following it. */
  async start(): Promise<void> {
    await this.feed.mark();
    this.lastFullRefresh = this.clock.now();
    await this.reloadAudiences();
    // After the feed's position is taken: a client created while the ids are read is on a page or comes
    // through the feed, and is not lost either way. Awaited (a million ids take a second or two, see
    // bench/README.md), so that a started server holds them; a build that fails is tried again later.
    await this.buildIds(false);
    for (const follower of this.options.followers ?? []) await follower.load();
    await this.feed.follow();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.feed.stop();
    await this.idsBuilding;
  }

  /** Whether the change feed was read successfully within `withinMs`: if not, changes may be going unseen. */
  following(withinMs: number): boolean {
    return this.feed.following(withinMs);
  }

  findAudience(url: string): KnownAudience | undefined {
    return this.audiences.get(url);
  }

  listAudiences(): readonly Audience[] {
    return this.audienceList;
  }

  /**
   * Memory only, never the store: the client if this process holds it (a caller blocked for failed attempts
   * is answered this way first, see registered). Entries past their TTL count too: the TTL
   * is only a backstop behind the change feed, which removes a client the moment it changes, and a client
   * that asks for a token every half hour must not be locked out by a block on an address it shares (a NAT)
   * just because its entry aged. Undefined once the stale window is over.
   */
  peekClient(id: string): KnownClient | undefined {
    if (!this.feed.following(this.staleWindowMs)) return undefined;
    const known = this.clients.get(id, this.clock.now(), true);
    if (known !== undefined) this.stats.hits++;
    return known;
  }

  /**
   * Memory only: whether `id` is in the set of every client id (which may still hold the id of a client
   * deleted since it was built, see ClientIdSet). A caller blocked for failed attempts that presents such an
   * id may have its client looked up; any other id it sprays costs nothing. False until the set is built, so
   * that a blocked caller is then answered from the cache alone, as before there was a set.
   */
  registered(id: string): boolean {
    return this.ids?.has(id) ?? false;
  }

  /**
   * Memory only: whether a client with this id exists, by the set of every client id (in which a client deleted
   * since it was built stays: revocations.ts knows those). Throws Unavailable (answered 503) while this process
   * cannot tell: the set is not built yet, or the feed has gone unread for the stale window.
   */
  clientExists(id: string): boolean {
    if (this.ids === undefined || !this.feed.following(this.staleWindowMs))
      throw new Unavailable(
        this.options.retryAfter,
        'the client id set is not built, or the change feed is stale',
      );
    return this.ids.has(id);
  }

  /** The id set's size and memory; undefined until it is built. */
  idStats(): ClientIdStats | undefined {
    return this.ids?.stats();
  }

  /**
   * Synchronous on a hit; a promise on a miss, shared by concurrent lookups of the same id. The id set is
   * asked only after the cache: a warm request never hashes its id.
   */
  findClient(id: string): KnownClient | undefined | Promise<KnownClient | undefined> {
    // Without the feed, cached answers may be stale (a client disabled meanwhile): good for a while only.
    if (!this.feed.following(this.staleWindowMs))
      throw new Unavailable(this.options.retryAfter, 'the change feed has gone unread for the stale window');
    // While the feed cannot be read, the TTL backstop must not cut the stale window short: expired entries
    // are still served (they are as fresh as everything else this process knows).
    const known = this.clients.get(id, this.clock.now(), this.feed.failing);
    if (known !== undefined) {
      this.stats.hits++;
      return known;
    }
    if (this.unknown.has(id)) {
      this.stats.unknownHits++;
      return undefined;
    }
    const registered = this.ids === undefined || this.ids.has(id);
    if (registered) this.stats.misses++;
    else this.stats.unregistered++;
    let pending = this.pending.get(id);
    if (!pending) {
      const work = registered ? this.load(id) : this.unregistered(id);
      const started: Promise<KnownClient | undefined> = work.finally(() => {
        if (this.pending.get(id) === started) this.pending.delete(id);
      });
      this.pending.set(id, started);
      pending = started;
    }
    return pending;
  }

  /**
   * An id that the id set lacks: no client has it, unless one was created with it a moment ago through another
   * process and the feed has not been read since. So the feed is read once and the set asked again, rather
   * than the store asked for the id: poll() coalesces, so a flood of made-up ids costs one feed read at a time
   * (each a small indexed query), never a lookup per id, and a new client still works at its first request, as
   * it did when every miss was a lookup. The id is then remembered as unknown, as a lookup that found nothing
   * would have it (the feed forgets it when a client takes it). The first time it costs one store round trip
   * and after that memory, as a known client's first and later lookups do, so an unknown id and a known one
   * with a wrong secret still answer alike and in the same time; and when the feed cannot be read (or does not
   * answer within the lookup's deadline), the answer is the 503 that a failed lookup gives.
   */
  private async unregistered(id: string): Promise<KnownClient | undefined> {
    try {
      // A store that hangs is a down one here too (poll() never rejects: only its deadline can).
      await deadline(this.poll(), this.options.lookupTimeoutMs ?? LOOKUP_TIMEOUT_MS);
    } catch (error) {
      throw new Unavailable(this.options.retryAfter, 'the change feed did not answer', error);
    }
    if (this.feed.failing) throw new Unavailable(this.options.retryAfter, 'the change feed cannot be read');
    // Created a moment ago: looked up like any miss (the change just read took it out of the cache, if it
    // was there at all).
    if (this.ids?.has(id) === true) {
      this.stats.misses++;
      return this.load(id);
    }
    this.unknown.set(id, true);
    return undefined;
  }

  /**
   * Asks the store for `id` together with every other id that misses before the microtasks of this callback
   * have run out: under load, concurrent misses share one query (one round trip, one statement) instead of
   * one each. Token requests reach this together, one batch per event-loop iteration (http/turns.ts),
   * so the query goes out in the same iteration rather than one later.
   */
  private load(id: string): Promise<KnownClient | undefined> {
    return new Promise((resolve, reject) => {
      let batch = this.batch;
      if (batch === undefined || batch.waiting.size >= BATCH_MAX) {
        batch = { generation: this.generation, waiting: new Map() };
        this.batch = batch;
        const scheduled = batch;
        process.nextTick(() => void this.lookUp(scheduled));
      }
      batch.waiting.set(id, { resolve, reject });
    });
  }

  private async lookUp(batch: LookupBatch): Promise<void> {
    if (this.batch === batch) this.batch = undefined;
    const ids = [...batch.waiting.keys()];
    let byId: Map<string, KnownClient>;
    try {
      // A CLIENT span in the trace of the request that asked first (the batch runs in its context).
      const found = await clientSpan(
        'SELECT clients',
        {
          'db.system.name': this.options.engine ?? 'sqlite',
          'db.collection.name': 'clients',
          'db.operation.name': 'SELECT',
          'db.operation.batch.size': ids.length,
        },
        () => deadline(this.store.findClients(ids), this.options.lookupTimeoutMs ?? LOOKUP_TIMEOUT_MS),
      );
      // Inside the try: nothing may escape this function, which nobody awaits.
      const url = (audience: string) => this.audiences.get(audience)?.url ?? audience;
      byId = new Map(found.map((client) => [client.id, toKnownClient(client, url)]));
    } catch (error) {
      // The answer cannot be given safely without the store: 503, and the client may retry (docs/interface.md).
      this.options.onError?.(error, 'client lookup');
      const unavailable = new Unavailable(this.options.retryAfter, 'the client lookup failed', error);
      for (const waiter of batch.waiting.values()) waiter.reject(unavailable);
      return;
    }
    // A lookup in flight across an invalidation does not cache what it read before it.
    const current = batch.generation === this.generation;
    for (const [id, waiter] of batch.waiting) {
      const known = byId.get(id);
      if (current) {
        // Keyed by the client's own id string: the one from the request may be a slice of a longer one.
        if (known) this.clients.set(known, this.clock.now());
        else this.unknown.set(id, true);
      }
      waiter.resolve(known);
    }
  }

  /**
   * Reads the change feed once, at most as long as a lookup may take: a change this process has just made
   * through the admin API (a client's tokens revoked, a secret added) is then in effect here before its answer
   * goes out, as it is on the other instances within a second. Never rejects: a feed that does not answer in
   * time is read on by the timer.
   */
  async catchUp(): Promise<void> {
    await deadline(this.poll(), this.options.lookupTimeoutMs ?? LOOKUP_TIMEOUT_MS).catch(() => undefined);
  }

  /** Reads the change feed once; also run by the clock. Never rejects: errors go to onError. */
  poll(): Promise<void> {
    return this.feed.poll();
  }

  /** After every good read of the feed: the backstops behind it. */
  private async afterRead(now: number): Promise<void> {
    // Once per cache TTL, audiences and keys are read afresh whatever happened.
    if (now - this.lastFullRefresh >= this.options.ttlMs) {
      this.lastFullRefresh = now;
      await this.reloadAudiences();
      await this.keysChanged();
      this.maybeRebuildIds();
    }
    // A build that failed (the store was away) is tried again once the feed reads well, now and then.
    if (this.ids === undefined && !this.stopped && now - this.idsFailedAt >= ID_RETRY_MS)
      void this.buildIds(true);
  }

  private async apply(changes: Change[]): Promise<void> {
    let audiences = false;
    let keys = false;
    this.generation++;
    // A lookup in flight may have read before these changes: later callers must not join it.
    this.pending.clear();
    for (const change of changes) {
      switch (change.entity) {
        case 'client':
          this.clients.delete(change.key);
          this.unknown.delete(change.key);
          // Created, changed or deleted: the feed does not say which, so the id is added in any case.
          this.ids?.add(change.key);
          this.idsSeen?.push(change.key);
          this.clientChanges++;
          break;
        case 'grant':
          this.clients.delete(change.key.slice(0, change.key.indexOf(' ')));
          break;
        case 'audience':
          audiences = true;
          break;
        case 'key':
          keys = true;
          break;
      }
    }
    for (const follower of this.options.followers ?? []) await follower.apply(changes);
    if (audiences) {
      // Removing an audience removes its grants too; cached grant sets may be stale, so start afresh.
      this.clients.clear();
      this.unknown.clear();
      await this.reloadAudiences();
    }
    if (keys) await this.keysChanged();
  }

  /**
   * Reads every client id from the store, a page at a time, into a new set that then takes the old one's place.
   * The ids of `client` changes applied while the pages are read are added at the end: a client created
   * meanwhile is on a page or in the feed, and is not lost either way. Never rejects; one build at a time.
   * `yielding`: the event loop runs between pages (a rebuild while requests are served).
   */
  private buildIds(yielding: boolean): Promise<void> {
    this.idsBuilding ??= this.readIds(yielding).finally(() => (this.idsBuilding = undefined));
    return this.idsBuilding;
  }

  private async readIds(yielding: boolean): Promise<void> {
    const seen: string[] = [];
    this.idsSeen = seen;
    try {
      // Sized by a count first: the array is made once instead of grown (and copied) page after page.
      const builder = new ClientIdSetBuilder(this.idHash, await this.store.countClients());
      let after: string | null = null;
      for (;;) {
        const page: string[] = await this.store.listClientIds(after, ID_PAGE);
        for (const id of page) builder.add(id);
        if (this.stopped) return;
        if (page.length < ID_PAGE) break;
        after = page[page.length - 1]!;
        if (yielding) await new Promise((resolve) => setImmediate(resolve));
      }
      const ids = builder.finish();
      for (const id of seen) ids.add(id);
      this.ids = ids;
      this.clientChanges = seen.length;
    } catch (error) {
      this.idsFailedAt = this.clock.now();
      this.options.onError?.(error, 'client ids');
    } finally {
      this.idsSeen = undefined;
    }
  }

  /**
   * A deleted client's id stays in the set (the feed cannot tell a deletion from a change): presented, it costs
   * one lookup per TTL, and then it is a known unknown. At the TTL backstop the set is built again, in the
   * background, if a client changed since it was built and that is cheap (a page of ids or fewer: one query,
   * a few milliseconds of hashing) or worth it (as many client changes as an eighth of the ids: deleted ids
   * would otherwise pile up where clients come and go). Else a million ids are not read again every minute.
   */
  private maybeRebuildIds(): void {
    if (this.ids === undefined || this.idsBuilding !== undefined || this.clientChanges === 0) return;
    if (this.ids.size <= ID_PAGE || this.clientChanges >= this.ids.size / 8) void this.buildIds(true);
  }

  /** A key reload that fails (a key that cannot be opened) must not hold up the feed for everything else. */
  private async keysChanged(): Promise<void> {
    try {
      await this.options.onKeysChanged?.();
    } catch (error) {
      this.options.onError?.(error, 'change feed');
    }
  }

  private async reloadAudiences(): Promise<void> {
    const list = await this.store.listAudiences();
    this.audiences = new Map(
      list.map((a) => [
        a.url,
        {
          url: a.url,
          tokenTtl: a.tokenTtl,
          signingAlg: a.signingAlg,
          resourceServers: new Set(a.resourceServerClientIds),
          ...(a.tokenProfile === null ? {} : { tokenProfile: a.tokenProfile }),
        },
      ]),
    );
    this.audienceList = list;
    await this.options.onAudiencesChanged?.(list);
  }
}
