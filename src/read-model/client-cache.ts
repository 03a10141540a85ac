import type { LRUCache } from 'lru-cache';
import type { KnownClient } from '../domain/known-client.js';
import { ownString } from '../domain/validate.js';
import { boundedLru } from '../lru.js';
import { packKnownClient, unpackKnownClient } from './known-client.js';

/** A cached client and when it was cached (ms since the epoch), for the TTL backstop. */
interface Held {
  readonly client: KnownClient;
  readonly cachedAt: number;
}

/** Clients kept as objects at most: those asked for most lately. */
export const HOT_MAX = 4096;
/** A packed client read twice within this many reads of packed clients is made an object again (see askedAgain). */
const RECENT_WINDOW = 4096;
const RECENT_SLOTS = 16_384;
/** Audience URLs the table of packed clients holds at most; a client of another audience is kept as it is. */
const AUDIENCES_MAX = 65_536;

/**
 * The directory's cache of clients: at most `max`, each good for `ttlMs` after it was cached (a backstop behind
 * the change feed). The HOT_MAX cached or asked for most lately are kept as the objects the token path reads (a
 * warm request reads one, as from any LRU); the others, packed into a string each (known-client.ts,
 * packKnownClient) where they are the usual client: ~180 bytes a client with its entry instead of ~500, so that
 * a hundred thousand cached clients take ~20 MB of heap instead of ~50.
 *
 * A packed client that is asked for is unpacked for that request (under a microsecond, young garbage only);
 * asked for again soon after (see askedAgain), it is an object again, and the object the longest unasked is
 * packed in its place. Unpacking every read into an object kept among the hot ones instead made every object
 * live a while and die in the old generation, when a hundred thousand clients are asked in turn: 0.83× the
 * requests a second and more memory, not less (bench tessera-sqlite-cached). Packed clients leave in the order
 * they were packed when the cache is full: a read does not move one (that would be a delete and an insert in a
 * map of up to `max` entries for every read).
 */
export class ClientCache {
  private readonly hot: LRUCache<string, Held>;
  /** The others, by id, in the order they were packed (the first is the next to go). */
  private readonly cold = new Map<string, string | Held>();
  private readonly coldMax: number;
  /**
   * An iterator over `cold` kept from one eviction to the next: a new one would step over every entry deleted
   * at the start of the map (a hole until the map is rebuilt) each time.
   */
  private evictions: Iterator<string> | undefined;
  /** The audiences of packed clients: their URLs (the directory's own strings) and indexes. */
  private audiences: string[] = [];
  private audienceIndexes = new Map<string, number>();
  /** Reads of packed clients so far, and by slot the hash of the id last read there and when (see askedAgain). */
  private coldReads = 0;
  private readonly recentHashes = new Uint32Array(RECENT_SLOTS);
  private readonly recentReads = new Float64Array(RECENT_SLOTS);

  constructor(
    max: number,
    private readonly ttlMs: number,
  ) {
    const hotMax = Math.min(max, HOT_MAX);
    this.coldMax = max - hotMax;
    this.hot = boundedLru<string, Held>(hotMax, {
      dispose: (held, id, reason) => {
        if (reason === 'evict') this.demote(id, held);
      },
    });
  }

  /**
   * The client if cached and within its TTL (past it, it is dropped), or past it too when `stale` (kept then):
   * while the feed cannot be read, the TTL must not cut the stale window short. `now` in ms since the epoch: the
   * TTL follows the wall clock, as the stale window does (a clock set back keeps entries that much longer).
   */
  get(id: string, now: number, stale: boolean): KnownClient | undefined {
    const held = this.hot.get(id);
    if (held !== undefined) {
      if (stale || now - held.cachedAt <= this.ttlMs) return held.client;
      this.hot.delete(id);
      return undefined;
    }
    const cold = this.cold.get(id);
    if (cold === undefined) return undefined;
    const again = this.askedAgain(id);
    // A string of its own for the client's id: the one asked with may be a slice of the request's body.
    const read = typeof cold === 'string' ? this.unpack(ownString(id), cold) : cold;
    if (!stale && now - read.cachedAt > this.ttlMs) {
      this.cold.delete(id);
      return undefined;
    }
    if (again) {
      this.cold.delete(id);
      this.hot.set(read.client.id, read);
    }
    return read.client;
  }

  /**
   * Whether the packed client `id` was asked for within the last RECENT_WINDOW reads of packed clients; notes
   * this read. By a hash of the id in a table of RECENT_SLOTS (a slot shared by two ids keeps the later one's):
   * no string is kept, nothing is allocated.
   */
  private askedAgain(id: string): boolean {
    let hash = 0x811c9dc5;
    for (let i = 0; i < id.length; i++) hash = Math.imul(hash ^ id.charCodeAt(i), 0x01000193);
    const slot = hash & (RECENT_SLOTS - 1);
    const reads = ++this.coldReads;
    const again = this.recentHashes[slot] === hash >>> 0 && reads - this.recentReads[slot]! <= RECENT_WINDOW;
    this.recentHashes[slot] = hash >>> 0;
    this.recentReads[slot] = reads;
    return again;
  }

  /** Caches `client` (by its id), in place of what was cached under that id; `now` is when. */
  set(client: KnownClient, now: number): void {
    this.cold.delete(client.id);
    this.hot.set(client.id, { client, cachedAt: now });
  }

  delete(id: string): void {
    this.hot.delete(id);
    this.cold.delete(id);
  }

  clear(): void {
    this.hot.clear();
    this.cold.clear();
    this.evictions = undefined;
    this.audiences = [];
    this.audienceIndexes = new Map();
  }

  get size(): number {
    return this.hot.size + this.cold.size;
  }

  /** How many clients are kept packed (for the tests). */
  get packed(): number {
    let packed = 0;
    for (const value of this.cold.values()) if (typeof value === 'string') packed++;
    return packed;
  }

  /** The hot client the longest unasked, leaving them: packed if it is the usual client, and kept if there is room. */
  private demote(id: string, held: Held): void {
    if (this.coldMax === 0) return;
    const packed = packKnownClient(held.client, held.cachedAt, (url) => this.audienceIndex(url));
    this.cold.set(id, packed ?? held);
    if (this.cold.size > this.coldMax) this.evictOne();
  }

  private evictOne(): void {
    let next = this.evictions?.next();
    if (next === undefined || next.done === true) {
      this.evictions = this.cold.keys();
      next = this.evictions.next();
    }
    if (next.done !== true) this.cold.delete(next.value);
  }

  private audienceIndex(url: string): number | undefined {
    let index = this.audienceIndexes.get(url);
    if (index === undefined) {
      if (this.audiences.length >= AUDIENCES_MAX) return undefined;
      index = this.audiences.length;
      this.audiences.push(url);
      this.audienceIndexes.set(url, index);
    }
    return index;
  }

  private unpack(id: string, packed: string): Held {
    return unpackKnownClient(id, packed, (index) => this.audiences[index]!);
  }
}
