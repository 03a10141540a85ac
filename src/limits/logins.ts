import { boundedLru } from '../lru.js';
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
 * The console's failed logins (docs/management.md, "Sessions"), throttled per operator and per address. Unlike a
 * client secret (256 random bits), a password can be guessed: a blocked login is refused even when its password
 * is right, or the block would tell a guesser which guess was. The per-operator count is kept for any email,
 * known or not, so that the answers of an unknown email and a wrong password stay the same once blocked too.
 */
export class LoginAttempts {
  private readonly operator: Blocker;
  private readonly source: Blocker;
  private readonly now: () => number;
  /** The minute of the last blocked login recorded per address (see refusalToRecord). */
  private readonly recorded = boundedLru<string, number>(100_000);

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

  /**
   * Counts a login under both limits before its password is hashed, so that logins made at once never check
   * more passwords than a limit allows (a failure counted after its ~150 ms hash let a burst of 12 check 9 with
   * a limit of 3). Refused (`refusedFor` > 0) when either limit has no place left: its places are given back at
   * once, it checks no password and counts as no failure. Never rejects.
   */
  async begin(email: string, address: string): Promise<LoginAttempt> {
    const [operator, source] = await Promise.all([
      this.operator.begin(email),
      this.source.begin(sourceKey(address)),
    ]);
    const both = [operator, source];
    if (!operator.within || !source.within) {
      await Promise.all(both.map((r) => r.release()));
      const refusedFor = secondsUntil(this.now(), ...both.map((r) => r.retryAt));
      // At least a second: a refusal always says to wait.
      return { refusedFor: Math.max(1, refusedFor), release: async () => {}, failed: async () => {} };
    }
    return {
      refusedFor: 0,
      release: async () => void (await Promise.all(both.map((r) => r.release()))),
      failed: async () => void (await Promise.all(both.map((r) => r.failed()))),
    };
  }
}

/** A login counted by LoginAttempts.begin. Exactly one of release and failed ends one that was not refused. */
export interface LoginAttempt {
  /** 0: the password may be checked. Else the login is refused: the seconds to wait (Retry-After). */
  readonly refusedFor: number;
  /** The login succeeded, or its password was never checked (an error): its places are given back. */
  release(): Promise<void>;
  /** The password was not right (or no operator may log in with it): counted, and maybe blocking. */
  failed(): Promise<void>;
}
