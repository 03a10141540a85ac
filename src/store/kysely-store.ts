import type { Compilable, InferResult, Kysely, Selectable, Transaction } from 'kysely';
import { Migrator } from 'kysely/migration';
import { CompiledQuery, sql } from 'kysely';
import type { SigningAlg } from '../domain/algorithms.js';
import type { AuthMethodName, PublicJwks } from '../domain/client-keys.js';
import { digestSecret, generateSecret } from '../domain/secrets.js';
import {
  migrations,
  newAudienceId,
  newSecretId,
  StaticMigrationProvider,
  type Engine,
} from './migrations.js';
import type {
  AudiencesTable,
  ClientSecretsTable,
  ClientsTable,
  Database,
  OperatorsTable,
  SigningKeysTable,
} from './schema.js';
import {
  AUDIT_BATCH,
  MAX_LIVE_SECRETS,
  StoreError,
  type Audience,
  type AudiencePatch,
  type AudienceScope,
  type AuditEvent,
  type AuditEventType,
  type AuditFilter,
  type AuditRecord,
  type Change,
  type ChangeAudit,
  type ChangeEntity,
  type Client,
  type Claims,
  type ClientPatch,
  type ClientSecret,
  type Grant,
  type KeyChange,
  type NewAudience,
  type NewClient,
  type NewOperator,
  type Operator,
  type OperatorPatch,
  type OperatorRole,
  type OperatorSession,
  type SchemaState,
  type SigningKey,
  type SpoolPosition,
  type Store,
  type StoreResource,
  type TokenCount,
} from './types.js';

type Tx = Transaction<Database>;

/** PostgreSQL NOTIFY channel on which every committed change is announced. */
export const CHANGE_CHANNEL = 'tessera_changes';
/** The change feed's lock on PostgreSQL (an arbitrary constant key): writers commit one at a time. */
const lockChangeFeed = () => sql`select pg_advisory_xact_lock(7215426781233001)`;

/** A unique or primary key violation, on either engine (SQLite extended codes 2067/1555, PostgreSQL 23505). */
function isUniqueViolation(error: unknown): boolean {
  const e = error as { errcode?: number; code?: string };
  return e?.errcode === 2067 || e?.errcode === 1555 || e?.code === '23505';
}

/** Another writer got there between our check and our insert: the same answer as if we had seen it first. */
async function orConflict<T>(write: Promise<T>, message: string, resource: StoreResource): Promise<T> {
  try {
    return await write;
  } catch (error) {
    if (isUniqueViolation(error)) throw new StoreError('conflict', message, resource);
    throw error;
  }
}

