import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
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
import { CHECKPOINT_EVERY_MS, LOCK_WAIT_MS, MaintenanceThread } from './sqlite-maintenance.js';
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

/** The longest pause between two tries for the lock while waiting without blocking. */
const MAX_LOCK_PAUSE_MS = 20;

/** SQLITE_BUSY (5), and its extended codes (the low byte is the primary code). */
const isBusy = (error: unknown): boolean =>
  typeof (error as { errcode?: unknown }).errcode === 'number' &&
  ((error as { errcode: number }).errcode & 0xff) === 5;

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
          // Not an async function: the part's statements, once posted to the thread, are kept by nothing here
          // while it writes them (see AuditRecorder's writeBatch).
          writeAudit: (build, part) => {
            let writes;
            try {
              writes = build();
            } catch (error) {
              // Nothing of this part reached the thread: the batch it continues is rolled back there, as when a
              // part fails there, so that nothing held is committed by a later part.
              const abandoned = part.first
                ? Promise.resolve()
                : thread.run('abandonAudit', []).catch(() => {});
              return abandoned.then(() => Promise.reject(error as Error));
            }
            return thread
              .run('appendAudit', [writes, part.first, part.last])
              .then((changes) => changes === 1);
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
