import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { CHANGE_CHANNEL } from './kysely/base.js';
import { openKyselyStore } from './kysely/store.js';
import type { Database } from './schema.js';
import type { ChangeFeed, Store } from './types.js';

const RECONNECT_MS = 1000;
/**
 * How long a migration's query may take, the wait for another instance's migration lock included (instances started
 * together on a new database: one migrates, the others wait for it): longer than any migration, so that an instance
 * waits for another's slow migration instead of failing at TESSERA_PG_QUERY_TIMEOUT, but not for ever.
 */
const MIGRATION_QUERY_MS = 10 * 60_000;

/**
 * A store that hangs (a frozen host, a network that drops packets) must fail like one that refuses: no
 * connection attempt or query waits longer than its timeout, and dead peers are noticed by TCP keep-alive.
 */
export interface PostgresTimeouts {
  /** Milliseconds a query may take before it fails (node-postgres' query_timeout; TESSERA_PG_QUERY_TIMEOUT). */
  queryMs: number;
  /** Milliseconds a connection attempt may take before it fails (TESSERA_PG_CONNECT_TIMEOUT). */
  connectMs: number;
}

/** The settings of every connection: the pool's and the change listener's. */
function connectionOptions(timeouts: PostgresTimeouts | undefined): pg.ClientConfig {
  return timeouts === undefined
    ? { keepAlive: true }
    : { connectionTimeoutMillis: timeouts.connectMs, query_timeout: timeouts.queryMs, keepAlive: true };
}

/** The store on PostgreSQL, shared by every instance; it announces changes with NOTIFY on commit. */
export type PostgresStore = Store & Required<Pick<ChangeFeed, 'subscribe'>>;

/**
 * Listens for the changes committed by any instance: one connection of its own that LISTENs, and reconnects
 * if it drops (the poll covers the gap).
 */
function subscriber(
  connectionString: string,
  timeouts: PostgresTimeouts | undefined,
): NonNullable<ChangeFeed['subscribe']> {
  return async (listener, onError) => {
    let client: pg.Client | undefined;
    let closed = false;
    let timer: NodeJS.Timeout | undefined;

    const connect = async (): Promise<void> => {
      const next = new pg.Client({
        connectionString,
        ...connectionOptions(timeouts),
      });
      next.on('notification', () => listener());
      next.on('error', (error) => {
        onError(error);
        retry(next);
      });
      next.on('end', () => retry(next));
      try {
        await next.connect();
        await next.query(`LISTEN ${CHANGE_CHANNEL}`);
      } catch (error) {
        next.removeAllListeners();
        await next.end().catch(() => undefined);
        throw error;
      }
      if (closed) {
        // Unsubscribed while this connection was being made.
        next.removeAllListeners();
        await next.end().catch(() => undefined);
        return;
      }
      client = next;
      // Anything committed while no one listened is picked up by reading the feed now.
      listener();
    };
    const retry = (dead: pg.Client): void => {
      if (closed || client !== dead) return;
      client = undefined;
      dead.removeAllListeners('end');
      void dead.end().catch(() => undefined);
      timer ??= setTimeout(attempt, RECONNECT_MS);
    };
    const attempt = (): void => {
      timer = undefined;
      if (closed) return;
      connect().catch((error: unknown) => {
        onError(error);
        timer ??= setTimeout(attempt, RECONNECT_MS);
      });
    };

    await connect();
    return async () => {
      closed = true;
      if (timer) clearTimeout(timer);
      const last = client;
      client = undefined;
      if (last) {
        last.removeAllListeners('end');
        await last.end().catch(() => undefined);
      }
    };
  };
}

/**
 * A connection lost while idle emits on the pool, one lost while checked out emits on its client: without a listener
 * either would crash the process. The query in flight still fails (and its caller answers 503).
 */
function quiet(pool: pg.Pool): void {
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
}

/**
 * Opens a pool on the database. The server and the CLI pass the configured timeouts (runtime/store.ts openStore);
 * without them a query or a connection attempt waits as long as PostgreSQL takes (node-postgres' default),
 * which only tools and tests that provision a database do.
 */
export function openPostgresStore(
  connectionString: string,
  options: { max?: number; now?: () => Date; timeouts?: PostgresTimeouts } = {},
): PostgresStore {
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    idleTimeoutMillis: 30_000,
    ...connectionOptions(options.timeouts),
  });
  quiet(pool);
  const subscribe = subscriber(connectionString, options.timeouts);
  const store = openKyselyStore(
    new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }),
    'postgres',
    {
      now: options.now,
      // A named prepared statement (node-postgres prepares it once per connection): PostgreSQL parses and plans
      // the client lookup of a cache miss once per connection instead of on every miss, about halving the CPU
      // that PostgreSQL spends per cold token request.
      runPrepared: async <R>(name: string, text: string, values: unknown[]) =>
        (await pool.query({ name, text, values })).rows as R[],
      subscribe,
      // Migrations on a connection of their own (see MIGRATION_QUERY_MS), closed after them.
      migrationDb: () => {
        const timeouts = options.timeouts && { ...options.timeouts, queryMs: MIGRATION_QUERY_MS };
        const own = new pg.Pool({ connectionString, max: 1, ...connectionOptions(timeouts) });
        quiet(own);
        return new Kysely<Database>({ dialect: new PostgresDialect({ pool: own }) });
      },
    },
  );
  return Object.assign(store, { subscribe });
}
