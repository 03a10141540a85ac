import type { SecretStore } from '../store/types.js';
import { systemClock, type Clock, type Job } from '../clock.js';

const MINUTE_MS = 60_000;

/**
 * When each client secret was last used (docs/interface.md: "a last-used time, updated at most once a minute,
 * off the token path"). The token path only notes the secret's id in memory, once per secret and minute;
 * a timer writes what was noted in one batch, so a busy client costs one small write a minute, not one per
 * token. Lost on a crash: it is a hint for operators (which secret is still in use), not an audit record.
 */
export class SecretUsage {
  /**
   * The secrets noted in the minute `minute`: a new set each minute, the last one dropped whole (a pass over a
   * hundred thousand entries to forget the old ones stalled requests for 5–30 ms every write).
   */
  private noted = new Set<string>();
  private minute = -1;
  /** The secrets used since the last write. */
  private pending = new Set<string>();
  private job: Job | undefined;
  private readonly clock: Clock;
  private writing: Promise<void> | undefined;

  constructor(
    private readonly store: Pick<SecretStore, 'markSecretsUsed'>,
    private readonly options: {
      flushMs?: number;
      /** Time of day and the flush job (clock.ts); the wall clock when left out. */
      clock?: Clock;
      onError?: (error: unknown) => void;
    } = {},
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /** Called by the token path for every secret that authenticated a request: a map lookup at most. */
  used(secretId: string): void {
    const now = this.clock.now();
    const minute = Math.floor(now / MINUTE_MS);
    if (minute !== this.minute) {
      this.minute = minute;
      this.noted = new Set();
    } else if (this.noted.has(secretId)) return;
    this.noted.add(secretId);
    this.pending.add(secretId);
  }

  start(): void {
    this.job = this.clock.every(this.options.flushMs ?? 5000, () => void this.flush());
  }

  /** Writes what was noted since the last write. Never rejects (failures go to onError and are dropped). */
  flush(): Promise<void> {
    this.writing ??= this.write().finally(() => (this.writing = undefined));
    return this.writing;
  }

  private async write(): Promise<void> {
    // Forget the minutes gone by, so that a server gone quiet holds none.
    if (Math.floor(this.clock.now() / MINUTE_MS) !== this.minute) this.noted = new Set();
    if (this.pending.size === 0) return;
    // One time for the batch (the write's): a last-used time is a minute-grained hint, and one time lets a
    // whole batch be one statement per thousand secrets.
    const batch = [...this.pending];
    this.pending = new Set();
    try {
      await this.store.markSecretsUsed(batch, new Date(this.clock.now()).toISOString());
    } catch (error) {
      this.options.onError?.(error);
    }
  }

  async stop(): Promise<void> {
    this.job?.stop();
    await this.flush();
  }
}
