import type { Logger } from 'pino';
import type { AuditEvent, AuditStore } from '../store/types.js';

export interface AuditRecorderOptions {
  /** How often queued events are written, in milliseconds. */
  flushMs?: number;
  /** Most events written in one statement. */
  batch?: number;
  /** Most events kept while the store cannot take them; the oldest are dropped past it (and counted). */
  maxQueued?: number;
  /** Events older than this many seconds are deleted (checked hourly). */
  retentionSeconds: number;
  logger: Logger;
  now?: () => number;
}

const PRUNE_EVERY_MS = 3600_000;

/**
 * The audit trail. Each event is logged as JSON at once and queued; the queue is written to the store in
 * batches by a timer, off the token path. While the store is down, events wait in memory (bounded).
 */
export class AuditRecorder {
  private queue: AuditEvent[] = [];
  private dropped = 0;
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private lastPrune = 0;
  private readonly now: () => number;

  constructor(
    private readonly store: AuditStore,
    private readonly options: AuditRecorderOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.options.flushMs ?? 1000);
    this.timer.unref();
  }

  record(event: AuditEvent): void {
    this.options.logger.info({ audit: event }, event.outcome === 'issued' ? 'token issued' : 'token refused');
    if (this.queue.length >= (this.options.maxQueued ?? 100_000)) {
      this.queue.shift();
      this.dropped++;
    }
    this.queue.push(event);
  }

  /** Writes what is queued; on failure keeps it for the next attempt. Never rejects. */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async write(): Promise<void> {
    const size = this.options.batch ?? 1000;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.slice(0, size);
        await this.store.appendAuditEvents(batch);
        this.queue.splice(0, batch.length);
      }
      if (this.dropped > 0) {
        this.options.logger.error(
          { dropped: this.dropped },
          'audit events were dropped while the store was down',
        );
        this.dropped = 0;
      }
      const now = this.now();
      if (now - this.lastPrune >= PRUNE_EVERY_MS) {
        this.lastPrune = now;
        const pruned = await this.store.pruneAuditEvents(
          new Date(now - this.options.retentionSeconds * 1000),
        );
        if (pruned > 0) this.options.logger.info({ pruned }, 'old audit events deleted');
      }
    } catch {
      // The store is down: the events stay queued; the outage itself is logged by the change feed.
    }
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flushing;
    await this.flush();
  }
}
