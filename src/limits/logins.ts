import { LRUCache } from 'lru-cache';
import { Blocker, secondsUntil, sourceKey, type Threshold } from './attempts.js';
import type { SharedRedis } from './redis.js';

export interface LoginAttemptsOptions {
  redis?: SharedRedis | undefined;
  keyPrefix?: string;
  /** Failed logins for one email, from anywhere (TESSERA_ATTEMPTS_LOGIN_*). */
  perOperator: Threshold;
  /** Failed logins from one address, whatever the emails (TESSERA_ATTEMPTS_LOGIN_SOURCE_*). */
  perSource: Threshold;
  now?: () => number;
}

/**
 * The console's failed logins (MANAGEMENT.md, "Sessions"), throttled per operator and per address. Unlike a
 * client secret (256 random bits), a password can be guessed: a blocked login is refused even when its password
 * is right, or the block would tell a guesser which guess was. The per-operator count is kept for any email,
 * known or not, so that the answers of an unknown email and a wrong password stay the same once blocked too.
 */
export class LoginAttempts {
  private readonly operator: Blocker;
  private readonly source: Blocker;
  private readonly now: () => number;
  /** The minute of the last blocked login recorded per address (see refusalToRecord). */
  private readonly recorded = new LRUCache<string, number>({ max: 100_000 });

  constructor(options: LoginAttemptsOptions) {
    const now = (this.now = options.now ?? Date.now);
    // The Redis connection's prefix when none is given, as FailedAttempts has it (TESSERA_REDIS_PREFIX).
    const keyPrefix = options.keyPrefix ?? options.redis?.keyPrefix ?? 'tessera';
    const shared = { redis: options.redis, keyPrefix, now };
    this.operator = new Blocker('login', options.perOperator, shared);
    this.source = new Blocker('login-source', options.perSource, shared);
  }

  /** Seconds a login for this email from this address must still wait, or 0. Memory only. */
  blockedFor(email: string, address: string): number {
    if (this.operator.idle && this.source.idle) return 0;
    return secondsUntil(this.now(), this.operator.until(email), this.source.until(sourceKey(address)));
  }

  /**
   * Whether a blocked login from this address is the first of its minute: that one is recorded in the audit
   * trail, the others are not, so that a guesser hammering a block cannot fill the store (memory only).
   */
  refusalToRecord(address: string): boolean {
    const minute = Math.floor(this.now() / 60_000);
    const key = sourceKey(address);
    if (this.recorded.get(key) === minute) return false;
    this.recorded.set(key, minute);
    return true;
  }

  /** Counts a failed login; resolves once counted (never rejects). */
  async failed(email: string, address: string): Promise<void> {
    await Promise.all([this.operator.failed(email), this.source.failed(sourceKey(address))]);
  }
}
