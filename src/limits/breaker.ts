import type { Logger } from 'pino';
import { Outage } from '../outage.js';

/**
 * While open, Redis is probed after 1 s, then 2, 4, 8, 16 and every 30 s: the first probe comes soon, since a
 * short outage is the common one and every second in memory loosens the shared limits, and a Redis that stays
 * bad costs each process one probe per 30 s. The back-off bounds only how soon an error that persists on a
 * live connection (out of memory, a read-only replica) is found gone: a reconnection ('ready') and a Redis
 * that starts answering again after a hang (a count or a probe answered late) close the breaker at once.
 */
export const PROBE_BACKOFF_MS = { initial: 1000, max: 30_000 } as const;

/** The log lines, once when the breaker opens and once when it closes (src/outage.ts). */
export const REDIS_OUTAGE = {
  down: 'Redis failed or did not answer in time: counting failed attempts and quotas in memory until Redis answers again',
  up: 'Redis answers again: counting failed attempts and quotas in Redis again',
} as const;

/** Schedules `run` after `ms`; returns a function that cancels it. */
export interface Timers {
  after(ms: number, run: () => void): () => void;
}

const realTimers: Timers = {
  after(ms, run) {
    let immediate: NodeJS.Immediate | undefined;
    // Run in the check phase, after the poll phase: an answer that arrived while this process was busy (a GC
    // pause, a long synchronous task) is read before the timeout is declared, so a slow event loop is not
    // taken for a slow Redis.
    const timer = setTimeout(() => (immediate = setImmediate(run)), ms);
    timer.unref();
    return () => {
      clearTimeout(timer);
      if (immediate !== undefined) clearImmediate(immediate);
    };
  },
};

export interface BreakerOptions {
  /** Asks Redis whether it serves counts again; resolves if it does. */
  probe: () => Promise<unknown>;
  logger: Logger;
  /**
   * How long a count (or a probe) waits for Redis before it is made in memory and the breaker opens
   * (TESSERA_REDIS_TIMEOUT_MS, 100 by default). A LAN Redis answers the counting script in well under a
   * millisecond and its slow log starts at 10 ms; 100 ms is a hundred round trips, so only a Redis that hangs
   * (or a fork stall of a multi-gigabyte dataset) reaches it, and it bounds what the requests already in
   * flight when Redis hangs wait. (It was a 250 ms command timeout paid by every request, twice for a client
   * with a minute and a day quota.)
   */
  timeoutMs: number;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  now?: () => number;
  timers?: Timers;
}

/**
 * The one notion, per process, of whether Redis can be counted on (a circuit breaker). Closed: counts go to
 * Redis, each bounded by the timeout. A count that fails or times out, or the connection closing or erring,
 * opens it: every count is then made in memory at once (no request waits on a Redis that failed recently),
 * the counts still waiting on Redis are released to memory at that moment, and Redis is probed in the
 * background after a back-off that doubles while it stays bad. A probe answered in time, or the connection
 * becoming ready again, closes it; a count or probe answered after it was given up on (a hang has ended)
 * brings the next probe forward to that moment. Logged once when it opens (then at most once a minute while it stays
 * open) and once when it closes, never per request or per probe.
 *
 * A breaker that opens again soon after closing (within the longest back-off) resumes the back-off where it
 * was, so a flapping Redis costs a wait and two log lines per back-off period, not per flap.
 */
export class RedisBreaker {
  private isOpen = false;
  private stopped = false;
  private probing = false;
  private delayMs: number;
  private closedAt = Number.NEGATIVE_INFINITY;
  private cancelProbe: (() => void) | undefined;
  /** Releases (to memory) the counts waiting on Redis; called for all of them when the breaker opens. */
  private readonly waiting = new Set<() => void>();
  private readonly outage: Outage;
  private readonly probeCommand: () => Promise<unknown>;
  private readonly timers: Timers;
  private readonly now: () => number;
  readonly timeoutMs: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;

  constructor(options: BreakerOptions) {
    this.probeCommand = options.probe;
    this.timers = options.timers ?? realTimers;
    this.now = options.now ?? Date.now;
    this.timeoutMs = options.timeoutMs;
    this.initialBackoffMs = options.initialBackoffMs ?? PROBE_BACKOFF_MS.initial;
    this.maxBackoffMs = options.maxBackoffMs ?? PROBE_BACKOFF_MS.max;
    this.delayMs = this.initialBackoffMs;
    this.outage = new Outage(options.logger, REDIS_OUTAGE, this.now);
  }

