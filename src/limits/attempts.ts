import { boundedLru } from '../lru.js';
import type { AttemptLimiter } from '../domain/limits.js';
import { Counter, type Taken } from './counter.js';
import type { SharedRedis } from './redis.js';
import type { Threshold } from '../config/index.js';

/** A limit (a setting, config/index.ts): this many failures within the window block the key for `blockSeconds`. */
export type { Threshold };

/**
 * The address counted: IPv4 as it is, IPv6 by its /64 (one host usually has a whole /64 to pick from),
 * IPv4-mapped IPv6 as the IPv4 address.
 */
export function sourceKey(address: string): string {
  if (!address.includes(':')) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  const [head = '', tail = ''] = address.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = address.includes('::')
    ? [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right]
    : left;
  return (
    groups
      .slice(0, 4)
      .map((g) => g.replace(/^0+(?=.)/, ''))
      .join(':') + '::/64'
  );
}

/** Blocks are checked in memory only, so the token path does no I/O for them; this many at most. */
const MAX_BLOCKED = 100_000;

export interface AttemptLimiterOptions {
  /** Shared counters across instances, behind its breaker; memory only when undefined. */
  redis?: SharedRedis | undefined;
  /** Prefix of every Redis key (tests give each run its own). */
  keyPrefix?: string;
  /**
   * The limit per client id + source address (TESSERA_ATTEMPTS_CLIENT_*): a guessing caller is stopped for
   * that client, from that address only, so an attacker elsewhere cannot lock a legitimate client out of its
   * own address.
   */
  perClientAndSource: Threshold;
  /** The limit per source address, whatever the client ids (TESSERA_ATTEMPTS_SOURCE_*): stops spraying ids. */
  perSource: Threshold;
  now?: () => number;
}

/** An attempt counted by Blocker.begin before its work. Exactly one of release and failed ends it. */
export interface Reservation {
  /** Whether the attempt may do its work. When not, it must be released, and refused. */
  readonly within: boolean;
  /** When not within: until when (ms since the epoch) the caller should wait; 0 when within. */
  readonly retryAt: number;
  /** Gives the attempt's place back: it succeeded, or it was refused, or its work was never done. */
  release(): Promise<void>;
  /** The attempt failed: its place stays counted, and the one that reaches the limit blocks the key. */
  failed(): Promise<void>;
}

/** What a Blocker needs beside its limit. */
interface BlockerOptions {
  redis?: SharedRedis | undefined;
  keyPrefix: string;
  now: () => number;
}

/**
 * One failed-attempt limit over keys of one kind (a client at an address, an address, an operator's email):
 * failures are counted in Redis when one is configured (shared by every instance) and in memory otherwise;
 * a key whose count reaches the limit is blocked, and blocks are kept in this process's memory, so that asking
 * whether a key is blocked is never I/O. A failure is counted after it happened (failed: the token endpoint,
 * where checking a secret is cheap), or its attempt before its work is done (begin: console logins, where
 * the work is a slow password hash and a burst of attempts must not check more passwords than the limit).
 */
export class Blocker {
  private readonly blocked = boundedLru<string, number>(MAX_BLOCKED);
  private readonly counter: Counter;

  constructor(
    name: string,
    private readonly threshold: Threshold,
    private readonly options: BlockerOptions,
  ) {
    this.counter = new Counter(
      {
        points: threshold.failures,
        duration: threshold.windowSeconds,
        keyPrefix: `${options.keyPrefix}:fail:${name}`,
      },
      options.redis,
    );
  }

  /** Whether no key is blocked (the token path asks this first, before it builds a key). */
  get idle(): boolean {
    return this.blocked.size === 0;
  }

  /** Until when (ms since the epoch) the key is blocked; 0 or a time past when it is not. */
  until(key: string): number {
    return this.blocked.get(key) ?? 0;
  }

