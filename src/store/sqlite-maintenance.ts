import { Worker } from 'node:worker_threads';
import type { MaintenanceData } from './sqlite-maintenance-thread.js';

/*
 * The SQLite store's maintenance thread (see MAINTENANCE): checkpoints, retention's deletes and the audit trail's
 * batches, on a thread and a connection of their own, off the thread that answers requests.
 */

/**
 * How long a write waits for another process's lock (the CLI's, another server's) before it fails: the server's
 * connection on timers (store/sqlite.ts), this thread inside SQLite.
 */
export const LOCK_WAIT_MS = 5000;

/**
 * The maintenance thread: a thread of its own, with its own connection, for the store's work that no request
 * waits for but that would otherwise run on the server's only thread, stalling every request in flight:
 * - checkpoints: it copies the write-ahead log into the database file (a PASSIVE checkpoint: it never blocks a
 *   writer) every CHECKPOINT_EVERY_MS. SQLite would otherwise checkpoint inside whichever write crosses 1000
 *   log pages, and a checkpoint fsyncs: 10–80 ms on this project's machine (the audit trail's batches and
 *   retention's deletes cross that line over and over under load);
 * - retention's deletes (pruneAuditEvents, pruneTokenCounts): each a few milliseconds of synchronous work, and
 *   a million of them in a row on the server's thread left a request waiting over 50 ms now and then. Here it
 *   waits for the write lock inside SQLite (this thread answers nothing), and the server's own writes wait for
 *   the lock on timers meanwhile (ImmediateSqliteDriver, store/sqlite.ts);
 * - the audit trail's batches (appendAuditEvents): their statements, compiled on the server's thread, run here
 *   in one transaction (BEGIN IMMEDIATE, waiting for the lock inside SQLite). Inserting 500 rows is 1–2 ms of
 *   SQLite, ~3 µs a token, that the thread answering requests no longer spends, and preparing the largest piece
 *   the first time (17 ms) happens here too. The parts of a batch (up to 8 chunks of the spool, see
 *   AuditRecorder) are held in one open transaction and committed with the last, or sooner when one of the
 *   server's own writes waits for the lock (see yieldToServer): each commit writes every page it changed to the
 *   log, and the index by client and time changes a page per client of the batch. With 1,000 clients, the
 *   audit trail cost 26–30 µs of CPU an event (both threads) with a commit per 500, 15–16 µs in batches of up
 *   to 4,000 with the larger page cache below (bench/audit-cpu.js).
 * It ends when the store closes; the last connection to close checkpoints what is left, as usual.
 */
const MAINTENANCE = new URL(
  // Built, the thread is dist/store/sqlite-maintenance-thread.js; under the tests, which run src/, Node strips the
  // types of the .ts itself (Node 22.18 on).
  import.meta.url.endsWith('.ts') ? './sqlite-maintenance-thread.ts' : './sqlite-maintenance-thread.js',
  import.meta.url,
);
/** How often the thread checkpoints, unless the store is opened with another interval. */
export const CHECKPOINT_EVERY_MS = 250;
/** An audit batch held open this long with no next part is rolled back (see appendAudit in sqlite-maintenance-thread.ts). */
const HELD_MS = 2000;
/** How long the maintenance thread waits for the server's own writes that wait for the lock, at most. */
const YIELD_MS = 50;

type MaintenanceOp = 'pruneAuditEvents' | 'pruneTokenCounts' | 'appendAudit' | 'abandonAudit';
type MaintenanceAnswer =
  { id: number; changes: number } | { id: number; error: { message: string; errcode?: number } };

/** A thread that ended this soon after it started is started again only after a pause, doubled each time. */
const STEADY_MS = 10_000;
const RESTART_FIRST_PAUSE_MS = 250;
const RESTART_MAX_PAUSE_MS = 30_000;

/**
 * The server's side of the maintenance thread: starts it, asks it for retention's deletes and the audit trail's
 * batches, stops it. A thread that ends while the store is open (an error it did not catch, its heap
 * exhausted, terminated) is started again: at once if it had run STEADY_MS, else after a pause that doubles
 * while it keeps ending that soon. The audit trail's writes and the checkpoints must not stop for the rest of
 * the process's life. What
 * was asked of the ended thread is refused with the reason (the audit writer keeps its events in the spool and
 * writes them at its next flush; retention tries again at its next round), and so is what is asked during a
 * pause.
 */
