import type { Logger } from 'pino';
import type { AuditEntry } from '../domain/token-events.js';
import { Outage } from '../outage.js';
import { AUDIT_BATCH, type AdminRefusalType, type AuditRecord, type AuditStore } from '../store/types.js';
import { encodeRecord, Spool, type SpoolChunk } from './spool.js';
import { systemClock, type Clock, type Job } from '../clock.js';

export interface AuditRecorderOptions {
  /** Where events wait for the store: a directory of this host's own. */
  spoolDir: string;
  /** Most bytes the spool may hold; events past it are dropped (counted and logged). */
  spoolMaxBytes: number;
  /** How often spooled events are written to the store, in milliseconds. */
  flushMs?: number;
  /** Most events written in one statement. */
  batch?: number;
  /** Events older than this many seconds are deleted (checked hourly). */
  retentionSeconds: number;
  logger: Logger;
  /** Time of day and the periodic job (clock.ts); the wall clock when left out. */
  clock?: Clock;
}

const PRUNE_EVERY_MS = 3600_000;
/** Adopting the spool files of processes that are gone (a worker that died) is checked this often. */
const ADOPT_EVERY_MS = 60_000;
/** Throttled refusals are summed per caller over windows of this length. */
export const THROTTLE_WINDOW_MS = 60_000;
/** Callers summed at once; past it, the rest of a window's throttled refusals are summed under no address. */
const THROTTLE_KEYS = 10_000;
/**
 * Retention deletes in statements sized to take about this long, paced by PRUNE_PAUSE_MS: each holds the
 * store's write lock while it runs (on SQLite, in the store's maintenance thread, see
 * store/sqlite-maintenance.ts), and the audit trail's own writes wait for at most one of them.
 */
const PRUNE_STATEMENT_MS = 4;
const PRUNE_PAUSE_MS = 12;
const PRUNE_FIRST_BATCH = 500;
const PRUNE_MAX_BATCH = 5000;
/**
 * A flush writes the spool's chunks (`batch` events each) in batches of at most this many chunks, or of the
 * chunks read within BATCH_MS, that the store may commit at once (see writeBatch).
 */
const BATCH_CHUNKS = 8;
const BATCH_MS = 50;
/** At shutdown, the store is given this long to take what the spool holds; the rest waits on disk. */
const CLOSE_FLUSH_MS = 5000;

// eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
const CONTROL = /[\u0000-\u001f\u007f]/;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is replaced
const CONTROLS = /[\u0000-\u001f\u007f]/g;

const hasControl = (value: string | null): boolean => value !== null && CONTROL.test(value);

/** Text the store can take and a terminal can show: no control characters (PostgreSQL refuses NUL). */
function clean(value: string | null): string | null {
  return value === null ? null : value.replace(CONTROLS, '\uFFFD');
}

/** The summed refusals of one caller (and, for the token endpoint's, one reason) in the current window. */
interface Summed {
  at: number;
  type: 'token.throttled' | AdminRefusalType;
  source: string | null;
  /** The one client id presented, or null once several were. */
  clientId: string | null;
  /** The reason, or the first few different ones (an admin caller's, `; `-separated). */
  reason: string | null;
  count: number;
}

/** A refused admin API call (docs/management.md): summed per source address and minute, never a write per request. */
export interface AdminRefusal {
  /** Milliseconds since the epoch. */
  at: number;
  type: AdminRefusalType;
  /** The client id the caller presented (an admin client's token), if any. */
  clientId: string | null;
  reason: string;
  source: string;
}

/** Different reasons kept in one admin refusal sum; more are counted, not listed. */
const MAX_REASONS = 5;

const MESSAGES: Record<AuditRecord['type'], string> = {
  'token.issued': 'token issued',
  'token.exchanged': 'token issued by token exchange',
  'token.refused': 'token refused',
  'token.throttled': 'token requests throttled',
  'admin.auth_failed': 'admin API authentications failed',
  'admin.forbidden': 'admin API calls forbidden',
};