  /**
   * Counts an attempt of the key before its work (a password hash) is done, so that attempts made at once
   * cannot do more of that work than the limit allows: each takes a place, atomically (an INCR in Redis), and is
   * within the limit when its place is one of the first `failures` and the key is not blocked. How it ends
   * decides what its place becomes (Reservation); never rejects.
   */
  async begin(key: string): Promise<Reservation> {
    let taken: Taken | undefined;
    try {
      taken = await this.counter.take(key);
    } catch {
      // Not counted (the memory limiter does not fail; as in failed()): the attempt goes on, as a failure would
      // have before this counted it.
    }
    const place = taken?.consumed ?? 0;
    const now = this.options.now();
    // The block is asked after the place is taken: a failure that blocked the key gave its place back (below),
    // and an attempt that began meanwhile may have taken it.
    const blockedUntil = this.until(key);
    const within = place <= this.threshold.failures && blockedUntil <= now;
    let ended = false;
    const giveBack = async () => {
      if (ended) return;
      ended = true;
      await taken?.giveBack();
    };
    return {
      within,
      // Refused: by the block while it lasts; else the places are taken by attempts under way, or by failures
      // counted at another instance, and a failure blocks for blockSeconds.
      retryAt: within ? 0 : blockedUntil > now ? blockedUntil : now + this.threshold.blockSeconds * 1000,
      release: giveBack,
      failed: async () => {
        if (ended) return;
        if (!within) return giveBack(); // refused: it did no work, so it is no failure
        // The failure that took the limit's last place blocks the key, and gives that place back: the count
        // holds the failures no block has answered, so once the block is over one more attempt may be made
        // (and blocks the key again if it fails), as after a block by failed(). (An attempt begun beside it
        // that succeeds gives its place back too late to spare the key that block: the block may then come a
        // failure early, only ever when attempts overlap.)
        if (place < this.threshold.failures) {
          ended = true;
          return;
        }
        this.blocked.set(key, this.options.now() + this.threshold.blockSeconds * 1000);
        await giveBack();
      },
    };
  }

  /** Counts a failure of the key; resolves once counted (never rejects). */
  async failed(key: string): Promise<void> {
    let consumed: number;
    try {
      consumed = (await this.counter.add(key)).consumedPoints;
    } catch {
      return; // not counted (the memory limiter does not fail; this is only a guard for `void failed()`)
    }
    if (consumed >= this.threshold.failures)
      this.blocked.set(key, this.options.now() + this.threshold.blockSeconds * 1000);
  }
}

/** Seconds from `now` until the latest of these times, or 0 when all are past. */
export const secondsUntil = (now: number, ...times: number[]): number => {
  const until = Math.max(...times);
  return until > now ? Math.ceil((until - now) / 1000) : 0;
};

/**
 * Failed authentications, counted per client id + source address and per source address, in Redis when
 * one is configured (shared by every instance) and in memory otherwise. While Redis fails or hangs (its
 * breaker is open, see breaker.ts), each instance counts in its memory until Redis answers again.
 *
 * Counting happens on failures only. Whether a caller is blocked is decided from memory: an instance learns
 * of a block when one of its own failures reaches the limit, so across N instances a guesser gets at most
 * N - 1 extra attempts, and a successful request never waits on Redis.
 */
export class FailedAttempts implements AttemptLimiter {
  private readonly pair: Blocker;
  private readonly source: Blocker;
  private readonly now: () => number;

  constructor(options: AttemptLimiterOptions) {
    const now = (this.now = options.now ?? Date.now);
    const shared = {
      redis: options.redis,
      keyPrefix: options.keyPrefix ?? options.redis?.keyPrefix ?? 'tessera',
      now,
    };
    this.pair = new Blocker('client', options.perClientAndSource, shared);
    this.source = new Blocker('source', options.perSource, shared);
  }

  /** Seconds the caller must still wait, or 0. Memory only. */
  blockedFor(clientId: string | undefined, address: string): number {
    // Asked before every client lookup: a process that has never blocked anyone answers at once.
    if (this.pair.idle && this.source.idle) return 0;
    const source = sourceKey(address);
    return secondsUntil(
      this.now(),
      this.source.until(source),
      clientId === undefined ? 0 : this.pair.until(`${source} ${clientId}`),
    );
  }

  /** Counts a failed authentication; resolves once counted (never rejects). */
  async failed(clientId: string | undefined, address: string): Promise<void> {
    const source = sourceKey(address);
    const counts: Promise<void>[] = [this.source.failed(source)];
    if (clientId !== undefined) counts.push(this.pair.failed(`${source} ${clientId}`));
    await Promise.all(counts);
  }
}