export class MaintenanceThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<
    number,
    { resolve(changes: number): void; reject(error: Error): void }
  >();
  private nextId = 0;
  private stopped = false;
  private startedAt = 0;
  private pause = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  /** Why the last thread ended: what is refused during a pause says so. */
  private ended: Error | undefined;
  /** Threads started, the first included (tests). */
  starts = 0;
  /**
   * The server's own statements waiting for the write lock (counted by its connection, LockWaitingConnection in
   * store/sqlite.ts): the thread lets them have it before it takes the lock again (see MAINTENANCE).
   */
  readonly waitingWrites = new Int32Array(new SharedArrayBuffer(4));

  constructor(
    private readonly file: string,
    private readonly everyMs: number,
    /** Told each time an ended thread is started again, with why it ended and the pause before. */
    private readonly onRestart: (reason: Error, pauseMs: number) => void = () => {},
  ) {
    this.start();
  }

  private start(): void {
    this.restartTimer = undefined;
    if (this.stopped) return;
    const data: MaintenanceData = {
      file: this.file,
      everyMs: this.everyMs,
      lockWaitMs: LOCK_WAIT_MS,
      heldMs: HELD_MS,
      waitingWrites: this.waitingWrites,
      yieldMs: YIELD_MS,
    };
    // The thread's program is a string that imports the file: a thread started from a file refuses a string
    // program's options (`node --input-type=module -e …`, which a process that opens the store may have been run
    // with; a thread inherits them), and options given to it instead may not hold V8's (--single-threaded-gc, which
    // a server on one core runs with).
    const worker = new Worker(`import(${JSON.stringify(MAINTENANCE.href)});`, {
      eval: true,
      workerData: data,
    });
    this.worker = worker;
    this.startedAt = performance.now();
    this.starts++;
    worker.on('message', (answer: MaintenanceAnswer) => {
      const waiting = this.pending.get(answer.id);
      if (waiting === undefined) return;
      this.pending.delete(answer.id);
      if (this.pending.size === 0) worker.unref();
      if ('error' in answer)
        waiting.reject(Object.assign(new Error(answer.error.message), { errcode: answer.error.errcode }));
      else waiting.resolve(answer.changes);
    });
    let reason: Error | undefined;
    worker.on('error', (error) => (reason = error));
    worker.on('exit', (code) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.ended = new Error(
        `the store's maintenance thread ended (${reason?.message ?? `exit code ${code}`})`,
        { cause: reason },
      );
      this.refuseAll(this.ended);
      if (this.stopped) return;
      this.pause =
        performance.now() - this.startedAt >= STEADY_MS
          ? 0
          : Math.min(RESTART_MAX_PAUSE_MS, Math.max(RESTART_FIRST_PAUSE_MS, this.pause * 2));
      this.onRestart(this.ended, this.pause);
      if (this.pause === 0) this.start();
      else this.restartTimer = setTimeout(() => this.start(), this.pause).unref();
    });
    // Its timer alone does not keep the process up; a delete that was asked for does, until it is answered.
    // After the listeners: a 'message' listener added to an unreferenced worker references it again
    // (nodejs/node#53036), and a process that never closed its store stayed up for good.
    if (this.pending.size === 0) worker.unref();
  }

  run(op: MaintenanceOp, args: readonly unknown[]): Promise<number> {
    if (this.stopped) return Promise.reject(new Error('the store is closed'));
    const worker = this.worker;
    if (worker === undefined) return Promise.reject(this.ended ?? new Error('no maintenance thread'));
    const id = this.nextId++;
    return new Promise<number>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.ref();
      worker.postMessage({ id, op, args });
    });
  }

  /** It closes its connection and ends by itself; what was asked of it and not answered is refused. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.restartTimer);
    this.worker?.postMessage('stop');
    this.worker?.unref();
    this.refuseAll(new Error('the store is closed'));
  }

  /** Ends the thread as a crash would (tests). */
  async terminate(): Promise<void> {
    await this.worker?.terminate();
  }

  private refuseAll(error: Error): void {
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }
}