/**
 * The audit trail. Each event is logged as JSON at once, and appended to the spool (a local file) before the
 * answer it belongs to is written (persist, called by the HTTP layer before every answer): once a token is
 * answered, its event survives a crash of the process. A timer writes the spool to the store in batches, off
 * the token path; while the store is down, events wait on disk, bounded by the spool's size, not in memory.
 *
 * Throttled refusals (429s) are not written one by one: they are summed per caller and minute into one
 * `token.throttled` event with a count, so a blocked caller cannot fill the store or the disk.
 */
export class AuditRecorder {
  private readonly spool: Spool;
  /** Lines recorded and not yet on the spool, and how many. */
  private pending = '';
  private pendingLines = 0;
  private persistScheduled = false;
  private readonly persistSoon = (): void => {
    this.persistScheduled = false;
    this.persist();
  };
  /** Events that could not be spooled (the spool full, or the disk refusing). */
  private droppedTotal = 0;
  private throttled = new Map<string, Summed>();
  private throttleWindow = 0;
  private job: Job | undefined;
  private flushing: Promise<void> | undefined;
  private flushAgain: Promise<void> | undefined;
  private pruning: Promise<void> | undefined;
  private closing = false;
  private lastPrune = 0;
  private lastAdopt = 0;
  private lastIso = { ms: NaN, text: '' };
  private readonly now: () => number;
  private readonly batchSize: number;
  private readonly storeOutage: Outage;
  private readonly spoolFull: Outage;
  private readonly spoolFailing: Outage;

  constructor(
    private readonly store: AuditStore,
    private readonly options: AuditRecorderOptions,
  ) {
    this.now = (options.clock ?? systemClock).now;
    this.batchSize = options.batch ?? AUDIT_BATCH;
    const logger = options.logger;
    this.spool = new Spool({ dir: options.spoolDir, maxBytes: options.spoolMaxBytes });
    this.storeOutage = new Outage(logger, {
      down: 'audit events cannot be written to the store yet; they wait in the spool',
      up: 'audit events reach the store again',
    });
    this.spoolFull = new Outage(logger, {
      down: 'the audit spool is full (TESSERA_AUDIT_SPOOL_MAX): new audit events are dropped until the store takes the backlog',
      up: 'the audit spool has room again',
    });
    this.spoolFailing = new Outage(logger, {
      down: 'the audit spool cannot be written: new audit events are dropped',
      up: 'the audit spool can be written again',
    });
  }

  /** Events of this process waiting on the spool for the store. */
  get queued(): number {
    return this.spool.queued + this.pendingLines;
  }

  /** Bytes the spool holds on disk. */
  get spoolBytes(): number {
    return this.spool.bytes;
  }

  /** Events that could not be spooled since the process started. */
  get dropped(): number {
    return this.droppedTotal;
  }

  /** The spool's segment files this process holds (for tests). */
  get spoolSegments(): string[] {
    return this.spool.segmentNames;
  }

  /** Adopts what processes that are gone left in the spool, and starts writing it all to the store. */
  start(): void {
    const adopted = this.spool.adoptOrphans();
    this.lastAdopt = this.now();
    if (adopted > 0)
      this.options.logger.info({ segments: adopted }, 'audit spool files left by a stopped process adopted');
    this.job = (this.options.clock ?? systemClock).every(
      this.options.flushMs ?? 1000,
      () => void this.flush(),
    );
    void this.flush();
  }

  record(entry: AuditEntry): void {
    if (entry.type === 'token.throttled')
      return this.sum(entry, 'token.throttled', `token.throttled\u0000${entry.reason}\u0000${entry.source}`);
    // One request: no count. Queued as it is, without a copy (this runs for every token).
    this.add(entry);
  }

