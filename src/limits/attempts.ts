import { LRUCache } from 'lru-cache';
import type { AttemptLimiter } from '../domain/token-service.js';
import { Counter } from './counter.js';
import type { SharedRedis } from './redis.js';

/** A limit: this many failures within the window block the key for `blockSeconds`. */
export interface Threshold {
  failures: number;
  windowSeconds: number;
  blockSeconds: number;
}

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
  private readonly blocked = new LRUCache<string, number>({ max: MAX_BLOCKED });
  private readonly pair: Counter;
  private readonly source: Counter;
  private readonly now: () => number;
  private readonly thresholds: { pair: Threshold; source: Threshold };

  constructor(options: AttemptLimiterOptions) {
    this.now = options.now ?? Date.now;
    const { perClientAndSource: perPair, perSource } = options;
    const prefix = options.keyPrefix ?? options.redis?.keyPrefix ?? 'tessera';
    const limiter = (name: string, t: Threshold): Counter =>
      new Counter(
        { points: t.failures, duration: t.windowSeconds, keyPrefix: `${prefix}:fail:${name}` },
        options.redis,
      );
    this.pair = limiter('client', perPair);
    this.source = limiter('source', perSource);
    this.thresholds = { pair: perPair, source: perSource };
  }

  /** Seconds the caller must still wait, or 0. Memory only. */
  blockedFor(clientId: string | undefined, address: string): number {
    // Asked before every client lookup: a process that has never blocked anyone answers at once.
    if (this.blocked.size === 0) return 0;
    const source = sourceKey(address);
    const now = this.now();
    let until = this.blocked.get(`s ${source}`) ?? 0;
    if (clientId !== undefined) until = Math.max(until, this.blocked.get(`c ${source} ${clientId}`) ?? 0);
    return until > now ? Math.ceil((until - now) / 1000) : 0;
  }

  /** Counts a failed authentication; resolves once counted (never rejects). */
  async failed(clientId: string | undefined, address: string): Promise<void> {
    const source = sourceKey(address);
    const counts: Promise<void>[] = [this.count(this.source, source, `s ${source}`, this.thresholds.source)];
    if (clientId !== undefined) {
      counts.push(
        this.count(this.pair, `${source} ${clientId}`, `c ${source} ${clientId}`, this.thresholds.pair),
      );
    }
    await Promise.all(counts);
  }

  private async count(limiter: Counter, key: string, blockKey: string, t: Threshold): Promise<void> {
    let consumed: number;
    try {
      consumed = (await limiter.add(key)).consumedPoints;
    } catch {
      return; // not counted (the memory limiter does not fail; this is only a guard for `void failed()`)
    }
    if (consumed >= t.failures) this.blocked.set(blockKey, this.now() + t.blockSeconds * 1000);
  }
}
