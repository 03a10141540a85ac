import { CompiledQuery, sql, type Compilable, type Kysely, type Transaction } from 'kysely';
import type { Engine } from '../migrations.js';
import type { Database } from '../schema.js';
import { StoreError, type ChangeAudit, type ChangeEntity, type StoreResource } from '../types.js';

export type Tx = Transaction<Database>;

/** PostgreSQL NOTIFY channel on which every committed change is announced. */
export const CHANGE_CHANNEL = 'tessera_changes';
/**
 * Rows per multi-row insert (insertRows), and ids per `in (...)` list: 500 rows of a table's columns stay within
 * both engines' limits on bound parameters (SQLite 32,766; PostgreSQL 65,535).
 */
export const ROWS_PER_STATEMENT = 500;

export function* chunks<T>(items: readonly T[], size: number): Generator<T[]> {
  for (let i = 0; i < items.length; i += size) yield items.slice(i, i + size);
}
/** The change feed's lock on PostgreSQL (an arbitrary constant key): writers commit one at a time. */
const lockChangeFeed = () => sql`select pg_advisory_xact_lock(7215426781233001)`;

/**
 * Runs a statement the token path repeats as a prepared statement, where the engine keeps one by name
 * (PostgreSQL: postgres.ts). Without one, the statement runs as any other: SQLite's adapter reuses statements
 * by their text (sqlite.ts).
 */
export type RunPrepared = <R>(name: string, text: string, parameters: unknown[]) => Promise<R[]>;

/** A unique or primary key violation, on either engine (SQLite extended codes 2067/1555, PostgreSQL 23505). */
export function isUniqueViolation(error: unknown): boolean {
  const e = error as { errcode?: number; code?: string };
  return e?.errcode === 2067 || e?.errcode === 1555 || e?.code === '23505';
}

/** Throws not_found (with `message`, about `resource`) unless the statement changed or deleted a row. */
export function mustTouch(
  result: { numUpdatedRows: bigint } | { numDeletedRows: bigint },
  resource: StoreResource,
  message: string,
): void {
  const rows = 'numUpdatedRows' in result ? result.numUpdatedRows : result.numDeletedRows;
  if (Number(rows) === 0) throw new StoreError('not_found', message, resource);
}

/** The not-found messages of the resources many writes check for. */
export const notFound = {
  client: (id: string) => `client ${id} does not exist`,
  audience: (url: string) => `audience ${url} is not registered`,
  operator: (id: string) => `operator ${id} does not exist`,
  grant: (clientId: string, url: string) => `client ${clientId} has no grant for ${url}`,
};

/** The SQL text of a query whose parameters are bound per call; checks that it takes exactly that many. */
export function compileOnce(query: Compilable, parameters: number): string {
  const compiled = query.compile();
  if (compiled.parameters.length !== parameters)
    throw new Error(`expected ${parameters} parameters, the query has ${compiled.parameters.length}`);
  return compiled.sql;
}

/**
 * SQL compiled once and kept, shared by a store and the stores bound to its transactions: the token path's
 * statements by name, and the audit trail's inserts by shape (a few at a time: a batch of a new size replaces
 * them).
 */
export class Statements {
  private readonly named = new Map<string, string>();
  private readonly shapes = new Map<string, string>();

  get(name: string, compile: () => string): string {
    let text = this.named.get(name);
    if (text === undefined) this.named.set(name, (text = compile()));
    return text;
  }

  shape(key: string, compile: () => string): string {
    let text = this.shapes.get(key);
    if (text === undefined) {
      text = compile();
      if (this.shapes.size >= 8) this.shapes.clear();
      this.shapes.set(key, text);
    }
    return text;
  }
}

/**
 * What every resource of the store shares (kysely/*.ts): the connection, the store's clock, writes in a
 * transaction, the change record with its audit event, and the statements compiled once. A base is the store's
 * own, or bound to one transaction (bind): then every query and write of the resources made over it runs in
 * that transaction.
 */
export class StoreBase {
  /** Set on a bound base once its transaction has committed or rolled back: it cannot be used any more. */
  private over = false;

  constructor(
    readonly db: Kysely<Database>,
    readonly engine: Engine,
    readonly now: () => Date,
    private readonly runPrepared: RunPrepared | undefined,
    /** The transaction this base is bound to; undefined for the store's own. */
    readonly tx?: Tx,
    readonly statements: Statements = new Statements(),
  ) {}

  /** Refuses a bound base whose transaction is over. */
  assertOpen(): void {
    if (this.over)
      throw new Error('this store was bound to a transaction that is over: use the store itself');
  }

  /** Where a query runs: the bound transaction, or the database. */
  get conn(): Kysely<Database> {
    this.assertOpen();
    return this.tx ?? this.db;
  }

  stamp(): string {
    return this.now().toISOString();
  }

  /**
   * On PostgreSQL, every writing transaction takes the change feed's lock first (see record): taken later,
   * after row locks, two multi-step transactions could each hold what the other waits for.
   */
  private async lockChanges(tx: Tx): Promise<void> {
    if (this.engine === 'postgres') await lockChangeFeed().execute(tx);
  }

