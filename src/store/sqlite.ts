import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import {
  CompiledQuery,
  Kysely,
  SqliteDialect,
  SqliteDriver,
  type DatabaseConnection,
  type Driver,
  type SqliteDatabase,
  type SqliteStatement,
} from 'kysely';
import { KyselyStore } from './kysely-store.js';
import type { Database } from './schema.js';

/** Prepared statements kept per SQL text; past this many, the cache starts over. */
const STATEMENT_CACHE = 64;
/**
 * Statements whose SQL is longer than this (multi-row audit inserts, a few hundred KiB of SQLite program
 * each) are kept two at a time: the full batch stays, a partial batch of a new size replaces the last one.
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
    close: () => {
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
 * Every transaction of the store writes. BEGIN IMMEDIATE takes the write lock at the start, waiting for it up
 * to busy_timeout; a plain BEGIN reads first and then fails at once with SQLITE_BUSY when another process
 * wrote meanwhile (a WAL reader cannot upgrade a stale snapshot, and SQLite does not retry that).
 */
class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

class ImmediateSqliteDialect extends SqliteDialect {
  constructor(private readonly database: SqliteDatabase) {
    super({ database });
  }
  override createDriver(): Driver {
    return new ImmediateSqliteDriver({ database: this.database });
  }
}

/** Opens (creating if needed) the embedded store. The file holds secret digests and sealed keys: mode 0600. */
export function openSqliteStore(file: string, now?: () => Date): KyselyStore {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  if (file !== ':memory:') {
    // Created 0600 before SQLite opens it, so there is no moment when others may read it; tightened if older.
    closeSync(openSync(file, 'a', 0o600));
    chmodSync(file, 0o600);
  }
  const db = new DatabaseSync(file);
  // The CLI and the server write the same file; wait for a lock rather than fail. Set first, so that
  // switching a new file to WAL waits too.
  db.exec('PRAGMA busy_timeout = 5000');
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA foreign_keys = ON');
  db.exec('PRAGMA synchronous = NORMAL');
  const kysely = new Kysely<Database>({ dialect: new ImmediateSqliteDialect(adapt(db)) });
  return new KyselyStore(kysely, 'sqlite', now);
}