  /**
   * A refused admin API call: summed with the others of its kind from its address in the current minute, one
   * event with a count (docs/management.md), so that a caller hammering the API cannot fill the store or the disk.
   */
  recordAdminRefusal(refusal: AdminRefusal): void {
    this.sum(refusal, refusal.type, `${refusal.type}\u0000\u0000${refusal.source}`);
  }

  /** Logs an event and queues it for the spool (persist writes it there); no count is one request. */
  private add(event: Omit<AuditRecord, 'count'> & { count?: number | null }): void {
    // Nearly every event is clean: it is then queued as it is, without a copy.
    const dirty =
      hasControl(event.clientId) ||
      hasControl(event.audience) ||
      hasControl(event.reason) ||
      hasControl(event.source);
    const safe = dirty
      ? {
          ...event,
          clientId: clean(event.clientId),
          audience: clean(event.audience),
          reason: clean(event.reason),
          source: clean(event.source),
        }
      : event;
    const logger = this.options.logger;
    if (logger.isLevelEnabled('info')) {
      const { count, ...rest } = safe;
      logger.info(
        { audit: { ...rest, at: this.iso(safe.at), ...(count == null ? {} : { count }) } },
        MESSAGES[safe.type],
      );
    }
    this.pending += encodeRecord(safe);
    this.pendingLines++;
    // The HTTP layer persists before each answer; this catches events recorded with no answer after them.
    if (!this.persistScheduled) {
      this.persistScheduled = true;
      setImmediate(this.persistSoon);
    }
  }

  /** RFC 3339 for the log, formatted once per millisecond however many events share it. */
  private iso(ms: number): string {
    if (ms !== this.lastIso.ms) this.lastIso = { ms, text: new Date(ms).toISOString() };
    return this.lastIso.text;
  }

  /**
   * Appends every event recorded so far to the spool: called before an answer is written, so the answer's
   * event is on disk first. One write per batch of answers (the token route answers a loop iteration's
   * requests together). Never throws: an event that cannot be spooled is dropped, counted and logged.
   */
  persist(): void {
    if (this.pendingLines === 0) return;
    const text = this.pending;
    const lines = this.pendingLines;
    this.pending = '';
    this.pendingLines = 0;
    let appended: boolean;
    try {
      appended = this.spool.append(text, lines);
      this.spoolFailing.recovered();
    } catch (error) {
      this.droppedTotal += lines;
      this.spoolFailing.failed(error, { dropped: this.droppedTotal });
      return;
    }
    if (appended) this.spoolFull.recovered({ dropped: this.droppedTotal });
    else {
      this.droppedTotal += lines;
      this.spoolFull.failed(undefined, { spoolBytes: this.spool.bytes, dropped: this.droppedTotal });
    }
  }

  /** One refusal, added to its caller's sum (by `key`) for the current window. */
  private sum(
    entry: Pick<AuditEntry, 'at' | 'clientId' | 'reason' | 'source'>,
    type: Summed['type'],
    key: string,
  ): void {
    const window = entry.at - (entry.at % THROTTLE_WINDOW_MS);
    if (window !== this.throttleWindow) {
      this.closeWindow();
      this.throttleWindow = window;
    }
    let summed = this.throttled.get(key);
    if (summed === undefined && this.throttled.size >= THROTTLE_KEYS) {
      // Past the callers a window keeps, the rest are summed under no address.
      key = `${type}\u0000${type === 'token.throttled' ? entry.reason : ''}\u0000`;
      summed = this.throttled.get(key);
      if (summed) summed.source = null;
    }
    if (summed === undefined) {
      this.throttled.set(key, {
        at: entry.at,
        type,
        source: entry.source,
        clientId: entry.clientId,
        reason: entry.reason,
        count: 1,
      });
      return;
    }
    summed.count++;
    if (summed.clientId !== entry.clientId) summed.clientId = null;
    // An admin caller's sum lists its different reasons (the token endpoint's are summed per reason).
    if (entry.reason !== null && summed.reason !== entry.reason) {
      const reasons = summed.reason === null ? [] : summed.reason.split('; ');
      if (!reasons.includes(entry.reason) && reasons.length < MAX_REASONS)
        summed.reason = [...reasons, entry.reason].join('; ');
    }
  }

