import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { SharedRedis } from './redis.js';

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

/**
 * One fixed-window counter (rate-limiter-flexible): in Redis when one is configured and its breaker is
 * closed, shared by every instance; in this process's memory otherwise, at once while the breaker is open.
 * The memory counts are this process's own: they start from what it counted in memory before (within the
 * window), not from Redis's count, and are not copied to Redis when it is back.
 */
export class Counter {
  private readonly memory: RateLimiterMemory;
  private readonly redis: RateLimiterRedis | undefined;

  constructor(
    options: CounterOptions,
    private readonly shared?: SharedRedis,
  ) {
    this.memory = new RateLimiterMemory(options);
    this.redis = shared
      ? new RateLimiterRedis({ ...options, storeClient: shared.client, rejectIfRedisNotReady: true })
      : undefined;
  }

  /** Adds one to the key's count and answers with the count and the time left in its window. */
  async add(key: string): Promise<RateLimiterRes> {
    if (this.redis !== undefined && this.shared !== undefined) {
      const redis = this.redis;
      const counted = await this.shared.breaker.run(() => answer(redis.consume(key)));
      if (counted !== undefined) return counted;
    }
    return answer(this.memory.consume(key));
  }
}
