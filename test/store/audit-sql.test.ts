import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import { Kysely, PostgresDialect, SqliteDialect, type SqliteDatabase } from 'kysely';
import { describe, expect, it } from 'vitest';
import { compileAudit, withRows } from '../../src/store/kysely/audit.js';
import { openKyselyStore } from '../../src/store/kysely/store.js';
import type { Database } from '../../src/store/schema.js';
import type { AuditRecord } from '../../src/store/types.js';

// Compiles only: no connection is ever made.
const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: {} as never }) });

describe('withRows: the PostgreSQL audit insert compiled for one event, for any number', () => {
  for (const rows of [1, 2, 9, 17, 256, 499, 500, 1000])
    it(`gives Kysely's own text for ${rows} events, alone, with token counts, with a spool position`, () => {
      for (const [minutes, withPosition] of [
        [0, false],
        [0, true],
        [1, false],
        [2, true],
        [7, false],
        [7, true],
      ] as const)
        expect(withRows(compileAudit(db, 1, minutes, withPosition), rows), `${minutes} ${withPosition}`).toBe(
          compileAudit(db, rows, minutes, withPosition),
        );
    });

  it('refuses a text whose first values are not one event’s', () => {
    expect(() =>
      withRows(db.insertInto('token_counts').values({ minute: 0, issued: 0, refused: 0 }).compile().sql, 2),
    ).toThrow("the audit insert's values are not where they were expected");
  });
});

describe('prepareAuditWrites: every statement of an audit batch made before the first batch', () => {
  /** Kysely over node:sqlite, logging each statement it runs (the store's own adapter does not log). */
  function logged(ran: string[]) {
    const file = new DatabaseSync(':memory:');
    const database: SqliteDatabase = {
      close: () => file.close(),
      prepare(text) {
        const statement = file.prepare(text);
        return {
          reader: statement.columns().length > 0,
          all: (parameters) => statement.all(...(parameters as SQLInputValue[])),
          iterate: (parameters) => statement.iterate(...(parameters as SQLInputValue[])),
          run: (parameters) => statement.run(...(parameters as SQLInputValue[])),
        };
      },
    };
    return new Kysely<Database>({
      dialect: new SqliteDialect({ database }),
      log: (event) => void ran.push(event.query.sql),
    });
  }

  it('SQLite: the pieces of any batch, its counts and its spool position are the statements prepared at start', async () => {
    const ran: string[] = [];
    const prepared: string[] = [];
    const store = openKyselyStore(logged(ran), 'sqlite', { prepare: (text) => prepared.push(text) });
    await store.migrate();
    store.prepareAuditWrites();
    // 1 to 256 rows (nine pieces), the counts of one and two minutes, the position.
    expect(prepared).toHaveLength(12);
    ran.length = 0;
    const event = (at: number, i: number): AuditRecord => ({
      at,
      type: 'token.issued',
      clientId: `c${i}`,
      audience: 'https://api.example.com',
      jti: `j${at}-${i}`,
      reason: null,
      source: '127.0.0.1',
      count: null,
    });
    // Batches of every size from 1 to 511 rows, over one minute or two, with and without a spool position.
    for (let size = 1; size < 512; size += 37) {
      const minute = 60_000 * size;
      const events = Array.from({ length: size }, (_, i) => event(minute + (i % 2) * 60_000, i));
      await store.appendAuditEvents(events, size % 2 === 0 ? { segment: 's', offset: size } : undefined);
    }
    const writes = ran.filter((text) => !['begin', 'commit', 'rollback'].includes(text.toLowerCase()));
    expect(writes.length).toBeGreaterThan(40);
    expect(writes.filter((text) => !prepared.includes(text))).toEqual([]);
    await store.close();
  });
});
