import { Kysely, PostgresDialect } from 'kysely';
import { describe, expect, it } from 'vitest';
import { compileAudit, withRows } from '../../src/store/kysely/audit.js';
import type { Database } from '../../src/store/schema.js';

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
