import type { Clock, Job } from '../clock.js';
import type { Change, ChangeFeed } from '../store/types.js';

/**
 * The change feed is read at most CHANGE_BATCH records a query, and each batch is sized from the last one's time
 * to take about CHANGE_BATCH_MS of this thread (reading it, dropping the cached clients, adding their ids, the
 * followers' reads), at least CHANGE_BATCH_MIN records: between batches requests are answered. With a fixed 1000,
 * the 40,000 records of an apply of 20,000 clients were 16–25 ms batches on a slow machine, one after the other,
 * and a request that needed the thread between two of them waited up to 160 ms.
 */
const CHANGE_BATCH = 1000;
const CHANGE_BATCH_MIN = 50;
const CHANGE_BATCH_MS = 4;
/** Changes are kept this long for the instances that follow them, and pruned this often. */
const CHANGE_RETENTION_MS = 24 * 3600 * 1000;
const PRUNE_EVERY_MS = 10 * 60 * 1000;

/** What reads the feed's changes: given each batch before the feed moves past it, then told of every good read. */
export interface FeedConsumer {
  /** A batch of changes, before the feed moves past it: a failure has the batch read again (apply idempotently). */
  apply(changes: Change[]): Promise<void>;
  /** After every read of the feed that succeeded, at the clock's `now`. */
  afterRead(now: number): Promise<void>;
}

export interface FeedReaderOptions {
  /** How often the feed is read, in milliseconds (the backstop where the store pushes). */
  pollMs: number;
  clock: Clock;
  onError?: ((error: unknown, during: 'change feed' | 'change listener') => void) | undefined;
  /** The feed was read without error (after failures, this is the recovery). */
  onRecovered?: (() => void) | undefined;
  /** The change listener is connected again, or delivered a notification (after failures, its recovery). */
  onListening?: (() => void) | undefined;
}

/**
 * Following the store's change feed (store/types.ts, ChangeFeed): where it stands, reading it every `pollMs` and
 * whenever the store pushes (PostgreSQL NOTIFY), one read at a time (a read asked during one runs once more after
 * it), each batch handed to the consumer (the directory: its caches, its id set, its followers) before the feed
 * moves past it; old changes pruned now and then; and whether it is being read (`failing`, `following`), which
 * readiness and the stale window go by. The directory (directory.ts) is the lookup side of the read model; this is
 * the side that keeps it current.
 */
export class FeedReader {
  private lastSeq = 0;
  /** The batch size, as the last big read left it (see CHANGE_BATCH_MS). */
  private changeBatch = CHANGE_BATCH;
  private job: Job | undefined;
  private unsubscribe: (() => Promise<void>) | undefined;
  private polling: Promise<void> | undefined;
  private pollAgain: Promise<void> | undefined;
  private lastPrune = 0;
  /** The last read of the feed failed. */
  private failed = false;
  /** When the feed was last read without error (performance.now(): how long ago is a real event's duration). */
  private lastRead = performance.now();

  constructor(
    private readonly store: ChangeFeed,
    private readonly consumer: FeedConsumer,
    private readonly options: FeedReaderOptions,
  ) {}

  /** Takes the feed's position: what is written after it comes through the feed. */
  async mark(): Promise<void> {
    this.lastSeq = await this.store.latestChange();
  }

  /** Starts reading on the clock, and on the store's pushes where it has them. */
  async follow(): Promise<void> {
    this.job = this.options.clock.every(this.options.pollMs, () => void this.poll());
    // Where the store pushes (PostgreSQL NOTIFY), read the feed at once; the poll stays as the backstop.
    this.unsubscribe = await this.store.subscribe?.(
      () => {
        this.options.onListening?.();
        void this.poll();
      },
      (error) => this.options.onError?.(error, 'change listener'),
    );
  }

  async stop(): Promise<void> {
    this.job?.stop();
    this.job = undefined;
    await this.unsubscribe?.();
    this.unsubscribe = undefined;
    await this.pollAgain;
    await this.polling;
  }

  /** The last read of the feed failed. */
  get failing(): boolean {
    return this.failed;
  }

  /** Whether the feed was read successfully within `withinMs`: if not, changes may be going unseen. */
  following(withinMs: number): boolean {
    return performance.now() - this.lastRead <= withinMs;
  }

  /** Reads the feed once; also run by the clock. Never rejects: errors go to onError. */
  poll(): Promise<void> {
    // A poll already in flight may have read the feed before the caller's write: run one more after it.
    if (this.polling) {
      this.pollAgain ??= this.polling.then(() => {
        this.pollAgain = undefined;
        return this.poll();
      });
      return this.pollAgain;
    }
    this.polling = this.readChanges()
      .then(() => {
        // Every good read closes any outage, whatever opened it (a failed lookup, a lost listener).
        this.failed = false;
        this.options.onRecovered?.();
      })
      .catch((error: unknown) => {
        this.failed = true;
        this.options.onError?.(error, 'change feed');
      })
      .finally(() => (this.polling = undefined));
    return this.polling;
  }

  private async readChanges(): Promise<void> {
    for (let batch = this.changeBatch; ;) {
      const started = performance.now();
      const changes = await this.store.changesSince(this.lastSeq, batch);
      if (changes.length === 0) break;
      await this.consumer.apply(changes);
      this.lastSeq = changes[changes.length - 1]!.seq;
      if (changes.length < batch) break;
      // A big change (an apply of 20k clients is 40k records) is read a batch at a time with requests answered in
      // between: on SQLite a read is synchronous, and an awaited promise that is already settled lets nothing in.
      const took = performance.now() - started;
      batch = Math.max(
        CHANGE_BATCH_MIN,
        Math.min(CHANGE_BATCH, Math.round((batch * CHANGE_BATCH_MS) / Math.max(took, 0.1))),
      );
      this.changeBatch = batch;
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.lastRead = performance.now();
    const now = this.options.clock.now();
    await this.consumer.afterRead(now);
    if (now - this.lastPrune > PRUNE_EVERY_MS) {
      this.lastPrune = now;
      await this.store.pruneChanges(new Date(now - CHANGE_RETENTION_MS));
    }
  }
}
