import type { Logger } from 'pino';
import { AUDIT_BATCH, type AuditEvent, type AuditStore } from '../store/types.js';

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
const FAILURE_LOG_EVERY_MS = 60_000;

/** A fixed-size queue: pushing past capacity drops the oldest in O(1). Sequence numbers never repeat. */
class Ring<T> {
  private readonly items: (T | undefined)[];
  private head = 0; // sequence number of the oldest item held
  private tail = 0; // sequence number the next item gets

  constructor(private readonly capacity: number) {
    this.items = new Array<T | undefined>(capacity);
  }

  get size(): number {
    return this.tail - this.head;
  }

  /** Adds an item; returns the sequence number of the oldest one if it was dropped to make room. */
  push(item: T): number | undefined {
    let dropped: number | undefined;
    if (this.size === this.capacity) {
      this.items[this.head % this.capacity] = undefined;
      dropped = this.head++;
    }
    this.items[this.tail % this.capacity] = item;
    this.tail++;
    return dropped;
  }

  /** Up to `count` of the oldest items, and the sequence number just past them. */
  peek(count: number): { items: T[]; end: number } {
    const end = Math.min(this.tail, this.head + count);
    const items: T[] = [];
    for (let seq = this.head; seq < end; seq++) items.push(this.items[seq % this.capacity]!);
    return { items, end };
  }

  /** Forgets every item before `end` that is still held (some may have been dropped meanwhile). */
  release(end: number): void {
    for (; this.head < end; this.head++) this.items[this.head % this.capacity] = undefined;
  }
}

// eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
const CONTROL = /[\u0000-\u001f\u007f]/;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is replaced
const CONTROLS = /[\u0000-\u001f\u007f]/g;

const hasControl = (value: string | null): boolean => value !== null && CONTROL.test(value);

/** Text the store can take and a terminal can show: no control characters (PostgreSQL refuses NUL). */
function clean(value: string | null): string | null {
  return value === null ? null : value.replace(CONTROLS, '\uFFFD');
}

/**
 * The audit trail. Each event is logged as JSON at once and queued; the queue is written to the store in
 * batches by a timer, off the token path. While the store is down, events wait in memory (bounded).
 */
export class AuditRecorder {
  private readonly queue: Ring<AuditEvent>;
  private dropped = 0;
  /** The sequence number just past the batch being written (0: none), and how many of it left the queue. */
  private writingEnd = 0;
  private droppedWhileWriting = 0;
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private lastPrune = 0;
  private lastFailureLogged = 0;
  private readonly now: () => number;
  private readonly batchSize: number;

  constructor(
    private readonly store: AuditStore,
    private readonly options: AuditRecorderOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.batchSize = options.batch ?? AUDIT_BATCH;
    this.queue = new Ring(options.maxQueued ?? 100_000);
  }

  /** Events waiting to be written to the store. */
  get queued(): number {
    return this.queue.size;
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.options.flushMs ?? 1000);
    this.timer.unref();
  }

  record(event: AuditEvent): void {
    // Nearly every event is clean: it is then queued as it is, without a copy.
    const dirty =
      hasControl(event.clientId) ||
      hasControl(event.audience) ||
      hasControl(event.reason) ||
      hasControl(event.source);
    const safe: AuditEvent = dirty
      ? {
          ...event,
          clientId: clean(event.clientId),
          audience: clean(event.audience),
          reason: clean(event.reason),
          source: clean(event.source),
        }
      : event;
    this.options.logger.info({ audit: safe }, safe.outcome === 'issued' ? 'token issued' : 'token refused');
    const lost = this.queue.push(safe);
    // An event of the batch being written is lost only if that write fails (see write).
    if (lost !== undefined) {
      if (lost < this.writingEnd) this.droppedWhileWriting++;
      else this.dropped++;
    }
  }

  /** Writes what is queued; on failure keeps it for the next attempt. Never rejects. */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async write(): Promise<void> {
    const size = this.batchSize;
    try {
      while (this.queue.size > 0) {
        const { items, end } = this.queue.peek(size);
        this.writingEnd = end;
        try {
          await this.store.appendAuditEvents(items);
        } catch (error) {
          this.dropped += this.droppedWhileWriting;
          throw error;
        } finally {
          this.writingEnd = 0;
          this.droppedWhileWriting = 0;
        }
        this.queue.release(end);
        // SQLite writes synchronously, and an awaited promise that is already settled does not let requests
        // in: yield between statements, so a second's worth of events never holds the server for long.
        if (this.queue.size > 0) await new Promise<void>((resolve) => setImmediate(resolve));
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
    } catch (error) {
      // The events stay queued for the next attempt; say so, once a minute at most.
      const now = this.now();
      if (now - this.lastFailureLogged >= FAILURE_LOG_EVERY_MS) {
        this.lastFailureLogged = now;
        this.options.logger.error(
          { err: error, queued: this.queue.size },
          'audit events could not be written yet',
        );
      }
    }
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flushing;
    await this.flush();
  }
}