const toAudience = (row: Selectable<AudiencesTable>): Audience => ({
  id: row.id,
  url: row.url,
  name: row.name,
  tokenTtl: row.token_ttl === null ? null : Number(row.token_ttl),
  signingAlg: row.signing_alg as SigningAlg | null,
  scopes: JSON.parse(row.scopes) as AudienceScope[],
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

function secretsByClient(rows: Selectable<ClientSecretsTable>[]): Map<string, ClientSecret[]> {
  const byClient = new Map<string, ClientSecret[]>();
  for (const row of rows) {
    const list = byClient.get(row.client_id);
    if (list) list.push(toSecret(row));
    else byClient.set(row.client_id, [toSecret(row)]);
  }
  return byClient;
}

/** A grant's scopes as stored: sorted, space-delimited. */
const scopeText = (scopes: readonly string[]): string => [...new Set(scopes)].sort().join(' ');
const scopeList = (text: string): string[] => (text === '' ? [] : text.split(' '));

const claimsOf = (text: string | null): Claims | null =>
  text === null ? null : (JSON.parse(text) as Claims);
const claimsText = (claims: Claims | null | undefined): string | null =>
  claims == null || Object.keys(claims).length === 0 ? null : JSON.stringify(claims);

const toSecret = (row: Selectable<ClientSecretsTable>): ClientSecret => ({
  id: row.id,
  digest: row.digest,
  createdAt: row.created_at,
  expiresAt: row.expires_at,
  lastUsedAt: row.last_used_at,
});

/** Secrets oldest first (then by id), as every read returns them. */
const bySecretAge = (a: ClientSecret, b: ClientSecret): number =>
  a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;

const toClient = (row: Selectable<ClientsTable>, grants: Grant[], secrets: ClientSecret[]): Client => ({
  id: row.id,
  name: row.name,
  description: row.description,
  secretDigest: row.secret_digest,
  enabled: Number(row.enabled) === 1,
  tokenTtl: row.token_ttl === null ? null : Number(row.token_ttl),
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  secretRotatedAt: row.secret_rotated_at,
  quotaPerMinute: row.quota_per_minute === null ? null : Number(row.quota_per_minute),
  quotaPerDay: row.quota_per_day === null ? null : Number(row.quota_per_day),
  audiences: grants.map((g) => g.audience),
  grants,
  claims: claimsOf(row.claims),
  secrets: [...secrets].sort(bySecretAge),
  authMethod: row.token_endpoint_auth_method as AuthMethodName,
  jwks: row.jwks === null ? null : (JSON.parse(row.jwks) as PublicJwks),
  jwksUri: row.jwks_uri,
});

const toOperator = (row: Selectable<OperatorsTable>): Operator => ({
  id: row.id,
  email: row.email,
  role: row.role as OperatorRole,
  enabled: Number(row.enabled) === 1,
  enrolled: row.password_hash !== null,
  enrollmentExpiresAt: row.enroll_expires_at,
  lastLoginAt: row.last_login_at,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

const toSigningKey = (row: Selectable<SigningKeysTable>): SigningKey => ({
  kid: row.kid,
  alg: row.alg as SigningAlg,
  publicJwk: row.public_jwk,
  privateJwkSealed: row.private_jwk_sealed,
  createdAt: row.created_at,
  activatesAt: row.activates_at,
  retiredAt: row.retired_at,
});

/** Several clients and their grants, ordered by client then grant; `ids` is the one parameter (see findClients). */
/**
 * Several clients with their grants and secrets in one statement: a row per client × grant × secret (a client
 * has a few of each), ordered by client, grant, secret; `ids` is the one parameter (see findClients).
 */
function clientsByIds(db: Kysely<Database>, engine: Engine, ids: unknown) {
  return db
    .selectFrom('clients')
    .leftJoin('grants', 'grants.client_id', 'clients.id')
    .leftJoin('client_secrets', 'client_secrets.client_id', 'clients.id')
    .selectAll('clients')
    .select(['grants.audience_url', 'grants.scopes as grant_scopes', 'grants.claims as grant_claims'])
    .select([
      'client_secrets.id as secret_id',
      'client_secrets.digest as secret_digest_',
      'client_secrets.created_at as secret_created_at',
      'client_secrets.expires_at as secret_expires_at',
      'client_secrets.last_used_at as secret_last_used_at',
    ])
    .where(
      engine === 'postgres'
        ? sql<boolean>`clients.id = any(${ids}::text[])`
        : sql<boolean>`clients.id in (select value from json_each(${ids}))`,
    )
    .orderBy('clients.id')
    .orderBy('grants.audience_url')
    .orderBy('client_secrets.id');
}

/** One row of clientsByIds: a client with one of its grants (or a null grant if it has none). */
type ClientWithGrant = InferResult<ReturnType<typeof clientsByIds>>[number];

/**
 * A batch of token events as the console's chart counts them: per minute (its start, ms), issued and refused
 * requests (a token.throttled summary stands for `count` refusals).
 */
function countsByMinute(events: readonly AuditRecord[]): Map<number, [number, number]> {
  const byMinute = new Map<number, [number, number]>();
  for (const e of events) {
    // The chart counts the token endpoint's answers only, not the admin API's refusals.
    if (!e.type.startsWith('token.')) continue;
    const minute = e.at - (e.at % 60_000);
    let counts = byMinute.get(minute);
    if (counts === undefined) byMinute.set(minute, (counts = [0, 0]));
    if (e.type === 'token.issued') counts[0] += 1;
    else counts[1] += e.count ?? 1;
  }
  return byMinute;
}

/** Adds `minutes` rows of (minute, issued, refused) to the token counts. */
function addCounts(db: Kysely<Database>, minutes: number) {
  return db
    .insertInto('token_counts')
    .values(Array.from({ length: minutes }, () => ({ minute: 0, issued: 0, refused: 0 })))
    .onConflict((oc) =>
      oc.column('minute').doUpdateSet((eb) => ({
        issued: eb('token_counts.issued', '+', eb.ref('excluded.issued')),
        refused: eb('token_counts.refused', '+', eb.ref('excluded.refused')),
      })),
    );
}

/** The SQL text of a query whose parameters are bound per call; checks that it takes exactly that many. */
function compileOnce(query: Compilable, parameters: number): string {
  const compiled = query.compile();
  if (compiled.parameters.length !== parameters)
    throw new Error(`expected ${parameters} parameters, the query has ${compiled.parameters.length}`);
  return compiled.sql;
}

/**
 * The store on any engine Kysely speaks. Every write records a change in the same transaction, so that a
 * server process learns of changes made by the CLI or by other instances (see directory.ts).
 */
export class KyselyStore implements Store {
  constructor(
    private readonly db: Kysely<Database>,
    readonly engine: Engine,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** The SQL of findClients, compiled on first use. */
  private findClientsSql: string | undefined;
  /** The SQL of useAssertionJti, compiled on first use. */
  private useJtiSql: string | undefined;

  /** The transaction this store is bound to (see transaction()); undefined for the store itself. */
  private tx: Tx | undefined;

  /** Set on a bound store once its transaction has committed or rolled back: it cannot be used any more. */
  private over = false;

  private assertOpen(): void {
    if (this.over)
      throw new Error('this store was bound to a transaction that is over: use the store itself');
  }

  /** Where a query runs: the bound transaction, or the database. */
  private get conn(): Kysely<Database> {
    this.assertOpen();
    return this.tx ?? this.db;
  }

  /**
   * On PostgreSQL, every writing transaction takes the change feed's lock first (see record): taken later,
   * after row locks, two multi-step transactions could each hold what the other waits for.
   */
  private async lockChanges(tx: Tx): Promise<void> {
    if (this.engine === 'postgres') await lockChangeFeed().execute(tx);
  }

  /**
   * Runs `work` in a transaction: the bound one when this store is bound to one (so that an operation is one
   * step of the caller's transaction), or a new one. Every write goes through here.
   */
  private write<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    this.assertOpen();
    if (this.tx) return work(this.tx);
    return this.db.transaction().execute(async (tx) => {
      await this.lockChanges(tx);
      return work(tx);
    });
  }

  /**
   * Runs `fn` with a store bound to one transaction: every operation of that store runs on it, and it commits
   * when `fn` resolves or rolls back, writing nothing, when it throws. Change-feed records are written in it
   * too, so followers see everything at the commit. Inside a transaction, this joins it.
   */
  async transaction<T>(fn: (store: Store) => Promise<T>): Promise<T> {
    this.assertOpen();
    if (this.tx) return fn(this);
    let bound: KyselyStore | undefined;
    try {
      return await this.db.transaction().execute(async (tx) => {
        await this.lockChanges(tx);
        // The bound store shares everything with this one (its prototype) but the connection it runs on.
        bound = Object.create(this) as KyselyStore;
        bound.tx = tx;
        return fn(bound);
      });
    } finally {
      // Its connection is back in the pool (or is SQLite's only one): a bound store kept beyond its
      // transaction must not write outside it.
      if (bound) bound.over = true;
    }
  }

  /**
   * Runs a query the token path repeats, as a prepared statement where the engine keeps one: SQLite's
   * adapter reuses statements by text; PostgreSQL overrides this with a named statement per connection.
   */
  protected async runPrepared<R>(_name: string, text: string, parameters: unknown[]): Promise<R[]> {
    return (await this.conn.executeQuery<R>(CompiledQuery.raw(text, parameters))).rows;
  }

  /** A repeated query: prepared where the engine keeps one, or on the bound transaction's connection. */
  private async runQuery<R>(name: string, text: string, parameters: unknown[]): Promise<R[]> {
    if (this.tx) return (await this.tx.executeQuery<R>(CompiledQuery.raw(text, parameters))).rows;
    return this.runPrepared<R>(name, text, parameters);
  }

  async migrate(upTo?: string): Promise<string[]> {
    // On PostgreSQL, Kysely looks for its tables in every schema unless told which: name ours, so that a
    // database holding another Tessera schema (tests, staging beside production) is not mistaken for this one.
    const schema =
      this.engine === 'postgres'
        ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(this.db)).rows[0]?.schema
        : undefined;
    if (this.tx) throw new Error('migrations do not run inside a transaction');
    const run = async (db: Kysely<Database>): Promise<string[]> => {
      const migrator = new Migrator({
        db,
        provider: new StaticMigrationProvider(migrations(this.engine)),
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
    if (this.engine !== 'sqlite') return run(this.db);
    // Kysely takes no lock on SQLite and runs the migrations outside a transaction. Hold SQLite's write lock
    // for the whole run: another process migrating the same file waits, then finds nothing to do; and a
    // migration that fails leaves nothing behind.
    return this.db.connection().execute(async (conn) => {
      await sql`begin immediate`.execute(conn);
      try {
        const ran = await run(conn);
        await sql`commit`.execute(conn);
        return ran;
      } catch (error) {
        await sql`rollback`.execute(conn);
        throw error;
      }
    });
  }

  async schema(): Promise<SchemaState> {
    const known = Object.keys(migrations(this.engine)).sort();
    // On PostgreSQL, the migrations table of this connection's schema (as migrate() pins it), not whichever
    // one the search path finds first (another Tessera's, in `public`).
    const table =
      this.engine === 'postgres'
        ? sql.id(
            (await sql<{ schema: string }>`select current_schema() as schema`.execute(this.db)).rows[0]!
              .schema,
            'tessera_migrations',
          )
        : sql.id('tessera_migrations');
    const read = async (db: Kysely<Database>): Promise<string[] | undefined> => {
      try {
        const rows = await sql<{ name: string }>`select name from ${table}`.execute(db);
        return rows.rows.map((r) => r.name).sort();
      } catch (error) {
        // No migrations table: a store nothing has been written to yet, or (SQLite) one being set up.
        if (/no such table|does not exist|database is locked/.test((error as Error).message))
          return undefined;
        throw error;
      }
    };
    // On SQLite a store being set up by another process is read again under the write lock, as migrate()
    // takes it: that process is waited for (busy_timeout), not seen half-way.
    const applied =
      (await read(this.db)) ??
      (this.engine !== 'sqlite'
        ? []
        : ((await this.db.connection().execute(async (conn) => {
            await sql`begin immediate`.execute(conn);
            try {
              return await read(conn);
            } finally {
              await sql`commit`.execute(conn);
            }
          })) ?? []));
    return {
      applied,
      pending: known.filter((name) => !applied.includes(name)),
      unknown: applied.filter((name) => !known.includes(name)),
    };
  }

  async ping(): Promise<void> {
    await sql`select 1`.execute(this.conn);
  }

  async close(): Promise<void> {
    if (this.tx) throw new Error('a store bound to a transaction is closed by its owner');
    await this.db.destroy();
  }

  private stamp(): string {
    return this.now().toISOString();
  }

  private async writeChangeAudit(tx: Tx, audit: ChangeAudit): Promise<void> {
    await tx
      .insertInto('audit_events')
      .values({
        at: this.now().getTime(),
        type: audit.type,
        client_id: audit.clientId ?? null,
        audience: audit.audience ?? null,
        jti: null,
        reason: audit.reason ?? null,
        source: audit.source,
        count: null,
        actor: audit.actor,
        target: audit.target,
        changes: audit.changes === null ? null : JSON.stringify(audit.changes),
      })
      .execute();
  }

  /** A change for the feed, and its audit event if it has one, in the change's transaction. */
  private async record(tx: Tx, entity: ChangeEntity, key: string, audit?: ChangeAudit): Promise<void> {
    if (audit) await this.writeChangeAudit(tx, audit);
    if (this.engine === 'postgres') {
      // Sequence numbers are taken at insert but become visible at commit, which may come in another order:
      // a follower reading `seq > last` could step over a late commit. Writers of changes take this lock
      // first, so they commit one at a time and seq order is commit order. Writes are rare; reads never wait.
      await lockChangeFeed().execute(tx);
    }
    await tx.insertInto('changes').values({ entity, key, created_at: this.stamp() }).execute();
    // Delivered at commit to every instance that listens (PostgreSQL; SQLite followers poll).
    if (this.engine === 'postgres') await sql`select pg_notify(${CHANGE_CHANNEL}, '')`.execute(tx);
  }

  // --- audiences ---

  async addAudience(audience: NewAudience, audit?: ChangeAudit): Promise<Audience> {
    const conflict = `audience ${audience.url} is already registered`;
    return orConflict(
      this.write(async (tx) => {
        const existing = await tx
          .selectFrom('audiences')
          .select('url')
          .where('url', '=', audience.url)
          .executeTakeFirst();
        if (existing) throw new StoreError('conflict', conflict, 'audience');
        const at = this.stamp();
        const row = {
          id: audience.id ?? newAudienceId(),
          url: audience.url,
          name: audience.name,
          token_ttl: audience.tokenTtl,
          signing_alg: audience.signingAlg,
          scopes: JSON.stringify(audience.scopes ?? []),
          created_at: at,
          updated_at: at,
        };
        await tx.insertInto('audiences').values(row).execute();
        await this.record(tx, 'audience', audience.url, audit);
        return toAudience(row);
      }),
      conflict,
      'audience',
    );
  }

  async findAudience(url: string): Promise<Audience | undefined> {
    const row = await this.conn.selectFrom('audiences').selectAll().where('url', '=', url).executeTakeFirst();
    return row && toAudience(row);
  }

  async findAudienceById(id: string): Promise<Audience | undefined> {
    const row = await this.conn.selectFrom('audiences').selectAll().where('id', '=', id).executeTakeFirst();
    return row && toAudience(row);
  }

  async listAudiences(): Promise<Audience[]> {
    const rows = await this.conn.selectFrom('audiences').selectAll().orderBy('url').execute();
    return rows.map(toAudience);
  }

  async updateAudience(url: string, patch: AudiencePatch, audit?: ChangeAudit): Promise<Audience> {
    return this.write(async (tx) => {
      const values: Partial<Selectable<AudiencesTable>> = {};
      if (patch.name !== undefined) values.name = patch.name;
      if (patch.tokenTtl !== undefined) values.token_ttl = patch.tokenTtl;
      if (patch.signingAlg !== undefined) values.signing_alg = patch.signingAlg;
      if (patch.scopes !== undefined) values.scopes = JSON.stringify(patch.scopes);
      const result = await tx
        .updateTable('audiences')
        .set({ ...values, updated_at: this.stamp() })
        .where('url', '=', url)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0)
        throw new StoreError('not_found', `audience ${url} is not registered`, 'audience');
      // A scope the audience no longer defines is taken from every grant of it, in the same transaction.
      if (patch.scopes !== undefined) {
        const defined = new Set(patch.scopes.map((s) => s.name));
        const grants = await tx
          .selectFrom('grants')
          .select(['client_id', 'scopes'])
          .where('audience_url', '=', url)
          .where('scopes', '!=', '')
          .execute();
        for (const grant of grants) {
          const kept = scopeList(grant.scopes).filter((s) => defined.has(s));
          if (kept.join(' ') === grant.scopes) continue;
          await tx
            .updateTable('grants')
            .set({ scopes: kept.join(' ') })
            .where('client_id', '=', grant.client_id)
            .where('audience_url', '=', url)
            .execute();
        }
      }
      await this.record(tx, 'audience', url, audit);
      const row = await tx
        .selectFrom('audiences')
        .selectAll()
        .where('url', '=', url)
        .executeTakeFirstOrThrow();
      return toAudience(row);
    });
  }

  async removeAudience(url: string, audit?: ChangeAudit): Promise<void> {
    await this.write(async (tx) => {
      // Grants go explicitly rather than by cascade alone, so the result does not depend on engine settings.
      await tx.deleteFrom('grants').where('audience_url', '=', url).execute();
      const result = await tx.deleteFrom('audiences').where('url', '=', url).executeTakeFirst();
      if (Number(result.numDeletedRows) === 0)
        throw new StoreError('not_found', `audience ${url} is not registered`, 'audience');
      await this.record(tx, 'audience', url, audit);
    });
  }

  // --- clients ---

  private async grantsOf(db: Kysely<Database> | Tx, clientId: string): Promise<Grant[]> {
    const rows = await db
      .selectFrom('grants')
      .select(['audience_url', 'scopes', 'claims'])
      .where('client_id', '=', clientId)
      .orderBy('audience_url')
      .execute();
    return rows.map((r) => ({
      audience: r.audience_url,
      scopes: scopeList(r.scopes),
      claims: claimsOf(r.claims),
    }));
  }

  private async requireClient(db: Kysely<Database> | Tx, id: string): Promise<Client> {
    const row = await db.selectFrom('clients').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row) throw new StoreError('not_found', `client ${id} does not exist`, 'client');
    const secrets = await db.selectFrom('client_secrets').selectAll().where('client_id', '=', id).execute();
    return toClient(row, await this.grantsOf(db, id), secrets.map(toSecret));
  }

  private async requireAudiences(tx: Tx, urls: string[]): Promise<void> {
    if (urls.length === 0) return;
    const found = await tx.selectFrom('audiences').select('url').where('url', 'in', urls).execute();
    const known = new Set(found.map((r) => r.url));
    const missing = urls.filter((u) => !known.has(u));
    if (missing.length > 0)
      throw new StoreError('not_found', `audience ${missing.join(', ')} is not registered`, 'audience');
  }

  async createClient(client: NewClient, audit?: ChangeAudit): Promise<Client> {
    const conflict = `client ${client.id} already exists`;
    return orConflict(
      this.write(async (tx) => {
        const existing = await tx
          .selectFrom('clients')
          .select('id')
          .where('id', '=', client.id)
          .executeTakeFirst();
        if (existing) throw new StoreError('conflict', conflict, 'client');
        const audiences = [...new Set(client.audiences)].sort();
        await this.requireAudiences(tx, audiences);
        const at = this.stamp();
        const row = {
          id: client.id,
          name: client.name,
          description: client.description ?? null,
          // Read by servers of versions before 0008 only; a client without secrets gets a digest of nothing anyone has.
          secret_digest: client.secretDigest ?? digestSecret(generateSecret()),
          enabled: client.enabled === false ? 0 : 1,
          token_ttl: client.tokenTtl,
          created_at: at,
          updated_at: at,
          secret_rotated_at: at,
          quota_per_minute: client.quotaPerMinute ?? null,
          quota_per_day: client.quotaPerDay ?? null,
          claims: claimsText(client.claims),
          token_endpoint_auth_method: client.authMethod ?? 'client_secret_basic',
          jwks: client.jwks == null ? null : JSON.stringify(client.jwks),
          jwks_uri: client.jwksUri ?? null,
        };
        await tx.insertInto('clients').values(row).execute();
        const grants: Grant[] = audiences.map((audience) => ({
          audience,
          scopes: scopeList(scopeText(client.scopes?.[audience] ?? [])),
          claims: client.grantClaims?.[audience] ?? null,
        }));
        if (grants.length > 0) {
          await tx
            .insertInto('grants')
            .values(
              grants.map((g) => ({
                client_id: client.id,
                audience_url: g.audience,
                scopes: g.scopes.join(' '),
                claims: claimsText(g.claims),
                created_at: at,
              })),
            )
            .execute();
        }
        const secrets: ClientSecret[] = [];
        if (client.secretDigest !== null) {
          const secret = {
            id: newSecretId(),
            client_id: client.id,
            digest: client.secretDigest,
            created_at: at,
            expires_at: null,
            last_used_at: null,
          };
          await tx.insertInto('client_secrets').values(secret).execute();
          secrets.push(toSecret(secret));
        }
        await this.record(tx, 'client', client.id, audit);
        return toClient(row, grants, secrets);
      }),
      conflict,
      'client',
    );
  }

  /**
   * One round trip whether the client exists or not (the client row joined with its grants), so that a
   * cache miss for an unknown id and for a known one cost the same (INTERFACE.md: no timing difference).
   */
  async findClient(id: string): Promise<Client | undefined> {
    return (await this.findClients([id]))[0];
  }

  async findClients(ids: readonly string[]): Promise<Client[]> {
    if (ids.length === 0) return [];
    // One statement whatever the number of ids: they travel as one parameter (a text[] on PostgreSQL, a JSON
    // array on SQLite), so the statement is compiled and prepared once.
    this.findClientsSql ??= compileOnce(clientsByIds(this.db, this.engine, ''), 1);
    const parameter = this.engine === 'postgres' ? [...ids] : JSON.stringify(ids);
    const rows = await this.runQuery<ClientWithGrant>('tessera_find_clients', this.findClientsSql, [
      parameter,
    ]);
    const clients: Client[] = [];
    // Rows arrive ordered by client id, then grant, then secret: each grant and secret once per client.
    for (let i = 0; i < rows.length;) {
      const {
        audience_url: _grant,
        grant_scopes: _scopes,
        grant_claims: _claims,
        secret_id: _secret,
        secret_digest_: _digest,
        secret_created_at: _created,
        secret_expires_at: _expires,
        secret_last_used_at: _used,
        ...row
      } = rows[i]!;
      const grants: Grant[] = [];
      const secrets: ClientSecret[] = [];
      for (; i < rows.length && rows[i]!.id === row.id; i++) {
        const r = rows[i]!;
        if (r.audience_url !== null && grants[grants.length - 1]?.audience !== r.audience_url)
          grants.push({
            audience: r.audience_url,
            scopes: scopeList(r.grant_scopes ?? ''),
            claims: claimsOf(r.grant_claims),
          });
        if (r.secret_id !== null && !secrets.some((s) => s.id === r.secret_id))
          secrets.push({
            id: r.secret_id,
            digest: r.secret_digest_!,
            createdAt: r.secret_created_at!,
            expiresAt: r.secret_expires_at,
            lastUsedAt: r.secret_last_used_at,
          });
      }
      clients.push(toClient(row, grants, secrets));
    }
    return clients;
  }

  async listClients(): Promise<Client[]> {
    const [rows, grants, secrets] = await Promise.all([
      this.conn.selectFrom('clients').selectAll().orderBy('created_at').orderBy('id').execute(),
      this.conn
        .selectFrom('grants')
        .select(['client_id', 'audience_url', 'scopes', 'claims'])
        .orderBy('audience_url')
        .execute(),
      this.conn.selectFrom('client_secrets').selectAll().execute(),
    ]);
    return this.withGrants(rows, grants, secrets);
  }

  async listClientsPage(after: string | null, limit: number, search?: string): Promise<Client[]> {
    let query = this.conn.selectFrom('clients').selectAll().orderBy('id').limit(limit);
    if (after !== null) query = query.where('id', '>', after);
    if (search !== undefined && search !== '') {
      // A substring of the id or the name, whatever the case of ASCII letters (lower() on both engines; LIKE
      // alone is case-sensitive on PostgreSQL). The text is matched literally: %, _ and \ are escaped.
      const pattern = `%${search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      query = query.where(
        sql<boolean>`(lower(id) like ${pattern} escape '\\' or lower(name) like ${pattern} escape '\\')`,
      );
    }
    const rows = await query.execute();
    if (rows.length === 0) return [];
    const ids = rows.map((r) => r.id);
    const [grants, secrets] = await Promise.all([
      this.conn
        .selectFrom('grants')
        .select(['client_id', 'audience_url', 'scopes', 'claims'])
        .where('client_id', 'in', ids)
        .orderBy('audience_url')
        .execute(),
      this.conn.selectFrom('client_secrets').selectAll().where('client_id', 'in', ids).execute(),
    ]);
    return this.withGrants(rows, grants, secrets);
  }

  private withGrants(
    rows: Selectable<ClientsTable>[],
    grants: { client_id: string; audience_url: string; scopes: string; claims: string | null }[],
    secretRows: Selectable<ClientSecretsTable>[],
  ): Client[] {
    const secrets = secretsByClient(secretRows);
    const byClient = new Map<string, Grant[]>();
    for (const g of grants) {
      const grant = { audience: g.audience_url, scopes: scopeList(g.scopes), claims: claimsOf(g.claims) };
      const list = byClient.get(g.client_id);
      if (list) list.push(grant);
      else byClient.set(g.client_id, [grant]);
    }
    return rows.map((row) => toClient(row, byClient.get(row.id) ?? [], secrets.get(row.id) ?? []));
  }

  async listClientIds(after: string | null, limit: number): Promise<string[]> {
    // The primary key's index alone answers it, on both engines (PostgreSQL's ids are collated "C").
    let query = this.conn.selectFrom('clients').select('id').orderBy('id').limit(limit);
    if (after !== null) query = query.where('id', '>', after);
    return (await query.execute()).map((row) => row.id);
  }

  async countClients(): Promise<number> {
    const row = await this.conn
      .selectFrom('clients')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  private async patchClient(
    id: string,
    values: Partial<Selectable<ClientsTable>>,
    audit: ChangeAudit | undefined,
  ): Promise<Client> {
    return this.write(async (tx) => {
      const result = await tx
        .updateTable('clients')
        .set({ ...values, updated_at: this.stamp() })
        .where('id', '=', id)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0)
        throw new StoreError('not_found', `client ${id} does not exist`, 'client');
      // A client that authenticates by key has no secret that works: its secrets go, for good (a secret that
      // came back with a switch to a secret method later would be one an operator thought revoked).
      if (values.token_endpoint_auth_method === 'private_key_jwt')
        await tx.deleteFrom('client_secrets').where('client_id', '=', id).execute();
      await this.record(tx, 'client', id, audit);
      return this.requireClient(tx, id);
    });
  }

  async setClientSecret(id: string, secretDigest: string, audit?: ChangeAudit): Promise<Client> {
    return this.addClientSecret(id, { id: newSecretId(), digest: secretDigest, expiresAt: null }, 0, audit);
  }

  async addClientSecret(
    clientId: string,
    secret: { id: string; digest: string; expiresAt: string | null; expiresInSeconds?: number },
    othersGraceSeconds: number | null,
    audit?: ChangeAudit,
  ): Promise<Client> {
    return this.write(async (tx) => {
      await this.requireClient(tx, clientId);
      // One clock reading for the new secret's time and the others' expiry: a grace is exact.
      const clock = this.now();
      const now = clock.toISOString();
      const othersExpireAt =
        othersGraceSeconds === null
          ? null
          : new Date(clock.getTime() + othersGraceSeconds * 1000).toISOString();
      // Secrets expired by now are gone for good: pruned, so that they neither count nor clutter the list.
      await tx
        .deleteFrom('client_secrets')
        .where('client_id', '=', clientId)
        .where('expires_at', 'is not', null)
        .where('expires_at', '<=', now)
        .execute();
      if (othersExpireAt !== null) {
        await tx
          .updateTable('client_secrets')
          .set({ expires_at: othersExpireAt })
          .where('client_id', '=', clientId)
          .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', othersExpireAt)]))
          .execute();
        if (othersExpireAt <= now)
          await tx
            .deleteFrom('client_secrets')
            .where('client_id', '=', clientId)
            .where('expires_at', '<=', now)
            .execute();
      }
      const live = await tx
        .selectFrom('client_secrets')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('client_id', '=', clientId)
        .executeTakeFirstOrThrow();
      if (Number(live.n) >= MAX_LIVE_SECRETS)
        throw new StoreError(
          'conflict',
          `client ${clientId} has ${MAX_LIVE_SECRETS} live secrets already: revoke one, or rotate with a grace period shorter than theirs`,
          'secret',
        );
      await tx
        .insertInto('client_secrets')
        .values({
          id: secret.id,
          client_id: clientId,
          digest: secret.digest,
          created_at: now,
          expires_at:
            secret.expiresInSeconds === undefined
              ? secret.expiresAt
              : new Date(clock.getTime() + secret.expiresInSeconds * 1000).toISOString(),
          last_used_at: null,
        })
        .execute();
      await tx
        .updateTable('clients')
        .set({ secret_digest: secret.digest, secret_rotated_at: now, updated_at: now })
        .where('id', '=', clientId)
        .execute();
      await this.record(tx, 'client', clientId, audit);
      return this.requireClient(tx, clientId);
    });
  }

  async revokeClientSecret(clientId: string, secretId: string, audit?: ChangeAudit): Promise<Client> {
    return this.write(async (tx) => {
      await this.requireClient(tx, clientId);
      const result = await tx
        .deleteFrom('client_secrets')
        .where('client_id', '=', clientId)
        .where('id', '=', secretId)
        .executeTakeFirst();
      if (Number(result.numDeletedRows) === 0)
        throw new StoreError('not_found', `client ${clientId} has no secret ${secretId}`, 'secret');
      await tx.updateTable('clients').set({ updated_at: this.stamp() }).where('id', '=', clientId).execute();
      await this.record(tx, 'client', clientId, audit);
      return this.requireClient(tx, clientId);
    });
  }

  async markSecretsUsed(ids: readonly string[], at: string): Promise<void> {
    // A statement per thousand ids (SQLite's parameter limit), each one short: a cold cache of many clients
    // makes batches of thousands, and they must not hold the write lock against the token path's lookups.
    for (let i = 0; i < ids.length; i += 1000) {
      await this.conn
        .updateTable('client_secrets')
        .set({ last_used_at: at })
        .where('id', 'in', ids.slice(i, i + 1000))
        .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', at)]))
        .execute();
    }
  }

  async useAssertionJti(id: string, expiresAt: number): Promise<boolean> {
    // One statement, in no transaction (never behind the change feed's lock): a new id is inserted; one whose
    // time is over is taken again; one still in use is left alone and nothing is returned (a replay). Compiled
    // once and prepared, as findClients: it runs for every private_key_jwt token.
    this.useJtiSql ??= compileOnce(
      this.db
        .insertInto('assertion_jtis')
        .values({ id: '', expires_at: 0 })
        .onConflict((oc) =>
          oc
            .column('id')
            .doUpdateSet({ expires_at: (eb) => eb.ref('excluded.expires_at') })
            .where('assertion_jtis.expires_at', '<=', 0),
        )
        .returning('id'),
      3,
    );
    const rows = await this.runQuery<{ id: string }>('tessera_use_jti', this.useJtiSql, [
      id,
      expiresAt,
      this.now().getTime(),
    ]);
    return rows.length === 1;
  }

  async pruneAssertionJtis(now: number, limit: number): Promise<number> {
    // At most `limit` rows a statement: a short hold of the write lock, however many expired meanwhile.
    const result = await this.conn
      .deleteFrom('assertion_jtis')
      .where('id', 'in', (eb) =>
        eb.selectFrom('assertion_jtis').select('id').where('expires_at', '<=', now).limit(limit),
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  async setClientEnabled(id: string, enabled: boolean, audit?: ChangeAudit): Promise<Client> {
    return this.patchClient(id, { enabled: enabled ? 1 : 0 }, audit);
  }

  async setClientQuota(
    id: string,
    quota: { perMinute: number | null; perDay: number | null },
    audit?: ChangeAudit,
  ): Promise<Client> {
    return this.patchClient(id, { quota_per_minute: quota.perMinute, quota_per_day: quota.perDay }, audit);
  }

  async updateClient(id: string, patch: ClientPatch, audit?: ChangeAudit): Promise<Client> {
    const values: Partial<Selectable<ClientsTable>> = {};
    if (patch.name !== undefined) values.name = patch.name;
    if (patch.description !== undefined) values.description = patch.description;
    if (patch.enabled !== undefined) values.enabled = patch.enabled ? 1 : 0;
    if (patch.tokenTtl !== undefined) values.token_ttl = patch.tokenTtl;
    if (patch.quotaPerMinute !== undefined) values.quota_per_minute = patch.quotaPerMinute;
    if (patch.quotaPerDay !== undefined) values.quota_per_day = patch.quotaPerDay;
    if (patch.claims !== undefined) values.claims = claimsText(patch.claims);
    if (patch.authMethod !== undefined) values.token_endpoint_auth_method = patch.authMethod;
    if (patch.jwks !== undefined) values.jwks = patch.jwks === null ? null : JSON.stringify(patch.jwks);
    if (patch.jwksUri !== undefined) values.jwks_uri = patch.jwksUri;
    return this.patchClient(id, values, audit);
  }

  async deleteClient(id: string, audit?: ChangeAudit): Promise<void> {
    await this.write(async (tx) => {
      await tx.deleteFrom('grants').where('client_id', '=', id).execute();
      const result = await tx.deleteFrom('clients').where('id', '=', id).executeTakeFirst();
      if (Number(result.numDeletedRows) === 0)
        throw new StoreError('not_found', `client ${id} does not exist`, 'client');
      await this.record(tx, 'client', id, audit);
    });
  }

  // --- grants ---

  async addGrant(clientId: string, audienceUrl: string, audit?: ChangeAudit): Promise<boolean> {
    return this.write(async (tx) => {
      await this.requireClient(tx, clientId);
      await this.requireAudiences(tx, [audienceUrl]);
      const existing = await tx
        .selectFrom('grants')
        .select('client_id')
        .where('client_id', '=', clientId)
        .where('audience_url', '=', audienceUrl)
        .executeTakeFirst();
      if (existing) return false;
      await tx
        .insertInto('grants')
        .values({
          client_id: clientId,
          audience_url: audienceUrl,
          scopes: '',
          claims: null,
          created_at: this.stamp(),
        })
        .execute();
      await this.record(tx, 'grant', `${clientId} ${audienceUrl}`, audit);
      return true;
    });
  }

  async putGrant(
    clientId: string,
    audienceUrl: string,
    scopes: string[],
    audit?: ChangeAudit,
    claims: Claims | null = null,
  ): Promise<boolean> {
    return this.write(async (tx) => {
      await this.requireClient(tx, clientId);
      await this.requireAudiences(tx, [audienceUrl]);
      const text = scopeText(scopes);
      const updated = await tx
        .updateTable('grants')
        .set({ scopes: text, claims: claimsText(claims) })
        .where('client_id', '=', clientId)
        .where('audience_url', '=', audienceUrl)
        .executeTakeFirst();
      const created = Number(updated.numUpdatedRows) === 0;
      if (created)
        await tx
          .insertInto('grants')
          .values({
            client_id: clientId,
            audience_url: audienceUrl,
            scopes: text,
            claims: claimsText(claims),
            created_at: this.stamp(),
          })
          .execute();
      await this.record(tx, 'grant', `${clientId} ${audienceUrl}`, audit);
      return created;
    });
  }

  async removeGrant(clientId: string, audienceUrl: string, audit?: ChangeAudit): Promise<void> {
    await this.write(async (tx) => {
      const result = await tx
        .deleteFrom('grants')
        .where('client_id', '=', clientId)
        .where('audience_url', '=', audienceUrl)
        .executeTakeFirst();
      if (Number(result.numDeletedRows) === 0) {
        throw new StoreError('not_found', `client ${clientId} has no grant for ${audienceUrl}`, 'grant');
      }
      await this.record(tx, 'grant', `${clientId} ${audienceUrl}`, audit);
    });
  }

  // --- signing keys ---

  async listSigningKeys(): Promise<SigningKey[]> {
    const rows = await this.conn
      .selectFrom('signing_keys')
      .selectAll()
      .orderBy('created_at')
      .orderBy('kid')
      .execute();
    return rows.map(toSigningKey);
  }

  async insertSigningKey(key: SigningKey): Promise<void> {
    await this.write(async (tx) => {
      await this.insertKeyRow(tx, key);
      await this.record(tx, 'key', key.kid);
    });
  }

  private async insertKeyRow(tx: Tx, key: SigningKey): Promise<void> {
    await tx
      .insertInto('signing_keys')
      .values({
        kid: key.kid,
        alg: key.alg,
        public_jwk: key.publicJwk,
        private_jwk_sealed: key.privateJwkSealed,
        created_at: key.createdAt,
        activates_at: key.activatesAt,
        retired_at: key.retiredAt,
      })
      .execute();
  }

  async changeSigningKeys(
    plan: (keys: SigningKey[]) => KeyChange | undefined,
    audit?: (change: KeyChange) => ChangeAudit,
  ): Promise<KeyChange | undefined> {
    const nothing = Symbol('nothing to write');
    try {
      return await this.write(async (tx) => {
        // Write first: on SQLite that takes the write lock before reading, on PostgreSQL the change-feed
        // lock; either way no other writer reads the keys between our read and our write.
        await this.record(tx, 'key', '*');
        const rows = await tx
          .selectFrom('signing_keys')
          .selectAll()
          .orderBy('created_at')
          .orderBy('kid')
          .execute();
        const change = plan(rows.map(toSigningKey));
        if (!change || (!change.insert && !change.update?.length)) {
          // Rolling back would undo the caller's whole transaction: within one, the change record stays.
          if (this.tx) return undefined;
          throw nothing;
        }
        if (change.insert) await this.insertKeyRow(tx, change.insert);
        for (const { kid, activatesAt, retiredAt } of change.update ?? []) {
          const result = await tx
            .updateTable('signing_keys')
            .set({
              ...(activatesAt === undefined ? {} : { activates_at: activatesAt }),
              ...(retiredAt === undefined ? {} : { retired_at: retiredAt }),
            })
            .where('kid', '=', kid)
            .executeTakeFirst();
          if (Number(result.numUpdatedRows) === 0)
            throw new StoreError('not_found', `signing key ${kid} does not exist`, 'signing_key');
        }
        if (audit) await this.writeChangeAudit(tx, audit(change));
        return change;
      });
    } catch (error) {
      if (error === nothing) return undefined;
      throw error;
    }
  }

  // --- audit events ---

  async appendAuditEvents(events: readonly AuditRecord[], position?: SpoolPosition): Promise<void> {
    if (events.length === 0) return;
    const parameters: unknown[] = [];
    for (const e of events)
      parameters.push(e.at, e.type, e.clientId, e.audience, e.jti, e.reason, e.source, e.count);
    const counts: unknown[] = [];
    for (const [minute, [issued, refused]] of countsByMinute(events)) counts.push(minute, issued, refused);
    const minutes = counts.length / 3;
    const at = position === undefined ? [] : [position.segment, position.offset, this.now().getTime()];
    if (this.engine === 'postgres') {
      // One statement: the rows, the minutes' counts and the segment's new position commit together (a
      // data-modifying CTE). Only full batches of one or two minutes (the recorder's usual statement under
      // load) are prepared, so that connections do not keep a plan for every shape.
      const text = this.auditSql(events.length, minutes, position !== undefined);
      const values = [...parameters, ...counts, ...at];
      if (events.length === AUDIT_BATCH && minutes <= 2)
        await this.runQuery(
          `tessera_audit_${position === undefined ? 'insert' : 'insert_at'}_${minutes}`,
          text,
          values,
        );
      else await this.conn.executeQuery(CompiledQuery.raw(text, values));
      return;
    }
    // SQLite has no data-modifying CTE: the statements in one transaction (all run in this process, at once).
    await this.write(async (tx) => {
      await tx.executeQuery(CompiledQuery.raw(this.auditSql(events.length, 0, false), parameters));
      if (minutes > 0) await tx.executeQuery(CompiledQuery.raw(this.countsSql(minutes), counts));
      if (position !== undefined) await tx.executeQuery(CompiledQuery.raw(this.spoolPositionSql(), at));
    });
  }

  /** Compiled audit inserts by shape (see auditSql), and SQLite's count upserts by minutes (countsSql). */
  private readonly auditInserts = new Map<string, string>();

  /**
   * The text of an insert of `rows` audit events, compiled by Kysely once per shape and kept: the recorder
   * writes full batches of the same size, and building a thousand-row query each time cost more than SQLite's
   * insert. With `minutes` (PostgreSQL), the same statement adds to that many minutes' token counts, and with
   * `withPosition` upserts the spool position too.
   */
  private auditSql(rows: number, minutes: number, withPosition: boolean): string {
    const key = `${rows} ${minutes} ${withPosition}`;
    let text = this.auditInserts.get(key);
    if (text === undefined) {
      const row = {
        at: 0,
        type: '',
        client_id: null,
        audience: null,
        jti: null,
        reason: null,
        source: null,
        count: null,
      };
      const perRow = Object.keys(row).length;
      // The parameters follow the row's key order, as appendAuditEvents pushes them.
      const insert = (db: Kysely<Database>) =>
        db.insertInto('audit_events').values(Array.from({ length: rows }, () => row));
      const parameters = rows * perRow + minutes * 3;
      // No minutes: a batch of the admin API's refusals only, which the token counts leave out.
      if (minutes === 0 && !withPosition) text = compileOnce(insert(this.db), parameters);
      else {
        const written = this.db.with('written', (db) => insert(db as Kysely<Database>));
        const counted =
          minutes === 0
            ? written
            : written.with('counted', (db) => addCounts(db as Kysely<Database>, minutes));
        text = withPosition
          ? compileOnce(
              counted
                .insertInto('audit_spool_positions')
                .values({ segment: '', position: 0, updated_at: 0 })
                .onConflict((oc) =>
                  oc.column('segment').doUpdateSet((eb) => ({
                    position: eb.ref('excluded.position'),
                    updated_at: eb.ref('excluded.updated_at'),
                  })),
                ),
              parameters + 3,
            )
          : compileOnce(addCounts(written as unknown as Kysely<Database>, minutes), parameters);
      }
      if (this.auditInserts.size >= 8) this.auditInserts.clear();
      this.auditInserts.set(key, text);
    }
    return text;
  }

  /** SQLite: the upsert of `minutes` minutes' token counts, compiled once per number of minutes. */
  private countsSql(minutes: number): string {
    const key = `counts ${minutes}`;
    let text = this.auditInserts.get(key);
    if (text === undefined) {
      text = compileOnce(addCounts(this.db, minutes), minutes * 3);
      if (this.auditInserts.size >= 8) this.auditInserts.clear();
      this.auditInserts.set(key, text);
    }
    return text;
  }

  private spoolPositionSqlText: string | undefined;

  private spoolPositionSql(): string {
    this.spoolPositionSqlText ??= compileOnce(
      this.db
        .insertInto('audit_spool_positions')
        .values({ segment: '', position: 0, updated_at: 0 })
        .onConflict((oc) =>
          oc.column('segment').doUpdateSet((eb) => ({
            position: eb.ref('excluded.position'),
            updated_at: eb.ref('excluded.updated_at'),
          })),
        ),
      3,
    );
    return this.spoolPositionSqlText;
  }

  async spoolPosition(segment: string): Promise<number> {
    const row = await this.conn
      .selectFrom('audit_spool_positions')
      .select('position')
      .where('segment', '=', segment)
      .executeTakeFirst();
    return row === undefined ? 0 : Number(row.position);
  }

  async forgetSpoolSegments(segments: readonly string[]): Promise<void> {
    if (segments.length === 0) return;
    await this.conn.deleteFrom('audit_spool_positions').where('segment', 'in', segments).execute();
  }

  async queryAuditEvents(filter: AuditFilter): Promise<AuditEvent[]> {
    let query = this.conn.selectFrom('audit_events').selectAll();
    if (filter.clientId !== undefined) query = query.where('client_id', '=', filter.clientId);
    if (filter.audience !== undefined) query = query.where('audience', '=', filter.audience);
    if (filter.types !== undefined) {
      const types = filter.types;
      query = types.length === 1 ? query.where('type', '=', types[0]!) : query.where('type', 'in', types);
    }
    if (filter.since !== undefined) query = query.where('at', '>=', Date.parse(filter.since));
    if (filter.until !== undefined) query = query.where('at', '<', Date.parse(filter.until));
    if (filter.after !== undefined) {
      // Keyset paging (newest first): strictly before the cursor's (at, id). `at <=` lets the index bound it.
      const at = Date.parse(filter.after.at);
      const id = filter.after.id;
      query = query.where('at', '<=', at).where((eb) => eb.or([eb('at', '<', at), eb('id', '<', id)]));
    }
    const rows = await query.orderBy('at', 'desc').orderBy('id', 'desc').limit(filter.limit).execute();
    return rows.map((r) => ({
      id: Number(r.id),
      at: new Date(Number(r.at)).toISOString(),
      type: r.type as AuditEventType,
      clientId: r.client_id,
      audience: r.audience,
      jti: r.jti,
      reason: r.reason,
      source: r.source,
      count: r.count === null ? null : Number(r.count),
      actor: r.actor,
      target: r.target,
      changes: r.changes === null ? null : (JSON.parse(r.changes) as Record<string, unknown>),
    }));
  }

  /**
   * One small batch, oldest first: the recorder calls it again (yielding in between) until it deletes fewer
   * than it asked for, so that neither engine holds a long lock and a SQLite server never stalls.
   */
  async pruneAuditEvents(olderThan: Date, limit: number): Promise<number> {
    const result = await this.conn
      .deleteFrom('audit_events')
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('audit_events')
          .select('id')
          .where('at', '<', olderThan.getTime())
          .orderBy('at')
          .limit(limit),
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  async tokenCounts(since: number, until: number): Promise<TokenCount[]> {
    const rows = await this.conn
      .selectFrom('token_counts')
      .selectAll()
      .where('minute', '>=', since)
      .where('minute', '<', until)
      .orderBy('minute')
      .execute();
    return rows.map((r) => ({
      minute: new Date(Number(r.minute)).toISOString(),
      issued: Number(r.issued),
      refused: Number(r.refused),
    }));
  }

  async pruneTokenCounts(olderThan: Date): Promise<number> {
    const result = await this.conn
      .deleteFrom('token_counts')
      .where('minute', '<', olderThan.getTime())
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  // --- operators and their sessions ---

  async addOperator(operator: NewOperator, audit?: ChangeAudit): Promise<Operator> {
    const conflict = `operator ${operator.email} already exists`;
    return orConflict(
      this.write(async (tx) => {
        const existing = await tx
          .selectFrom('operators')
          .select('id')
          .where('email', '=', operator.email)
          .executeTakeFirst();
        if (existing) throw new StoreError('conflict', conflict, 'operator');
        const at = this.stamp();
        const row = {
          id: operator.id,
          email: operator.email,
          role: operator.role,
          enabled: 1,
          password_hash: null,
          enroll_digest: operator.enrollDigest,
          enroll_expires_at: operator.enrollExpiresAt,
          last_login_at: null,
          created_at: at,
          updated_at: at,
        };
        await tx.insertInto('operators').values(row).execute();
        if (audit) await this.writeChangeAudit(tx, audit);
        return toOperator(row);
      }),
      conflict,
      'operator',
    );
  }

  async findOperator(idOrEmail: string): Promise<Operator | undefined> {
    const row = await this.conn
      .selectFrom('operators')
      .selectAll()
      .where((eb) => eb.or([eb('id', '=', idOrEmail), eb('email', '=', idOrEmail)]))
      .executeTakeFirst();
    return row && toOperator(row);
  }

  async findOperatorCredentials(
    email: string,
  ): Promise<{ operator: Operator; passwordHash: string | null } | undefined> {
    const row = await this.conn
      .selectFrom('operators')
      .selectAll()
      .where('email', '=', email)
      .executeTakeFirst();
    return row && { operator: toOperator(row), passwordHash: row.password_hash };
  }

  async findOperatorByEnrollment(digest: string): Promise<Operator | undefined> {
    const row = await this.conn
      .selectFrom('operators')
      .selectAll()
      .where('enroll_digest', '=', digest)
      .executeTakeFirst();
    return row && toOperator(row);
  }

  async listOperators(): Promise<Operator[]> {
    const rows = await this.conn.selectFrom('operators').selectAll().orderBy('email').execute();
    return rows.map(toOperator);
  }

  async updateOperator(id: string, patch: OperatorPatch, audit?: ChangeAudit): Promise<Operator> {
    return this.write(async (tx) => {
      const values: Partial<Selectable<OperatorsTable>> = {};
      if (patch.role !== undefined) values.role = patch.role;
      if (patch.enabled !== undefined) values.enabled = patch.enabled ? 1 : 0;
      if (patch.enrollment !== undefined) {
        values.password_hash = null;
        values.enroll_digest = patch.enrollment.digest;
        values.enroll_expires_at = patch.enrollment.expiresAt;
      }
      const result = await tx
        .updateTable('operators')
        .set({ ...values, updated_at: this.stamp() })
        .where('id', '=', id)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0)
        throw new StoreError('not_found', `operator ${id} does not exist`, 'operator');
      // A disabled operator, or one whose password was reset, is signed out everywhere at once: sessions are
      // read from the store on every request, so this takes effect on every instance with the commit.
      if (patch.enabled === false || patch.enrollment !== undefined)
        await tx.deleteFrom('operator_sessions').where('operator_id', '=', id).execute();
      if (audit) await this.writeChangeAudit(tx, audit);
      return toOperator(
        await tx.selectFrom('operators').selectAll().where('id', '=', id).executeTakeFirstOrThrow(),
      );
    });
  }

  async removeOperator(id: string, audit?: ChangeAudit): Promise<void> {
    await this.write(async (tx) => {
      // Sessions go explicitly rather than by cascade alone, as grants do with their audience.
      await tx.deleteFrom('operator_sessions').where('operator_id', '=', id).execute();
      const result = await tx.deleteFrom('operators').where('id', '=', id).executeTakeFirst();
      if (Number(result.numDeletedRows) === 0)
        throw new StoreError('not_found', `operator ${id} does not exist`, 'operator');
      if (audit) await this.writeChangeAudit(tx, audit);
    });
  }

  async enrollOperator(
    digest: string,
    passwordHash: string,
    now: string,
    audit: (operator: Operator) => ChangeAudit,
  ): Promise<Operator | undefined> {
    return this.write(async (tx) => {
      const found = await tx
        .selectFrom('operators')
        .select('id')
        .where('enroll_digest', '=', digest)
        .executeTakeFirst();
      if (!found) return undefined;
      // The digest in the WHERE makes the link work once: of two requests presenting it at once, the second
      // updates nothing (PostgreSQL re-reads the row once the first commits; SQLite runs one writer at a time).
      const result = await tx
        .updateTable('operators')
        .set({ password_hash: passwordHash, enroll_digest: null, enroll_expires_at: null, updated_at: now })
        .where('id', '=', found.id)
        .where('enroll_digest', '=', digest)
        .where('enroll_expires_at', '>', now)
        .where('enabled', '=', 1)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) return undefined;
      const row = await tx
        .selectFrom('operators')
        .selectAll()
        .where('id', '=', found.id)
        .executeTakeFirstOrThrow();
      const operator = toOperator(row);
      await this.writeChangeAudit(tx, audit(operator));
      return operator;
    });
  }

  async createOperatorSession(session: OperatorSession, audit?: ChangeAudit): Promise<void> {
    await this.write(async (tx) => {
      await tx
        .insertInto('operator_sessions')
        .values({
          id: session.id,
          operator_id: session.operatorId,
          created_at: session.createdAt,
          last_seen_at: session.lastSeenAt,
          expires_at: session.expiresAt,
          source: session.source,
        })
        .execute();
      await tx
        .updateTable('operators')
        .set({ last_login_at: new Date(session.createdAt).toISOString() })
        .where('id', '=', session.operatorId)
        .execute();
      if (audit) await this.writeChangeAudit(tx, audit);
    });
  }

  async findOperatorSession(
    id: string,
  ): Promise<{ session: OperatorSession; operator: Operator } | undefined> {
    const row = await this.conn
      .selectFrom('operator_sessions')
      .innerJoin('operators', 'operators.id', 'operator_sessions.operator_id')
      .selectAll('operators')
      .select([
        'operator_sessions.id as session_id',
        'operator_sessions.created_at as session_created_at',
        'operator_sessions.last_seen_at',
        'operator_sessions.expires_at',
        'operator_sessions.source',
      ])
      .where('operator_sessions.id', '=', id)
      .executeTakeFirst();
    if (!row) return undefined;
    const { session_id, session_created_at, last_seen_at, expires_at, source, ...operator } = row;
    return {
      session: {
        id: session_id,
        operatorId: operator.id,
        createdAt: Number(session_created_at),
        lastSeenAt: Number(last_seen_at),
        expiresAt: Number(expires_at),
        source,
      },
      operator: toOperator(operator),
    };
  }

  async touchOperatorSession(id: string, at: number): Promise<void> {
    // One statement outside the change feed's lock: a console request never queues behind a writer for it.
    await this.conn
      .updateTable('operator_sessions')
      .set({ last_seen_at: at })
      .where('id', '=', id)
      .where('last_seen_at', '<', at)
      .execute();
  }

  async deleteOperatorSession(id: string, audit?: ChangeAudit): Promise<void> {
    await this.write(async (tx) => {
      await tx.deleteFrom('operator_sessions').where('id', '=', id).execute();
      if (audit) await this.writeChangeAudit(tx, audit);
    });
  }

  async pruneOperatorSessions(now: number, idleBefore: number): Promise<number> {
    const result = await this.conn
      .deleteFrom('operator_sessions')
      .where((eb) => eb.or([eb('expires_at', '<=', now), eb('last_seen_at', '<', idleBefore)]))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  async recordEvent(audit: ChangeAudit): Promise<void> {
    await this.write((tx) => this.writeChangeAudit(tx, audit));
  }

  // --- change feed ---

  async changesSince(seq: number, limit: number): Promise<Change[]> {
    const rows = await this.conn
      .selectFrom('changes')
      .select(['seq', 'entity', 'key'])
      .where('seq', '>', seq)
      .orderBy('seq')
      .limit(limit)
      .execute();
    return rows.map((r) => ({ seq: Number(r.seq), entity: r.entity as ChangeEntity, key: r.key }));
  }

  async latestChange(): Promise<number> {
    const row = await this.conn
      .selectFrom('changes')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .executeTakeFirst();
    return row?.seq == null ? 0 : Number(row.seq);
  }

  async pruneChanges(olderThan: Date): Promise<number> {
    const result = await this.conn
      .deleteFrom('changes')
      .where('created_at', '<', olderThan.toISOString())
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