  /** Whether counts go to Redis (false while open: counting in memory). */
  get closed(): boolean {
    return !this.isOpen;
  }

  /** The back-off reached: while open, the wait before the next probe. */
  get backoffMs(): number {
    return this.delayMs;
  }

  /**
   * Runs one Redis command under the breaker. Resolves with its answer, or with undefined when the count
   * must be made in memory: the breaker is open, or the command failed, or it did not answer within the
   * timeout, or the breaker opened while it waited. Never rejects.
   */
  run<T>(command: () => Promise<T>): Promise<T | undefined> {
    if (this.isOpen || this.stopped) return Promise.resolve(undefined);
    return new Promise<T | undefined>((resolve) => {
      let settled = false;
      const settle = (value: T | undefined): void => {
        if (settled) return;
        settled = true;
        cancel();
        this.waiting.delete(release);
        resolve(value);
      };
      const release = (): void => settle(undefined);
      const cancel = this.timers.after(this.timeoutMs, () => {
        if (settled) return;
        settle(undefined);
        this.failed(new Error(`Redis did not answer within ${this.timeoutMs} ms`));
      });
      this.waiting.add(release);
      let answer: Promise<T>;
      try {
        answer = command();
      } catch (error) {
        settle(undefined);
        this.failed(error);
        return;
      }
      answer.then(
        (value) => {
          if (settled) this.answeredLate();
          else settle(value);
        },
        (error: unknown) => {
          // An error after the count was released (timed out, or the breaker opened) changes nothing.
          if (settled) return;
          settle(undefined);
          this.failed(error);
        },
      );
    });
  }

  /** A failure seen by a count, or by the connection ('close', 'error'): opens the breaker if closed. */
  failed(error: unknown): void {
    if (this.stopped) return;
    this.outage.failed(error);
    if (this.isOpen) return;
    this.isOpen = true;
    this.delayMs =
      this.now() - this.closedAt < this.maxBackoffMs
        ? Math.min(this.delayMs * 2, this.maxBackoffMs)
        : this.initialBackoffMs;
    for (const release of [...this.waiting]) release();
    this.schedule();
  }

  /** The connection is ready again (ioredis checked that the server answers): closes the breaker. */
  ready(): void {
    if (!this.stopped) this.close();
  }

  /** Stops probing and releases every waiting count (the process is closing). */
  stop(): void {
    this.stopped = true;
    this.cancelProbe?.();
    this.cancelProbe = undefined;
    for (const release of [...this.waiting]) release();
  }

  private close(): void {
    if (!this.isOpen) return;
    this.isOpen = false;
    this.closedAt = this.now();
    this.cancelProbe?.();
    this.cancelProbe = undefined;
    this.outage.recovered();
  }

  private schedule(): void {
    this.cancelProbe?.();
    this.cancelProbe = this.timers.after(this.delayMs, () => {
      this.cancelProbe = undefined;
      this.probe();
    });
  }

  private probe(): void {
    if (!this.isOpen || this.stopped || this.probing) return;
    this.probing = true;
    let timedOut = false;
    const cancel = this.timers.after(this.timeoutMs, () => {
      timedOut = true;
      this.probing = false;
      this.probeFailed(new Error(`Redis did not answer a probe within ${this.timeoutMs} ms`));
    });
    let answer: Promise<unknown>;
    try {
      answer = this.probeCommand();
    } catch (error) {
      answer = Promise.reject(error);
    }
    answer.then(
      () => {
        if (!timedOut) {
          cancel();
          this.probing = false;
          this.close();
          return;
        }
        this.answeredLate();
      },
      (error: unknown) => {
        if (timedOut) return;
        cancel();
        this.probing = false;
        this.probeFailed(error);
      },
    );
  }

  /**
   * A count or a probe that had been given up on was answered after all: Redis answers again (a pause or a
   * hang has ended). Probe now instead of after the back-off, and close if that answer comes in time. A
   * breaker opened by a hang thus always has a command pending that tells it when the hang ends.
   */
  private answeredLate(): void {
    if (!this.isOpen || this.probing || this.stopped) return;
    this.cancelProbe?.();
    this.cancelProbe = undefined;
    this.probe();
  }

  private probeFailed(error: unknown): void {
    if (!this.isOpen || this.stopped) return;
    this.outage.failed(error);
    this.delayMs = Math.min(this.delayMs * 2, this.maxBackoffMs);
    this.schedule();
  }
}
