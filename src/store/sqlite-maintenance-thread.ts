import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

/*
 * The SQLite store's maintenance thread itself (sqlite-maintenance.ts says what it does and why): started by
 * MaintenanceThread as a worker of its own, from this file (dist/ when built, src/ with Node's type stripping
 * under the tests). It imports nothing of Tessera's: a thread of its own loads as little as it can.
 */

/** What MaintenanceThread gives the thread (sqlite-maintenance.ts). */
export interface MaintenanceData {
  file: string;
  everyMs: number;
  lockWaitMs: number;
  heldMs: number;
  /** The server's own statements waiting for the write lock (LockWaitingConnection in store/sqlite.ts). */
  waitingWrites: Int32Array;
  yieldMs: number;
}

/** One statement of an audit batch, compiled on the server's thread. */
interface Write {
  sql: string;
  parameters: (string | number | null)[];
}

type Message =
  | 'stop'
  | { id: number; op: 'appendAudit'; args: [Write[], boolean, boolean] }
  | { id: number; op: 'abandonAudit'; args: [] }
  | { id: number; op: 'pruneAuditEvents' | 'pruneTokenCounts'; args: (string | number)[] };

const data = workerData as MaintenanceData;
const port = parentPort!;
const db = new DatabaseSync(data.file);
db.exec(`PRAGMA busy_timeout = ${data.lockWaitMs}`);
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
}, data.everyMs);
// Prepared at first use: on a new file, the tables are made by the migrations after this thread starts.
const SQL = {
  pruneAuditEvents:
    'delete from audit_events where id in (select id from audit_events where at < ? order by at limit ?)',
  pruneTokenCounts: 'delete from token_counts where minute < ?',
};
// Statements by their text: the deletes, and the audit batches' few shapes (pieces of a power of two, counts, a
// position).
const statements = new Map<string, StatementSync>();
const prepared = (sql: string): StatementSync => {
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
const waitingWrites = data.waitingWrites;
const serverWaits = (): boolean => Atomics.load(waitingWrites, 0) > 0;
function yieldToServer(): void {
  const until = performance.now() + data.yieldMs;
  for (let count; (count = Atomics.load(waitingWrites, 0)) > 0 && performance.now() < until;)
    Atomics.wait(waitingWrites, 0, count, Math.max(1, until - performance.now()));
}
// An audit batch's transaction: held open for its next part (see appendAudit), with the timer that rolls it back
// if that part never comes (the server's thread stopped between two parts), so the lock is not kept for long;
// or, committed before its last part (for the server's writes), continued by the next part in a new one.
let held = false;
let heldTimer: NodeJS.Timeout | undefined;
let continued = false;
function rollback(): void {
  held = false;
  continued = false;
  clearTimeout(heldTimer);
  try {
    db.exec('ROLLBACK');
  } catch {
    // none left to roll back (SQLite ended it itself)
  }
}
function abandonAudit(): number {
  if (held) rollback();
  continued = false;
  return 0;
}
// One part of an audit batch: the first begins its transaction, the last commits it (1); the others leave it
// open for the next part (0), or commit it (1) when one of the server's statements waits for the lock. A part
// that is not the first continues the parts before it; if they were rolled back (a part failed, or this thread
// is a new one), it is refused, and so nothing of the batch is committed.
function appendAudit([writes, first, last]: [Write[], boolean, boolean]): number {
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
      heldTimer = setTimeout(rollback, data.heldMs);
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
function prune(op: keyof typeof SQL, args: (string | number)[]): number {
  if (!held) yieldToServer();
  return Number(prepared(SQL[op]).run(...args).changes);
}
port.on('message', (message: Message) => {
  if (message === 'stop') {
    clearInterval(timer);
    clearTimeout(heldTimer);
    db.close();
    port.close();
    return;
  }
  try {
    const changes =
      message.op === 'appendAudit'
        ? appendAudit(message.args)
        : message.op === 'abandonAudit'
          ? abandonAudit()
          : prune(message.op, message.args);
    port.postMessage({ id: message.id, changes });
  } catch (error) {
    const failure = error as { message?: unknown; errcode?: number } | undefined;
    port.postMessage({
      id: message.id,
      error: { message: String(failure?.message), errcode: failure?.errcode },
    });
  }
});