  /** Records the sums of the window that ended: one event per caller (and reason) with its count. */
  private closeWindow(): void {
    if (this.throttled.size === 0) return;
    const sums = this.throttled;
    this.throttled = new Map();
    for (const t of sums.values()) {
      this.add({
        at: t.at,
        type: t.type,
        clientId: t.clientId,
        audience: null,
        jti: null,
        reason: t.reason,
        source: t.source,
        count: t.count,
      });
    }
  }

  /** Writes what the spool holds to the store; on failure it stays for the next attempt. Never rejects. */
  flush(): Promise<void> {
    // A write in flight may have read the spool before the caller's events: run one more after it.
    if (this.flushing) {
      this.flushAgain ??= this.flushing.then(() => {
        this.flushAgain = undefined;
        return this.flush();
      });
      return this.flushAgain;
    }
    this.flushing = this.write().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async write(deadline = Infinity): Promise<void> {
    const now = this.now();
    if (now - this.throttleWindow >= THROTTLE_WINDOW_MS) this.closeWindow();
    this.persist();
    if (now - this.lastAdopt >= ADOPT_EVERY_MS) {
      this.lastAdopt = now;
      try {
        const adopted = this.spool.adoptOrphans();
        if (adopted > 0)
          this.options.logger.info(
            { segments: adopted },
            'audit spool files left by a stopped process adopted',
          );
      } catch (error) {
        this.options.logger.error({ err: error }, 'the audit spool directory cannot be read');
      }
    }
    try {
      for (;;) {
        const removed = this.spool.takeRemoved();
        if (removed.length > 0) await this.store.forgetSpoolSegments(removed);
        const unpositioned = this.spool.unpositioned();
        if (unpositioned) {
          this.spool.positioned(unpositioned, await this.store.spoolPosition(unpositioned.name));
          continue;
        }
        const chunk = this.spool.read(this.batchSize);
        if (!chunk) break;
        if (chunk.records.length > 0) await this.writeBatch(chunk, deadline);
        else this.spool.stored(chunk);
        if (this.now() > deadline) break;
        // SQLite writes synchronously, and an awaited promise that is already settled does not let requests
        // in: yield between statements, so a backlog never holds the server for long.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      this.storeOutage.recovered();
    } catch (error) {
      this.storeOutage.failed(error, { queued: this.queued, spoolBytes: this.spool.bytes });
    }
    if (this.spool.damaged > 0) {
      this.options.logger.error({ lines: this.spool.damaged }, 'damaged audit spool lines were skipped');
      this.spool.damaged = 0;
    }
    if (!this.closing && now - this.lastPrune >= PRUNE_EVERY_MS) {
      this.lastPrune = now;
      this.pruning ??= this.prune(now).finally(() => (this.pruning = undefined));
    }
  }

  /**
   * Writes `first` and the chunks that follow it in its segment, up to BATCH_CHUNKS or BATCH_MS, as one batch: one
   * call of the store a chunk (each a few hundred events, so that none holds this thread long), yielding between
   * them. The store may hold the calls' writes in one open transaction and commit them with the last (SQLite on
   * its maintenance thread: a commit per chunk wrote every index page it touched to the log each time). A chunk
   * counts as stored once it is committed; a call that fails leaves every chunk not yet committed for the next
   * flush. The last call is always made, so no open transaction is left behind: a chunk that cannot be read ends
   * the batch with a call of no events (the position of the chunk before it again).
   *
   * A chunk is read only once the call before it is made, and its events are handed over, not kept (see part): a
   * chunk's events read ahead lived as long as the store took with the chunk before, long enough to outlive two
   * young-generation collections, and were most of what this thread promoted to the old generation.
   */
  private async writeBatch(first: SpoolChunk, deadline: number): Promise<void> {
    const started = this.now();
    const held: SpoolChunk[] = [];
    let chunk = first;
    /** The next chunk could not be read: the batch ends (and the flush fails with `unread`, if it was an error). */
    let ending = false;
    let unread: unknown;
    for (let part = 0; ; part++) {
      const last =
        ending ||
        !(
          part + 1 < BATCH_CHUNKS &&
          this.now() - started < BATCH_MS &&
          this.now() <= deadline &&
          this.spool.hasAfter(chunk)
        );
      held.push(chunk);
      const committed = await this.part(chunk, part === 0, last);
      if (committed) for (const done of held.splice(0)) this.spool.stored(done);
      if (last) {
        if (unread !== undefined) throw unread;
        return;
      }
      await new Promise<void>((resolve) => setImmediate(resolve));
      let next: SpoolChunk | undefined;
      try {
        next = this.spool.readAfter(chunk, this.batchSize);
      } catch (error) {
        unread = error;
      }
      // Unreadable, or (a segment being written holds whole lines only) not a whole line yet: the batch's last
      // call has no events, and the position of the chunk before.
      ending = next === undefined;
      chunk = next ?? { ...chunk, records: [], lines: 0 };
    }
  }

  /**
   * One call of the store for a chunk: its events are taken out of it, so that nothing here keeps them once the
   * store has them (a chunk is kept until its batch is committed, see writeBatch).
   */
  private part(chunk: SpoolChunk, first: boolean, last: boolean): Promise<boolean> {
    const records = chunk.records;
    chunk.records = [];
    return this.store.appendAuditEvents(
      records,
      { segment: chunk.segment.name, offset: chunk.end },
      { first, last },
    );
  }

  /**
   * Deletes expired events in small statements, each sized to take a few milliseconds, with a pause between
   * them: a write of the audit trail never waits behind more than one for the lock.
   */
  private async prune(now: number): Promise<void> {
    const before = new Date(now - this.options.retentionSeconds * 1000);
    let batch = PRUNE_FIRST_BATCH;
    let total = 0;
    try {
      while (!this.closing) {
        const started = performance.now();
        const deleted = await this.store.pruneAuditEvents(before, batch);
        const took = performance.now() - started;
        total += deleted;
        if (deleted < batch) break;
        batch = Math.max(
          100,
          Math.min(PRUNE_MAX_BATCH, Math.round((batch * PRUNE_STATEMENT_MS) / Math.max(took, 0.5))),
        );
        await new Promise((resolve) => setTimeout(resolve, PRUNE_PAUSE_MS).unref());
      }
      // The chart's per-minute counts are kept as long as the events they count.
      await this.store.pruneTokenCounts(before);
      if (total > 0) this.options.logger.info({ pruned: total }, 'old audit events deleted');
    } catch (error) {
      // Tried again at the next hour; the store's outage is logged by the writer.
      this.lastPrune = 0;
      this.options.logger.debug({ err: error, pruned: total }, 'old audit events could not all be deleted');
    }
  }

  /**
   * At shutdown: the current window's throttled sums are recorded, everything goes to the spool, the store is
   * given a few seconds to take it, and the spool is closed. What the store did not take stays on disk for the
   * next start.
   */
  async close(): Promise<void> {
    this.job?.stop();
    this.job = undefined;
    this.closing = true;
    this.closeWindow();
    await this.flushAgain;
    await this.flushing;
    await this.pruning;
    this.flushing = this.write(this.now() + CLOSE_FLUSH_MS);
    await this.flushing;
    try {
      const removed = this.spool.takeRemoved();
      this.spool.close();
      await this.store.forgetSpoolSegments([...removed, ...this.spool.takeRemoved()]);
    } catch {
      // positions of removed segments are only bookkeeping
    }
  }
}