  /**
   * Runs `work` in a transaction: the bound one when this base is bound to one (so that an operation is one
   * step of the caller's transaction), or a new one. Every write goes through here.
   */
  write<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    this.assertOpen();
    if (this.tx) return work(this.tx);
    return this.db.transaction().execute(async (tx) => {
      await this.lockChanges(tx);
      return work(tx);
    });
  }

  /**
   * Runs `fn` with a base bound to a new transaction: it commits when `fn` resolves, or rolls back, writing
   * nothing, when it throws. The bound base shares everything with this one but the connection it runs on.
   */
  async bind<T>(fn: (bound: StoreBase) => Promise<T>): Promise<T> {
    this.assertOpen();
    let bound: StoreBase | undefined;
    try {
      return await this.db.transaction().execute(async (tx) => {
        await this.lockChanges(tx);
        bound = new StoreBase(this.db, this.engine, this.now, this.runPrepared, tx, this.statements);
        return fn(bound);
      });
    } finally {
      // Its connection is back in the pool (or is SQLite's only one): a bound store kept beyond its
      // transaction must not write outside it.
      if (bound) bound.over = true;
    }
  }

  /**
   * Inserts something new whose key may be taken: `taken` looks first, and a writer that got there between
   * that look and the insert (a unique violation) gets the same answer, a conflict about `resource`.
   */
  async create<T>(
    resource: StoreResource,
    conflict: string,
    taken: (tx: Tx) => Promise<unknown>,
    insert: (tx: Tx) => Promise<T>,
  ): Promise<T> {
    try {
      return await this.write(async (tx) => {
        if ((await taken(tx)) !== undefined) throw new StoreError('conflict', conflict, resource);
        return insert(tx);
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new StoreError('conflict', conflict, resource);
      throw error;
    }
  }

  /** Writes a change's audit event in its transaction: no change without its event, no event without it. */
  async writeChangeAudit(tx: Tx, audit: ChangeAudit): Promise<void> {
    await tx.insertInto('audit_events').values(this.auditRow(audit)).execute();
  }

  private auditRow(audit: ChangeAudit) {
    return {
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
    };
  }

  /**
   * Inserts rows that all have the same columns, in the same order, ROWS_PER_STATEMENT a statement whose SQL is
   * compiled once per table, columns and number of rows (Statements.shape): Kysely builds and compiles a
   * multi-row insert value by value, which for a bulk create cost more than SQLite's own work.
   */
  async insertRows<T extends keyof Database & string>(
    tx: Tx,
    table: T,
    rows: readonly Record<string, unknown>[],
  ): Promise<void> {
    if (rows.length === 0) return;
    const columns = Object.keys(rows[0]!);
    // Compiled from a row of these columns in this order (each a parameter), whatever order the rows' keys are in:
    // the parameters are bound by column name, in the same order.
    const shape = Object.fromEntries(columns.map((column) => [column, null]));
    for (const chunk of chunks(rows, ROWS_PER_STATEMENT)) {
      const parameters: unknown[] = [];
      for (const row of chunk) for (const column of columns) parameters.push(row[column]);
      const text = this.statements.shape(`${table} (${columns.join(', ')}) × ${chunk.length}`, () =>
        compileOnce(
          this.db.insertInto(table).values(Array.from({ length: chunk.length }, () => shape) as never),
          parameters.length,
        ),
      );
      await tx.executeQuery(CompiledQuery.raw(text, parameters));
    }
  }

  /** Many changes of one kind (a bulk create) as record writes them one by one, in multi-row inserts. */
  async recordMany(
    tx: Tx,
    entity: ChangeEntity,
    changes: readonly { key: string; audit?: ChangeAudit }[],
  ): Promise<void> {
    if (changes.length === 0) return;
    if (this.engine === 'postgres') await lockChangeFeed().execute(tx);
    const at = this.stamp();
    await this.insertRows(
      tx,
      'audit_events',
      changes.flatMap((c) => (c.audit ? [this.auditRow(c.audit)] : [])),
    );
    // In the order given: the feed's order.
    await this.insertRows(
      tx,
      'changes',
      changes.map((c) => ({ entity, key: c.key, created_at: at })),
    );
    if (this.engine === 'postgres') await sql`select pg_notify(${CHANGE_CHANNEL}, '')`.execute(tx);
  }

  /**
   * A change for the feed, and its audit event if it has one, in the change's transaction: a server process
   * learns of changes made by the CLI or by other instances from the feed (see directory.ts).
   */
  async record(tx: Tx, entity: ChangeEntity, key: string, audit?: ChangeAudit): Promise<void> {
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

  /**
   * Runs a statement the token path repeats: prepared where the engine keeps one (see RunPrepared), or on the
   * bound transaction's connection.
   */
  async runQuery<R>(name: string, text: string, parameters: unknown[]): Promise<R[]> {
    if (this.tx === undefined && this.runPrepared !== undefined)
      return this.runPrepared<R>(name, text, parameters);
    return (await this.conn.executeQuery<R>(CompiledQuery.raw(text, parameters))).rows;
  }
}
