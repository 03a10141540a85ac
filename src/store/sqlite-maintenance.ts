import { Worker } from 'node:worker_threads';

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
const MAINTENANCE = `
// Not require(): the thread inherits the process's flags, and under --input-type=module its code is a module.
const { workerData, parentPort } = process.getBuiltinModule('node:worker_threads');
const { DatabaseSync } = process.getBuiltinModule('node:sqlite');
const db = new DatabaseSync(workerData.file);
db.exec('PRAGMA busy_timeout = ' + workerData.lockWaitMs);
// Its writes (the audit trail's) leave the log to the timer's checkpoints too, as the server's own do.
db.exec('PRAGMA wal_autocheckpoint = 0');
// 16 MiB of page cache, not SQLite's 2: the last index page of each client the audit trail writes for stays in
// memory between batches (taken as it is used: a store of a few clients never fills it).
db.exec('PRAGMA cache_size = -16384');
const timer = setInterval(() => {
  try {
    db.exec('PRAGMA wal_checkpoint(PASSIVE)');
  } catch {
    // busy (another checkpointer, a writer switching the log): the next round does it
  }
}, workerData.everyMs);
// Prepared at first use: on a new file, the tables are made by the migrations after this thread starts.
const SQL = {
  pruneAuditEvents:
    'delete from audit_events where id in (select id from audit_events where at < ? order by at limit ?)',
  pruneTokenCounts: 'delete from token_counts where minute < ?',
};
// Statements by their text: the deletes, and the audit batches' few shapes (pieces of a power of two, counts, a
// position).
const statements = new Map();
const prepared = (sql) => {
  let statement = statements.get(sql);
  if (statement === undefined) {
    if (statements.size >= 32) statements.clear();
    statements.set(sql, (statement = db.prepare(sql)));
  }
  return statement;
};
// The server's own statements waiting for the lock (a private_key_jwt or DPoP request's replay guard, an
// operator's change) go first: before this thread takes the lock, it waits until none is left, up to yieldMs,
// and a batch it holds open is committed at its next part. Without it, they tried again on timers while this
// thread wrote a second's audit batches back to back, and rarely found the lock free between two.
const waitingWrites = workerData.waitingWrites;
const serverWaits = () => Atomics.load(waitingWrites, 0) > 0;
function yieldToServer() {
  const until = Date.now() + workerData.yieldMs;
  for (let count; (count = Atomics.load(waitingWrites, 0)) > 0 && Date.now() < until; )
    Atomics.wait(waitingWrites, 0, count, Math.max(1, until - Date.now()));
}
// An audit batch's transaction: held open for its next part (see appendAudit), with the timer that rolls it back
// if that part never comes (the server's thread stopped between two parts), so the lock is not kept for long;
// or, committed before its last part (for the server's writes), continued by the next part in a new one.
let held = false;
let heldTimer;
let continued = false;
function rollback() {
  held = false;
  continued = false;
  clearTimeout(heldTimer);
  try {
    db.exec('ROLLBACK');
  } catch {
    // none left to roll back (SQLite ended it itself)
  }
}
function abandonAudit() {
  if (held) rollback();
  continued = false;
  return 0;
}
// One part of an audit batch: the first begins its transaction, the last commits it (1); the others leave it
// open for the next part (0), or commit it (1) when one of the server's statements waits for the lock. A part
// that is not the first continues the parts before it; if they were rolled back (a part failed, or this thread
// is a new one), it is refused, and so nothing of the batch is committed.
function appendAudit([writes, first, last]) {
  if (first && held) rollback(); // a batch the server gave up on (it never does: see AuditRecorder)
  if (!first && !held && !continued) throw new Error("the audit batch's transaction was rolled back");
  if (!held) {
    yieldToServer();
    db.exec('BEGIN IMMEDIATE');
    held = true;
  }
  clearTimeout(heldTimer);
  try {
    for (const { sql, parameters } of writes) prepared(sql).run(...parameters);
    if (!last && !serverWaits()) {
      heldTimer = setTimeout(rollback, workerData.heldMs);
      return 0;
    }
    db.exec('COMMIT');
    held = false;
    continued = !last;
    return 1;
  } catch (error) {
    rollback();
    throw error;
  }
}
// Retention's deletes. One asked while an audit batch is held open runs in its transaction (this thread runs one
// thing at a time), and is committed or rolled back with it: rolled back, its rows go at the next round.
function prune(op, args) {
  if (!held) yieldToServer();
  return Number(prepared(SQL[op]).run(...args).changes);
}
parentPort.on('message', (message) => {
  if (message === 'stop') {
    clearInterval(timer);
    clearTimeout(heldTimer);
    db.close();
    parentPort.close();
    return;
  }
  try {
    const changes =
      message.op === 'appendAudit'
        ? appendAudit(message.args)
        : message.op === 'abandonAudit'
          ? abandonAudit()
          : prune(message.op, message.args);
    parentPort.postMessage({ id: message.id, changes });
  } catch (error) {
    parentPort.postMessage({ id: message.id, error: { message: String(error && error.message), errcode: error && error.errcode } });
  }
});
`;
/** How often the thread checkpoints, unless the store is opened with another interval. */
export const CHECKPOINT_EVERY_MS = 250;
/** An audit batch held open this long with no next part is rolled back (see MAINTENANCE's appendAudit). */
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
    const worker = new Worker(MAINTENANCE, {
      eval: true,
      workerData: {
        file: this.file,
        everyMs: this.everyMs,
        lockWaitMs: LOCK_WAIT_MS,
        heldMs: HELD_MS,
        waitingWrites: this.waitingWrites,
        yieldMs: YIELD_MS,
      },
    });
    this.worker = worker;
    this.startedAt = Date.now();
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
        Date.now() - this.startedAt >= STEADY_MS
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
