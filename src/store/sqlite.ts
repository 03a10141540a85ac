import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import {
  CompiledQuery,
  Kysely,
  SqliteDialect,
  SqliteDriver,
  type DatabaseConnection,
  type Driver,
  type QueryResult,
  type SqliteDatabase,
  type SqliteStatement,
} from 'kysely';
import { openKyselyStore } from './kysely/store.js';
import type { Database } from './schema.js';
import type { Store } from './types.js';

/** Prepared statements kept per SQL text; past this many, the cache starts over. */
const STATEMENT_CACHE = 64;
/**
 * Statements whose SQL is longer than this (multi-row inserts: the audit trail's largest piece, an apply's
 * rows; a few hundred KiB of SQLite program each) are kept two at a time, the least recently used replaced.
 */
const LONG_SQL = 4096;
const LONG_CACHE = 2;

/**
 * Kysely's SQLite dialect expects the better-sqlite3 shape; node:sqlite (built in, no native build) is
 * adapted to it here. Statements are prepared once per SQL text and reused: the store runs the same few
 * queries (lookups on a cache miss, the audit trail's batched inserts) over and over.
 */
function adapt(db: DatabaseSync): SqliteDatabase {
  type Entry = { statement: StatementSync; reader: boolean };
  const statements = new Map<string, Entry>();
  const long = new Map<string, Entry>(); // least recently used first
  const prepared = (query: string): Entry => {
    const cache = query.length > LONG_SQL ? long : statements;
    let entry = cache.get(query);
    if (entry === undefined) {
      const statement = db.prepare(query);
      // columns() builds its answer anew on every call: asked once per statement.
      entry = { statement, reader: statement.columns().length > 0 };
      if (cache === long) {
        if (long.size >= LONG_CACHE) long.delete(long.keys().next().value!);
      } else if (statements.size >= STATEMENT_CACHE) statements.clear();
    } else if (cache === long) long.delete(query);
    cache.set(query, entry);
    return entry;
  };
  return {
    // Once: the store closes it whether or not Kysely did (see openSqliteStore).
    close: () => {
      if (!db.isOpen) return;
      statements.clear();
      long.clear();
      db.close();
    },
    prepare(query: string): SqliteStatement {
      const { statement, reader } = prepared(query);
      return {
        reader,
        all: (parameters: ReadonlyArray<unknown>) => statement.all(...(parameters as SQLInputValue[])),
        // An iterator holds its statement until it is done: a fresh one, so a shared one is never reset under it.
        iterate: (parameters: ReadonlyArray<unknown>) =>
          db.prepare(query).iterate(...(parameters as SQLInputValue[])) as IterableIterator<unknown>,
        run: (parameters: ReadonlyArray<unknown>) => {
          const { changes, lastInsertRowid } = statement.run(...(parameters as SQLInputValue[]));
          return { changes, lastInsertRowid };
        },
      };
    },
  };
}

/**
 * A connection whose statements, when SQLite answers SQLITE_BUSY (another process, the CLI or another server,
 * holds the write lock), are tried again on timers, with the thread serving requests in between, for as long
 * as busy_timeout would have waited. For the server, busy_timeout is 0: node:sqlite's calls are synchronous, so
 * SQLite waiting for the lock inside a call would stop the thread that answers every request (an apply from the
 * CLI holding the lock for seconds stalled every token request for as long; a private_key_jwt or DPoP request,
 * whose replay guard inserts a row outside any transaction, stopped the thread once per request). A statement
 * that SQLite refused with SQLITE_BUSY did nothing, so trying it again is safe; that is true of COMMIT too.
 */
class LockWaitingConnection implements DatabaseConnection {
  constructor(
    private readonly inner: DatabaseConnection,
    /** Statements of this connection waiting for the lock, counted for the maintenance thread (see there). */
    private readonly waiting: Int32Array | undefined,
  ) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const started = performance.now();
    let counted = false;
    try {
      for (let pause = 1; ; pause = Math.min(pause * 2, MAX_LOCK_PAUSE_MS)) {
        try {
          return await this.inner.executeQuery<R>(query);
        } catch (error) {
          if (!isBusy(error) || performance.now() - started >= LOCK_WAIT_MS) throw error;
        }
        if (!counted && this.waiting !== undefined) {
          Atomics.add(this.waiting, 0, 1);
          counted = true;
        }
        await sleep(pause);
      }
    } finally {
      if (counted) {
        Atomics.sub(this.waiting!, 0, 1);
        Atomics.notify(this.waiting!, 0);
      }
    }
  }

  streamQuery<R>(query: CompiledQuery, chunkSize: number): AsyncIterableIterator<QueryResult<R>> {
    return this.inner.streamQuery<R>(query, chunkSize);
  }
}

