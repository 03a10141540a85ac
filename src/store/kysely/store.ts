import { sql, type Kysely } from 'kysely';
import type { Engine } from '../migrations.js';
import type { Database } from '../schema.js';
import type { ChangeFeed, Store } from '../types.js';
import { assertionJtiStore } from './assertion-jtis.js';
import { audienceStore } from './audiences.js';
import { auditStore, type AuditHooks } from './audit.js';
import { StoreBase, type RunPrepared } from './base.js';
import { changeFeed } from './changes.js';
import { clientStore } from './clients.js';
import { grantStore } from './grants.js';
import { keyStore } from './keys.js';
import { operatorStore } from './operators.js';
import { revocationStore } from './revocations.js';
import { migrate, schemaState } from './schema-state.js';
import { secretStore } from './secrets.js';
import { sessionStore } from './sessions.js';

interface KyselyStoreOptions {
  now?: () => Date;
  /** The engine's named prepared statements (see RunPrepared). */
  runPrepared?: RunPrepared;
  /** The engine's push of committed changes (PostgreSQL LISTEN). */
  subscribe?: ChangeFeed['subscribe'];
  /** Prepares a statement on the connection ahead of its first use, where the engine keeps it by its text (SQLite). */
  prepare?: AuditHooks['prepare'];
  /** Runs an audit batch's statements in one transaction elsewhere (SQLite, the server: its maintenance thread). */
  writeAudit?: AuditHooks['writeAudit'];
  /** The engine's database handle for migrations, made for them and destroyed after (PostgreSQL: see postgres.ts). */
  migrationDb?: () => Kysely<Database>;
}

/** What the engine adds to every store made over a base (its own, or one bound to a transaction). */
type EngineHooks = Pick<KyselyStoreOptions, 'subscribe' | 'prepare' | 'writeAudit' | 'migrationDb'>;

/** Every resource of the store over one base: the store's own, or one bound to a transaction. */
function compose(base: StoreBase, hooks: EngineHooks): Store {
  const { subscribe } = hooks;
  const clients = clientStore(base);
  const store: Store = {
    engine: base.engine,
    ...audienceStore(base),
    ...clients,
    ...secretStore(base, clients),
    ...grantStore(base),
    ...keyStore(base),
    ...changeFeed(base),
    ...(subscribe ? { subscribe } : {}),
    ...auditStore(base, hooks),
    ...operatorStore(base),
    ...sessionStore(base),
    ...assertionJtiStore(base),
    ...revocationStore(base),
    migrate: (upTo) => migrate(base, upTo, hooks.migrationDb),
    schema: () => schemaState(base),
    /**
     * Runs `fn` with a store bound to one transaction: every operation of that store runs on it, and it commits
     * when `fn` resolves or rolls back, writing nothing, when it throws. Change-feed records are written in it
     * too, so followers see everything at the commit. Inside a transaction, this joins it.
     */
    transaction(fn) {
      base.assertOpen();
      return base.tx ? fn(store) : base.bind((bound) => fn(compose(bound, hooks)));
    },
    async ping() {
      await sql`select 1`.execute(base.conn);
    },
    async close() {
      if (base.tx) throw new Error('a store bound to a transaction is closed by its owner');
      await base.db.destroy();
    },
  };
  return store;
}

/**
 * The store on any engine Kysely speaks, one module per resource (kysely/*.ts) over a shared base (base.ts).
 * Every write records a change in the same transaction, so that a server process learns of changes made by the
 * CLI or by other instances (see directory.ts).
 */
export function openKyselyStore(
  db: Kysely<Database>,
  engine: Engine,
  options: KyselyStoreOptions = {},
): Store {
  const base = new StoreBase(db, engine, options.now ?? (() => new Date()), options.runPrepared);
  return compose(base, options);
}
