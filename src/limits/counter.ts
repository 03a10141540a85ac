import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { clientSpan } from '../telemetry/client-span.js';
import type { SharedRedis } from './redis.js';
import { systemClock } from '../clock.js';

export interface CounterOptions {
  /** The limit (rate-limiter-flexible's points); a count past it still answers, with consumedPoints > points. */
  points: number;
  /** The window, in seconds, from the first count of a key. */
  duration: number;
  keyPrefix: string;
}

/** consume() rejects with the result once the points are used up: that is an answer, not an error. */
function answer(consumed: Promise<RateLimiterRes>): Promise<RateLimiterRes> {
  return consumed.catch((result: unknown) => {
    if (result instanceof RateLimiterRes) return result;
    throw result;
  });
}

/** One count taken by Counter.take: the key's count with it, and how to take it back. */
export interface Taken {
  /** The key's count, this one included. */
  consumed: number;
  /**
   * Takes this count back, where it was made (Redis or memory); at most once, never rejects. A count the
   * window has dropped (or is about to) is left: taking it back from the next window would give that one a
   * count below zero, a free attempt. If Redis does not answer, the count stays: one too many, never too few.
   */
  giveBack(): Promise<void>;
}

/**
 * Less than this left in a Redis window (or half of a shorter window), a count is not given back: Redis's
 * clock is not ours, and the way there takes time. The memory limiter's clock is ours: no margin.
 */
const GIVE_BACK_MARGIN_MS = 1000;

/**
 * One fixed-window counter (rate-limiter-flexible): in Redis when one is configured and its breaker is
 * closed, shared by every instance; in this process's memory otherwise, at once while the breaker is open.
 * The memory counts are this process's own: they start from what it counted in memory before (within the
 * window), not from Redis's count, and are not copied to Redis when it is back.
 */
export class Counter {
  private readonly memory: RateLimiterMemory;
  private readonly redis: RateLimiterRedis | undefined;
  private readonly redisMarginMs: number;

  constructor(
    options: CounterOptions,
    private readonly shared?: SharedRedis,
  ) {
    this.memory = new RateLimiterMemory(options);
    this.redisMarginMs = Math.min(GIVE_BACK_MARGIN_MS, (options.duration * 1000) / 2);
    this.redis = shared
      ? new RateLimiterRedis({ ...options, storeClient: shared.client, rejectIfRedisNotReady: true })
      : undefined;
  }

  /** Adds one to the key's count and answers with the count and the time left in its window. */
  async add(key: string): Promise<RateLimiterRes> {
    if (this.redis !== undefined && this.shared !== undefined) {
      const redis = this.redis;
      const counted = await this.shared.breaker.run(() =>
        redisSpan('consume', () => answer(redis.consume(key))),
      );
      if (counted !== undefined) return counted;
    }
    return answer(this.memory.consume(key));
  }

  /** Adds one to the key's count, as add() does, and answers how to take it back (see Taken). */
  async take(key: string): Promise<Taken> {
    if (this.redis !== undefined && this.shared !== undefined) {
      const redis = this.redis;
      const breaker = this.shared.breaker;
      const counted = await breaker.run(() => redisSpan('consume', () => answer(redis.consume(key))));
      if (counted !== undefined)
        return taken(counted, this.redisMarginMs, () =>
          breaker.run(() => redisSpan('reward', () => redis.reward(key))),
        );
    }
    const memory = this.memory;
    return taken(await answer(memory.consume(key)), 0, () => memory.reward(key));
  }
}

/** A Redis command of a count, a CLIENT span of the request it counts for (traces). */
const redisSpan = <T>(operation: string, work: () => Promise<T>): Promise<T> =>
  clientSpan(operation, { 'db.system.name': 'redis', 'db.operation.name': operation }, work);

function taken(result: RateLimiterRes, marginMs: number, reward: () => Promise<unknown>): Taken {
  // rate-limiter-flexible times its windows by the wall clock: so is the end of this one.
  const windowEnds = systemClock.now() + result.msBeforeNext;
  let given = false;
  return {
    consumed: result.consumedPoints,
    async giveBack() {
      if (given || systemClock.now() >= windowEnds - marginMs) return;
      given = true;
      try {
        await reward();
      } catch {
        // Kept (see Taken): the memory limiter does not fail, and the breaker answers undefined, not an error.
      }
    },
  };
}
