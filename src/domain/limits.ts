/*
 * The limiters the token path asks: the ports of the issuance quotas and of the failed-attempt limits, both
 * implemented in src/limits/.
 */

/** Tokens per minute and per day a client may get; null is no limit. */
export interface Quota {
  perMinute: number | null;
  perDay: number | null;
}

/** Issuance quotas (see limits/quotas.ts). */
export interface QuotaLimiter {
  /** Counts one token; resolves with the seconds to wait if that is over a quota, else 0. */
  take(clientId: string, quota: Quota): Promise<number>;
}

/** Failed authentications, counted per client id + source and per source (see limits/attempts.ts). */
export interface AttemptLimiter {
  /** Seconds the caller must still wait, or 0; answered from memory. */
  blockedFor(clientId: string | undefined, source: string): number;
  /** Counts a failure; the caller does not wait for it. */
  failed(clientId: string | undefined, source: string): Promise<void>;
}
