import type { Redis } from 'ioredis';
import {
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import type { Quota, QuotaLimiter } from '../domain/token-service.js';

/** Counters only: each client's own limit is compared here, so one limiter serves every quota. */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/**
 * Per-client issuance quotas (tokens per minute, per day), counted in Redis when one is configured, so that
 * every instance shares them, and in memory otherwise (or while Redis is unreachable).
 */
export class IssuanceQuotas implements QuotaLimiter {
  private readonly minute: RateLimiterAbstract;
  private readonly day: RateLimiterAbstract;

  constructor(options: { redis?: Redis | undefined; keyPrefix?: string } = {}) {
    const prefix = options.keyPrefix ?? 'tessera';
    const limiter = (name: string, duration: number): RateLimiterAbstract => {
      const common = { points: UNBOUNDED, duration, keyPrefix: `${prefix}:quota:${name}` };
      const memory = new RateLimiterMemory(common);
      return options.redis
        ? new RateLimiterRedis({
            ...common,
            storeClient: options.redis,
            insuranceLimiter: memory,
            rejectIfRedisNotReady: true,
          })
        : memory;
    };
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
  private async count(limiter: RateLimiterAbstract, key: string, limit: number): Promise<number> {
    let result: RateLimiterRes;
    try {
      result = await limiter.consume(key);
    } catch (error) {
      if (!(error instanceof RateLimiterRes)) return 0; // no store at all: do not refuse for want of a counter
      result = error;
    }
    return result.consumedPoints > limit ? Math.max(1, Math.ceil(result.msBeforeNext / 1000)) : 0;
  }
}
