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

  constructor(options: LoginAttemptsOptions) {
    const now = (this.now = options.now ?? Date.now);
    const shared = { redis: options.redis, keyPrefix: options.keyPrefix ?? 'tessera', now };
    this.operator = new Blocker('login', options.perOperator, shared);
    this.source = new Blocker('login-source', options.perSource, shared);
  }

  /** Seconds a login for this email from this address must still wait, or 0. Memory only. */
  blockedFor(email: string, address: string): number {
    if (this.operator.idle && this.source.idle) return 0;
    return secondsUntil(this.now(), this.operator.until(email), this.source.until(sourceKey(address)));
  }

  /** Counts a failed login; resolves once counted (never rejects). */
  async failed(email: string, address: string): Promise<void> {
    await Promise.all([this.operator.failed(email), this.source.failed(sourceKey(address))]);
  }
}
