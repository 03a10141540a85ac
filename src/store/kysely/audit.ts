import { CompiledQuery, type Kysely } from 'kysely';
import type { Database } from '../schema.js';
import {
  AUDIT_BATCH,
  type AuditBatchPart,
  type AuditRecord,
  type AuditStore,
  type SpoolPosition,
} from '../types.js';
import { compileOnce, type StoreBase } from './base.js';
import { toAuditEvent } from './rows.js';

/**
 * A batch of token events as the console's chart counts them: per minute (its start, ms), issued (token.issued,
 * token.exchanged) and refused requests (a token.throttled summary stands for `count` refusals).
 */
function countsByMinute(events: readonly AuditRecord[]): Map<number, [number, number]> {
  const byMinute = new Map<number, [number, number]>();
  for (const e of events) {
    // The chart counts the token endpoint's answers only, not the admin API's refusals.
    if (!e.type.startsWith('token.')) continue;
    const minute = e.at - (e.at % 60_000);
    let counts = byMinute.get(minute);
    if (counts === undefined) byMinute.set(minute, (counts = [0, 0]));
    if (e.type === 'token.issued' || e.type === 'token.exchanged') counts[0] += 1;
    else counts[1] += e.count ?? 1;
  }
  return byMinute;
}

/** An insert of `rows` audit events (EVENT_ROW's columns). */
function insertEvents(db: Kysely<Database>, rows: number) {
  return db.insertInto('audit_events').values(Array.from({ length: rows }, () => EVENT_ROW));
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

/** Sets a spool segment's position (segment, position, updated_at). */
function setPosition(db: Kysely<Database>) {
  return db
    .insertInto('audit_spool_positions')
    .values({ segment: '', position: 0, updated_at: 0 })
    .onConflict((oc) =>
      oc.column('segment').doUpdateSet((eb) => ({
        position: eb.ref('excluded.position'),
        updated_at: eb.ref('excluded.updated_at'),
      })),
    );
}

/** An audit event's columns, in the order appendAuditEvents binds its parameters. */
const EVENT_ROW = {
  at: 0,
  type: '',
  client_id: null,
  audience: null,
  jti: null,
  reason: null,
  source: null,
  count: null,
};
const PER_EVENT = Object.keys(EVENT_ROW).length;
/** SQLite: the most audit events one statement inserts (a power of two; see appendAuditEvents). */
const SQLITE_PIECE = 256;

/** The values of one audit event in a statement compiled for PostgreSQL (numbered parameters). */
const ONE_EVENT = `(${Array.from({ length: PER_EVENT }, (_, i) => `$${i + 1}`).join(', ')})`;

/**
 * `template`, a statement compiled for one audit event whose values come first ($1 to $8), for `rows` events:
 * the values repeated with their numbers, every later parameter's number moved past them. The same text as
 * Kysely's for `rows` events (a test holds them equal), in tens of microseconds where Kysely takes 2 ms and more.
 */
export function withRows(template: string, rows: number): string {
  const at = template.indexOf(ONE_EVENT);
  if (at < 0) throw new Error("the audit insert's values are not where they were expected");
  let values = '';
  for (let n = 1; n <= rows * PER_EVENT; n++)
    values += n % PER_EVENT === 1 ? `${n === 1 ? '' : '), '}($${n}` : `, $${n}`;
  values += ')';
  const shift = (rows - 1) * PER_EVENT;
  const rest = template
    .slice(at + ONE_EVENT.length)
    .replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + shift}`);
  return template.slice(0, at) + values + rest;
}

/**
 * Kysely's compilation of the PostgreSQL audit insert: `rows` events, adding to `minutes` minutes' token counts
 * and, `withPosition`, upserting the spool position, in one statement (a data-modifying CTE).
 */
export function compileAudit(
  db: Kysely<Database>,
  rows: number,
  minutes: number,
  withPosition: boolean,
): string {
  const insert = (into: Kysely<Database>) => insertEvents(into, rows);
  const parameters = rows * PER_EVENT + minutes * 3;
  // No minutes: a batch of the admin API's refusals only, which the token counts leave out.
  if (minutes === 0 && !withPosition) return compileOnce(insert(db), parameters);
  const written = db.with('written', (into) => insert(into as Kysely<Database>));
  const counted =
    minutes === 0 ? written : written.with('counted', (into) => addCounts(into as Kysely<Database>, minutes));
  return withPosition
    ? compileOnce(setPosition(counted as unknown as Kysely<Database>), parameters + 3)
    : compileOnce(addCounts(written as unknown as Kysely<Database>, minutes), parameters);
}

/** SQLite: the audit batch's statements (see appendAuditEvents), each compiled once and kept. */
function sqliteStatements(base: StoreBase) {
  return {
    events: (rows: number) =>
      base.statements.get(`audit events × ${rows}`, () =>
        compileOnce(insertEvents(base.db, rows), rows * PER_EVENT),
      ),
    counts: (minutes: number) =>
      base.statements.shape(`counts ${minutes}`, () => compileOnce(addCounts(base.db, minutes), minutes * 3)),
    position: () => base.statements.get('spool position', () => compileOnce(setPosition(base.db), 3)),
  };
}

/**
 * A batch's values as its statements bind them: every event's columns, the (minute, issued, refused) of each minute
 * it adds to the token counts, and the spool position's (segment, offset, updated_at).
 */
function batchValues(events: readonly AuditRecord[], position: SpoolPosition | undefined, now: Date) {
  const parameters: unknown[] = [];
  for (const e of events)
    parameters.push(e.at, e.type, e.clientId, e.audience, e.jti, e.reason, e.source, e.count);
  const counts: unknown[] = [];
  for (const [minute, [issued, refused]] of countsByMinute(events)) counts.push(minute, issued, refused);
  const at = position === undefined ? [] : [position.segment, position.offset, now.getTime()];
  return { parameters, counts, minutes: counts.length / 3, at };
}

/** A call of appendAuditEvents on its own: committed at once. */
const WHOLE: AuditBatchPart = { first: true, last: true };

/** One statement of an audit batch on SQLite, with its parameters. */
interface AuditWrite {
  sql: string;
  parameters: unknown[];
}

/**
 * What the engine gives the audit trail's writes (see KyselyStoreOptions): `prepare`, a statement prepared ahead
 * of its first use (SQLite's adapter keeps it by its text); `writeAudit`, the statements of a batch (made by
 * `build`, which may throw) run in a transaction elsewhere (SQLite, the server: on the store's maintenance
 * thread, off the thread that answers requests), which may hold them open for the next part of the batch (see
 * AuditStore.appendAuditEvents); resolves true once they are committed.
 */
export interface AuditHooks {
  prepare?: (text: string) => void;
  writeAudit?: (build: () => AuditWrite[], part: AuditBatchPart) => Promise<boolean>;
}

export function auditStore(base: StoreBase, hooks: AuditHooks = {}): AuditStore {
  const { prepare, writeAudit } = hooks;
  const sqlite = sqliteStatements(base);
  /**
   * PostgreSQL: the text of an insert of `rows` audit events that adds to `minutes` minutes' token counts and,
   * `withPosition`, upserts the spool position too (one statement: a data-modifying CTE). Kysely compiles it for
   * one event, kept per minutes and position; the rows are added to that text (withRows). Kysely took 2–6 ms to
   * build a few hundred rows, on the thread that answers requests, for every batch of a size not seen before
   * (the last one of every flush); the text of a size is kept a few at a time, as before.
   */
  const auditSql = (rows: number, minutes: number, withPosition: boolean): string =>
    base.statements.shape(`${rows} ${minutes} ${withPosition}`, () => {
      const one = () => compileAudit(base.db, 1, minutes, withPosition);
      // Batches of one or two minutes are nearly all of them; a longer one (a backlog) compiles its own.
      const template =
        minutes <= 2 ? base.statements.get(`audit events ${minutes} ${withPosition}`, one) : one();
      return withRows(template, rows);
    });

  return {
    prepareAuditWrites() {
      if (base.engine === 'postgres') {
        // The templates Kysely compiles (the rows are added to their text): one or two minutes, with and without a
        // position, and the admin API's refusals alone (no minutes).
        for (const minutes of [0, 1, 2])
          for (const withPosition of [false, true]) auditSql(AUDIT_BATCH, minutes, withPosition);
        return;
      }
      // Every piece a batch is written in (see appendAuditEvents), the counts of one or two minutes, the position:
      // compiled here, and prepared on this connection unless the batches are written on another thread, which
      // prepares them there.
      const texts = [sqlite.counts(1), sqlite.counts(2), sqlite.position()];
      for (let rows = SQLITE_PIECE; rows >= 1; rows >>= 1) texts.push(sqlite.events(rows));
      if (writeAudit === undefined) for (const text of texts) prepare?.(text);
    },

    async appendAuditEvents(events, position, part = WHOLE) {
      // Nothing to write, unless a transaction held open by the calls before waits for this one to end it.
      if (events.length === 0 && (part.first || writeAudit === undefined || base.tx !== undefined))
        return true;
      if (base.engine === 'postgres') {
        // One statement: the rows, the minutes' counts and the segment's new position commit together (a
        // data-modifying CTE). Only full batches of one or two minutes (the recorder's usual statement under
        // load) are prepared, so that connections do not keep a plan for every shape.
        const { parameters, counts, minutes, at } = batchValues(events, position, base.now());
        const text = auditSql(events.length, minutes, position !== undefined);
        const values = [...parameters, ...counts, ...at];
        if (events.length === AUDIT_BATCH && minutes <= 2)
          await base.runQuery(
            `tessera_audit_${position === undefined ? 'insert' : 'insert_at'}_${minutes}`,
            text,
            values,
          );
        else await base.conn.executeQuery(CompiledQuery.raw(text, values));
        return true;
      }
      // SQLite has no data-modifying CTE: the statements in one transaction. The rows go in pieces of a power of
      // two, so that a batch of any size runs statements of a few shapes compiled and prepared once: a new shape
      // for every partial batch took ~10 ms of the thread that answers requests (Kysely building a few hundred
      // rows, SQLite preparing them).
      const build = (): AuditWrite[] => {
        const { parameters, counts, minutes, at } = batchValues(events, position, base.now());
        const writes: AuditWrite[] = [];
        for (let from = 0; from < events.length;) {
          let rows = SQLITE_PIECE;
          while (rows > events.length - from) rows >>= 1;
          writes.push({
            sql: sqlite.events(rows),
            parameters: parameters.slice(from * PER_EVENT, (from + rows) * PER_EVENT),
          });
          from += rows;
        }
        if (minutes > 0) writes.push({ sql: sqlite.counts(minutes), parameters: counts });
        if (position !== undefined) writes.push({ sql: sqlite.position(), parameters: at });
        return writes;
      };
      // The server's: on the maintenance thread, which waits there for the lock and runs SQLite's inserts (~3 µs
      // a token of this thread's time before), and commits the parts of a batch together; a store bound to a
      // transaction writes in it.
      if (writeAudit !== undefined && base.tx === undefined) return writeAudit(build, part);
      const writes = build();
      await base.write(async (tx) => {
        for (const { sql, parameters: values } of writes)
          await tx.executeQuery(CompiledQuery.raw(sql, values));
      });
      return true;
    },

    async spoolPosition(segment) {
      const row = await base.conn
        .selectFrom('audit_spool_positions')
        .select('position')
        .where('segment', '=', segment)
        .executeTakeFirst();
      return row === undefined ? 0 : Number(row.position);
    },

    async forgetSpoolSegments(segments) {
      if (segments.length === 0) return;
      await base.conn.deleteFrom('audit_spool_positions').where('segment', 'in', segments).execute();
    },

    async queryAuditEvents(filter) {
      let query = base.conn.selectFrom('audit_events').selectAll();
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
      return rows.map(toAuditEvent);
    },

    /**
     * One small batch, oldest first: the recorder calls it again (yielding in between) until it deletes fewer
     * than it asked for, so that neither engine holds a long lock and a SQLite server never stalls.
     */
    async pruneAuditEvents(olderThan, limit) {
      const result = await base.conn
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
    },

    async tokenCounts(since, until) {
      const rows = await base.conn
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
    },

    async pruneTokenCounts(olderThan) {
      const result = await base.conn
        .deleteFrom('token_counts')
        .where('minute', '<', olderThan.getTime())
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}
