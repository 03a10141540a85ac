import { Kysely, PostgresDialect } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Database } from '../../src/store/schema.js';
import { withRows } from '../../src/store/kysely/audit.js';

// Compiles only: no connection is ever made.
const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: {} as never }) });
const EVENT = {
  at: 0,
  type: '',
  client_id: null,
  audience: null,
  jti: null,
  reason: null,
  source: null,
  count: null,
};
const events = (rows: number) =>
  db.insertInto('audit_events').values(Array.from({ length: rows }, () => EVENT));

/** The shapes the PostgreSQL audit writer compiles: the events, then token counts and a spool position. */
const statements = {
  alone: (rows: number) => events(rows).compile().sql,
  counted: (rows: number, minutes: number) =>
    db
      .with('written', (d) => d.insertInto('audit_events').values(Array.from({ length: rows }, () => EVENT)))
      .insertInto('token_counts')
      .values(Array.from({ length: minutes }, () => ({ minute: 0, issued: 0, refused: 0 })))
      .onConflict((oc) =>
        oc
          .column('minute')
          .doUpdateSet((eb) => ({ issued: eb('token_counts.issued', '+', eb.ref('excluded.issued')) })),
      )
      .compile().sql,
  positioned: (rows: number) =>
    db
      .with('written', (d) => d.insertInto('audit_events').values(Array.from({ length: rows }, () => EVENT)))
      .insertInto('audit_spool_positions')
      .values({ segment: '', position: 0, updated_at: 0 })
      .onConflict((oc) =>
        oc.column('segment').doUpdateSet((eb) => ({ position: eb.ref('excluded.position') })),
      )
      .compile().sql,
};

describe('withRows: an audit insert compiled for one event, for any number', () => {
  for (const rows of [1, 2, 9, 17, 256, 499, 500, 1000])
    it(`gives Kysely's own text for ${rows} events, with and without what follows the events`, () => {
      expect(withRows(statements.alone(1), rows)).toBe(statements.alone(rows));
      for (const minutes of [1, 2, 7])
        expect(withRows(statements.counted(1, minutes), rows)).toBe(statements.counted(rows, minutes));
      expect(withRows(statements.positioned(1), rows)).toBe(statements.positioned(rows));
    });

  it('refuses a text whose first values are not one event’s', () => {
    expect(() =>
      withRows(db.insertInto('token_counts').values({ minute: 0, issued: 0, refused: 0 }).compile().sql, 2),
    ).toThrow("the audit insert's values are not where they were expected");
  });
});
