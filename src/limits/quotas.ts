import type { RateLimiterRes } from 'rate-limiter-flexible';
import type { Quota, QuotaLimiter } from '../domain/limits.js';
import { Counter } from './counter.js';
import type { SharedRedis } from './redis.js';

/** Counters only: each client's own limit is compared here, so one limiter serves every quota. */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/**
 * Per-client issuance quotas (tokens per minute, per day), counted in Redis when one is configured, so that
 * every instance shares them, and in memory otherwise. While Redis fails or hangs (its breaker is open, see
 * breaker.ts) each instance counts in its memory, at once: a token waits on Redis at most TESSERA_REDIS_TIMEOUT_MS (100 ms), and only
 * if it was already waiting when Redis failed. Quotas fail open: a token is never refused for want of a
 * counter.
 */
export class IssuanceQuotas implements QuotaLimiter {
  private readonly minute: Counter;
  private readonly day: Counter;

  constructor(options: { redis?: SharedRedis | undefined; keyPrefix?: string } = {}) {
    const prefix = options.keyPrefix ?? options.redis?.keyPrefix ?? 'tessera';
    const limiter = (name: string, duration: number): Counter =>
      new Counter({ points: UNBOUNDED, duration, keyPrefix: `${prefix}:quota:${name}` }, options.redis);
    this.minute = limiter('minute', 60);
    this.day = limiter('day', 86_400);
  }

  async take(clientId: string, quota: Quota): Promise<number> {
    // The day counts only tokens the minute let through: requests refused for the minute use no day.
    if (quota.perMinute !== null) {
      const wait = await this.count(this.minute, clientId, quota.perMinute);
      if (wait > 0) return wait;
    }
    return quota.perDay === null ? 0 : this.count(this.day, clientId, quota.perDay);
  }

  /** Seconds until the window resets if this token is over the limit, else 0. */
  private async count(limiter: Counter, key: string, limit: number): Promise<number> {
    let result: RateLimiterRes;
    try {
      result = await limiter.add(key);
    } catch {
      return 0; // no counter at all: do not refuse for want of one
    }
    return result.consumedPoints > limit ? Math.max(1, Math.ceil(result.msBeforeNext / 1000)) : 0;
  }
}
