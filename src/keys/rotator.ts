import { SIGNING_ALGS } from '../domain/jose.js';
import type { KeyStore } from '../store/types.js';
import { selectKeys } from './lifecycle.js';
import type { MasterKey } from './master-key.js';
import { pendingKey, rotateKey } from './rotation.js';
import { systemClock, type Clock, type Job } from '../clock.js';

export interface RotatorOptions {
  /** A key signs this long (ms) before its successor is scheduled. */
  intervalMs: number;
  /** The successor is published this long (ms) before it signs. */
  publishAheadMs: number;
  maxTokenTtlMs: number;
  /** Time of day and the periodic job (clock.ts); the wall clock when left out. */
  clock?: Clock;
  onRotated?: (alg: string, kid: string, activatesAt: string) => void;
  onError?: (error: unknown) => void;
}

/**
 * Automatic rotation. Every instance runs one; the store's serialised plan lets exactly one of them
 * schedule each successor. A check is one read of the key table, once a minute at most.
 */
export class KeyRotator {
  private job: Job | undefined;
  private running: Promise<void> | undefined;
  private readonly now: () => number;

  constructor(
    private readonly store: KeyStore,
    private readonly master: MasterKey,
    private readonly options: RotatorOptions,
  ) {
    this.now = (options.clock ?? systemClock).now;
  }

  start(): void {
    const every = Math.min(60_000, Math.max(1000, Math.floor(this.options.intervalMs / 4)));
    this.job = (this.options.clock ?? systemClock).every(every, () => void this.check());
  }

  async stop(): Promise<void> {
    this.job?.stop();
    this.job = undefined;
    await this.running;
  }

  /** Schedules a successor for every algorithm whose signing key is due. Never rejects. */
  check(): Promise<void> {
    this.running ??= this.rotateDue()
      .catch((error: unknown) => this.options.onError?.(error))
      .finally(() => (this.running = undefined));
    return this.running;
  }

  private async rotateDue(): Promise<void> {
    const now = this.now();
    const keys = await this.store.listSigningKeys();
    const { active } = selectKeys(keys, now, this.options.maxTokenTtlMs);
    for (const alg of SIGNING_ALGS) {
      const current = active.get(alg);
      if (!current || now - Date.parse(current.activatesAt) < this.options.intervalMs) continue;
      // Already scheduled (by this or another instance): no key pair generated just to be thrown away.
      if (pendingKey(keys, alg, now)) continue;
      const rotated = await rotateKey(
        this.store,
        this.master,
        alg,
        now,
        this.options.publishAheadMs,
        undefined,
        this.now,
      );
      if (rotated) this.options.onRotated?.(alg, rotated.key.kid, rotated.key.activatesAt);
    }
  }
}
