import type { Logger } from 'pino';

/** How often an outage that lasts is logged again. */
const OUTAGE_REPEAT_MS = 60_000;

export interface OutageMessages {
  /** Logged (at error) when the outage begins, and again at most once a minute while it lasts. */
  down: string;
  /** Logged (at info) once when it ends. */
  up: string;
}

/**
 * One dependency's outage as the log tells it (the store, the change listener, Redis, the audit spool): once
 * when it begins, at most once a minute while it lasts (with how long so far), and once when it ends, with
 * how long it lasted. Whatever reports the failures (a poll twice a second, every readiness probe, every
 * reconnection attempt) can report each one; the log does not grow with them.
 */
export class Outage {
  private since: number | undefined;
  private lastLogged = 0;
  private failures = 0;

  constructor(
    private readonly logger: Logger,
    private readonly messages: OutageMessages,
    private readonly now: () => number = Date.now,
    private readonly repeatMs = OUTAGE_REPEAT_MS,
  ) {}

  /** Whether the last report was a failure. */
  get down(): boolean {
    return this.since !== undefined;
  }

  /** Reports a failure; `context` is added to the line (e.g. which operation failed). */
  failed(error: unknown, context: Record<string, unknown> = {}): void {
    const now = this.now();
    this.failures++;
    if (this.since === undefined) {
      this.since = now;
      this.lastLogged = now;
      this.logger.error({ err: error, ...context }, this.messages.down);
      return;
    }
    if (now - this.lastLogged < this.repeatMs) return;
    this.lastLogged = now;
    this.logger.error(
      { err: error, ...context, failingForMs: now - this.since, failures: this.failures },
      this.messages.down,
    );
  }

  /** Reports a success: ends the outage, if there was one, with one line. */
  recovered(context: Record<string, unknown> = {}): void {
    if (this.since === undefined) return;
    this.logger.info(
      { ...context, downForMs: this.now() - this.since, failures: this.failures },
      this.messages.up,
    );
    this.since = undefined;
    this.failures = 0;
  }
}