/**
 * Every transaction of the store writes. BEGIN IMMEDIATE takes the write lock at the start, waiting for it up
 * to busy_timeout (the server: on timers, see LockWaitingConnection); a plain BEGIN reads first and then fails
 * at once with SQLITE_BUSY when another process wrote meanwhile (a WAL reader cannot upgrade a stale snapshot,
 * and SQLite does not retry that).
 */
class ImmediateSqliteDriver extends SqliteDriver {
  private waiting: LockWaitingConnection | undefined;

  constructor(
    config: { database: SqliteDatabase },
    private readonly waitAsync: boolean,
    private readonly waitingCount: Int32Array | undefined,
  ) {
    super(config);
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await super.acquireConnection();
    if (!this.waitAsync) return connection;
    // SQLite's driver has one connection, always the same: wrapped once.
    this.waiting ??= new LockWaitingConnection(connection, this.waitingCount);
    return this.waiting;
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

class ImmediateSqliteDialect extends SqliteDialect {
  constructor(
    private readonly database: SqliteDatabase,
    private readonly waitAsync: boolean,
    private readonly waitingCount?: Int32Array,
  ) {
    super({ database });
  }
  override createDriver(): Driver {
    return new ImmediateSqliteDriver({ database: this.database }, this.waitAsync, this.waitingCount);
  }
}

/** How long a write waits for another process's lock (the CLI's, another server's) before it fails. */
const LOCK_WAIT_MS = 5000;
/** The longest pause between two tries for the lock while waiting without blocking. */
const MAX_LOCK_PAUSE_MS = 20;

/** SQLITE_BUSY (5), and its extended codes (the low byte is the primary code). */
const isBusy = (error: unknown): boolean =>
  typeof (error as { errcode?: unknown }).errcode === 'number' &&
  ((error as { errcode: number }).errcode & 0xff) === 5;

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
 *   the lock on timers meanwhile (ImmediateSqliteDriver);
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
const CHECKPOINT_EVERY_MS = 250;
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
   * The server's own statements waiting for the write lock (counted by its connection, LockWaitingConnection):
   * the thread lets them have it before it takes the lock again (see MAINTENANCE).
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

/**
 * What the server reads in the background and on a cache miss (the change feed, the clients and audiences the
 * directory loads, the revocations and client standings it follows, the signing keys it reloads), and what the
 * admin API and the console read. Pure reads outside a transaction: a bound store reads on its transaction.
 */
const SIDE_READS = [
  // The token path's and the directory's.
  'changesSince',
  'latestChange',
  'findClients',
  'countClients',
  'listClientIds',
  'listAudiences',
  'listRevokedTokens',
  'listClientStandings',
  'findClientStandings',
  'listSigningKeys',
  // The admin API's and the console's, so that operators can read while an apply holds the lock.
  'findAudience',
  'findAudienceById',
  'findClient',
  'listClients',
  'listClientsPage',
  'listGrantsOf',
  'queryAuditEvents',
  'tokenCounts',
  'findOperator',
  'findOperatorByEnrollment',
  'listOperators',
  'findOperatorSession',
] as const satisfies readonly (keyof Store)[];

/**
 * The server's reads of SIDE_READS on a second connection of their own (read only). Kysely's SQLite driver has
 * one connection and runs one query or transaction on it at a time: a write waiting for another process's lock
 * (an apply of 200k clients holds it for many seconds) held up every read queued behind it, and a client
 * lookup on a cache miss answered 503 after its 2 s deadline while the store was perfectly readable. In WAL
 * mode a reader never waits for a writer; each read sees what was committed when it began, as it would have on
 * the one connection (every write of this process commits before its promise resolves).
 */
function readOnTheSide(store: Store, file: string, now: (() => Date) | undefined): void {
  const db = new DatabaseSync(file, { readOnly: true });
  db.exec('PRAGMA busy_timeout = 0');
  const reader = openKyselyStore(
    new Kysely<Database>({ dialect: new ImmediateSqliteDialect(adapt(db), true) }),
    'sqlite',
    { now },
  );
  const mutable = store as unknown as Record<string, unknown>;
  for (const name of SIDE_READS) mutable[name] = reader[name];
  const close = store.close.bind(store);
  store.close = async () => {
    await reader.close();
    await close();
  };
}

export interface SqliteStoreOptions {
  now?: () => Date;
  /**
   * For the server, whose thread answers requests: every statement waits for another process's write lock on
   * timers, not inside SQLite (LockWaitingConnection); the write-ahead log is checkpointed, and retention's
   * deletes run, on a thread of its own (see MAINTENANCE). The CLI's few writes need neither.
   */
  backgroundCheckpoints?: boolean;
  /** How often the maintenance thread checkpoints (tests slow it down). */
  checkpointEveryMs?: number;
  /** Told when the maintenance thread ended and is started again (the server logs it). */
  onMaintenanceRestart?: (reason: Error, pauseMs: number) => void;
}

/** Opens (creating if needed) the embedded store. The file holds secret digests and sealed keys: mode 0600. */
export function openSqliteStore(file: string, options: SqliteStoreOptions | (() => Date) = {}): Store {
  const {
    now,
    backgroundCheckpoints = false,
    checkpointEveryMs = CHECKPOINT_EVERY_MS,
    onMaintenanceRestart,
  } = typeof options === 'function' ? { now: options } : options;
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  if (file !== ':memory:') {
    // Created 0600 before SQLite opens it, so there is no moment when others may read it; tightened if older.
    closeSync(openSync(file, 'a', 0o600));
    chmodSync(file, 0o600);
  }
  const db = new DatabaseSync(file);
  // The CLI and the server write the same file; wait for a lock rather than fail. Set first, so that
  // switching a new file to WAL waits too.
  db.exec(`PRAGMA busy_timeout = ${LOCK_WAIT_MS}`);
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA foreign_keys = ON');
  db.exec('PRAGMA synchronous = NORMAL');
  // The server never lets SQLite wait inside a call: its statements wait for the lock on timers instead.
  if (backgroundCheckpoints) db.exec('PRAGMA busy_timeout = 0');
  let maintenance: MaintenanceThread | undefined;
  if (backgroundCheckpoints && file !== ':memory:') {
    db.exec('PRAGMA wal_autocheckpoint = 0');
    maintenance = new MaintenanceThread(file, checkpointEveryMs, onMaintenanceRestart);
  }
  const adapted = adapt(db);
  const close = adapted.close.bind(adapted);
  adapted.close = () => {
    // The maintenance thread closes its connection and ends by itself; this one closes at once.
    maintenance?.stop();
    close();
  };
  const kysely = new Kysely<Database>({
    dialect: new ImmediateSqliteDialect(adapted, backgroundCheckpoints, maintenance?.waitingWrites),
  });
  const thread = maintenance;
  const store = openKyselyStore(kysely, 'sqlite', {
    now,
    // Prepared by its text in the adapter's cache, where the statement of the same text then finds it.
    prepare: (text) => void adapted.prepare(text),
    // The server's audit batches are written on the maintenance thread (see MAINTENANCE).
    ...(thread === undefined
      ? {}
      : {
          writeAudit: async (build, part) => {
            let writes;
            try {
              writes = build();
            } catch (error) {
              // Nothing of this part reached the thread: the batch it continues is rolled back there, as when a
              // part fails there, so that nothing held is committed by a later part.
              if (!part.first) await thread.run('abandonAudit', []).catch(() => {});
              throw error;
            }
            return (await thread.run('appendAudit', [writes, part.first, part.last])) === 1;
          },
        }),
  });
  // Kysely destroys its driver, which closes the connection, only if a query ever initialized it (its
  // RuntimeDriver): a server's store whose reads all went to the side connection kept its connection, and its
  // maintenance thread, after close().
  const closeStore = store.close.bind(store);
  store.close = async () => {
    try {
      await closeStore();
    } finally {
      adapted.close();
    }
  };
  if (backgroundCheckpoints && file !== ':memory:') readOnTheSide(store, file, now);
  if (thread !== undefined) {
    store.pruneAuditEvents = (olderThan, limit) =>
      thread.run('pruneAuditEvents', [olderThan.getTime(), limit]);
    store.pruneTokenCounts = (olderThan) => thread.run('pruneTokenCounts', [olderThan.getTime()]);
  }
  return store;
}
