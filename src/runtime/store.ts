import { isPostgresUrl, sqlitePath, type Config } from '../config/index.js';
import { TesseraError } from '../domain/errors.js';
import { openSqliteStore } from '../store/sqlite.js';
import type { Store } from '../store/types.js';

/** A store whose schema this code must not use as it is, and must not migrate without being asked. */
export class SchemaError extends TesseraError {
  override name = 'SchemaError';

  /** The CLI's code for it under --json (cli/index.ts). */
  override get code(): string {
    return 'schema_mismatch';
  }
}

interface OpenStoreOptions {
  poolSize?: number;
  /** The server's store: SQLite checkpoints on a thread of its own. */
  server?: boolean;
  /** false: check the schema instead of migrating it (every command but `serve` and `migrate`). */
  migrate?: boolean;
  /** The clock the store stamps its records with (the runtime's); the wall clock when left out. */
  now?: () => number;
  /** The server's: told when the SQLite store's maintenance thread ended and is started again. */
  onMaintenanceRestart?: (reason: Error, pauseMs: number) => void;
}

/**
 * Opens the configured store and brings its schema up to date (`serve`, `migrate`), or with `migrate: false`
 * (every other command) checks it instead: an operator's command never changes the schema under running
 * servers. It refuses a schema older than this code (run `tessera migrate`) or newer (use the newer tessera);
 * only an empty store, which no server can be using, is set up at once.
 */
export async function openStore(config: Config, options: OpenStoreOptions = {}): Promise<Store> {
  const url = config.databaseUrl;
  const clock = options.now;
  const now = clock && (() => new Date(clock()));
  // The PostgreSQL driver is loaded only for a PostgreSQL store: a server on SQLite holds none of it (memory,
  // README "Memory").
  const store =
    url !== undefined && isPostgresUrl(url)
      ? (await import('../store/postgres.js')).openPostgresStore(url, {
          max: options.poolSize,
          now,
          timeouts: { queryMs: config.pgQueryTimeout * 1000, connectMs: config.pgConnectTimeout * 1000 },
        })
      : openSqliteStore(sqlitePath(config), {
          backgroundCheckpoints: options.server === true,
          now,
          onMaintenanceRestart: options.onMaintenanceRestart,
        });
  try {
    if (options.migrate === false) await checkSchema(store);
    else await store.migrate();
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

async function checkSchema(store: Store): Promise<void> {
  const { applied, pending, unknown } = await store.schema();
  if (unknown.length > 0) {
    throw new SchemaError(
      `the store's schema is newer than this tessera (${unknown.join(', ')}): use the tessera that migrated it`,
    );
  }
  if (applied.length === 0) {
    await store.migrate();
    return;
  }
  if (pending.length > 0) {
    throw new SchemaError(
      `the store's schema is older than this tessera (${pending.join(', ')} not applied): ` +
        'run `tessera migrate` (servers of the older version must be stopped or upgraded first)',
    );
  }
}
