import { sql, type Kysely } from 'kysely';
import { Migrator } from 'kysely/migration';
import { migrations, StaticMigrationProvider } from '../migrations.js';
import type { Database } from '../schema.js';
import type { SchemaState } from '../types.js';
import type { StoreBase } from './base.js';

/** PostgreSQL: the schema this connection writes to (the first of its search path). */
async function currentSchema(db: Kysely<Database>): Promise<string> {
  return (await sql<{ schema: string }>`select current_schema() as schema`.execute(db)).rows[0]!.schema;
}

/**
 * SQLite: runs `work` holding the write lock (BEGIN IMMEDIATE) on the store's one connection: another process
 * doing the same waits for it (busy_timeout), then finds it done.
 */
async function underWriteLock<T>(
  db: Kysely<Database>,
  work: (conn: Kysely<Database>) => Promise<T>,
): Promise<T> {
  return db.connection().execute(async (conn) => {
    await sql`begin immediate`.execute(conn);
    try {
      const result = await work(conn);
      await sql`commit`.execute(conn);
      return result;
    } catch (error) {
      await sql`rollback`.execute(conn);
      throw error;
    }
  });
}

/**
 * Runs pending migrations (all, or up to and including `upTo`); returns the names it ran. `migrationDb`: the engine's
 * handle for them, destroyed after (PostgreSQL's has no query timeout short enough to fail while another instance
 * migrates); without it, the store's own.
 */
export async function migrate(
  base: StoreBase,
  upTo?: string,
  migrationDb?: () => Kysely<Database>,
): Promise<string[]> {
  if (base.tx) throw new Error('migrations do not run inside a transaction');
  // On PostgreSQL, Kysely looks for its tables in every schema unless told which: name ours, so that a
  // database holding another Tessera schema (tests, staging beside production) is not mistaken for this one.
  const schema = base.engine === 'postgres' ? await currentSchema(base.db) : undefined;
  const run = async (db: Kysely<Database>): Promise<string[]> => {
    const migrator = new Migrator({
      db,
      provider: new StaticMigrationProvider(migrations(base.engine)),
      migrationTableName: 'tessera_migrations',
      migrationLockTableName: 'tessera_migrations_lock',
      ...(schema ? { migrationTableSchema: schema } : {}),
    });
    const { error, results } = await (upTo === undefined
      ? migrator.migrateToLatest()
      : migrator.migrateTo(upTo));
    if (error) throw error instanceof Error ? error : new Error(String(error));
    return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
  };
  if (base.engine !== 'sqlite') {
    const db = migrationDb?.() ?? base.db;
    try {
      return await run(db);
    } finally {
      if (db !== base.db) await db.destroy();
    }
  }
  // Kysely takes no lock on SQLite and runs the migrations outside a transaction. Hold SQLite's write lock
  // for the whole run: another process migrating the same file waits, then finds nothing to do; and a
  // migration that fails leaves nothing behind.
  return underWriteLock(base.db, run);
}

/** The schema's migrations: applied, pending (known to this code, not applied), unknown (applied, newer). */
export async function schemaState(base: StoreBase): Promise<SchemaState> {
  const known = Object.keys(migrations(base.engine)).sort();
  // On PostgreSQL, the migrations table of this connection's schema (as migrate() pins it), not whichever
  // one the search path finds first (another Tessera's, in `public`).
  const table =
    base.engine === 'postgres'
      ? sql.id(await currentSchema(base.db), 'tessera_migrations')
      : sql.id('tessera_migrations');
  const read = async (db: Kysely<Database>): Promise<string[] | undefined> => {
    try {
      const rows = await sql<{ name: string }>`select name from ${table}`.execute(db);
      return rows.rows.map((r) => r.name).sort();
    } catch (error) {
      // No migrations table: a store nothing has been written to yet, or (SQLite) one being set up.
      if (/no such table|does not exist|database is locked/.test((error as Error).message)) return undefined;
      throw error;
    }
  };
  // On SQLite a store being set up by another process is read again under the write lock, as migrate()
  // takes it: that process is waited for (busy_timeout), not seen half-way.
  const applied =
    (await read(base.db)) ?? (base.engine !== 'sqlite' ? [] : ((await underWriteLock(base.db, read)) ?? []));
  return {
    applied,
    pending: known.filter((name) => !applied.includes(name)),
    unknown: applied.filter((name) => !known.includes(name)),
  };
}
