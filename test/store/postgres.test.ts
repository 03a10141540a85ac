import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../src/store/postgres.js';
import type { Store } from '../../src/store/types.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { sleep } from '../helpers/wait.js';
import { EVENTS_BEFORE_0004, expectCompactAuditConverted, storeContract } from './contract.js';
import { tokenExchangeContract } from './token-exchange-contract.js';

/** The same contract as SQLite, on the machine's real PostgreSQL: a fresh database per run, dropped after. */
let db: TestDatabase;
const opened: Store[] = [];
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  for (const store of opened) await store.close().catch(() => undefined);
  await db.drop();
});

storeContract('postgres', async (now) => {
  const store = openPostgresStore(await db.freshSchema(), { max: 3, now });
  opened.push(store);
  return store;
});
tokenExchangeContract('postgres', async (now) => {
  const store = openPostgresStore(await db.freshSchema(), { max: 3, now });
  opened.push(store);
  return store;
});

describe('migration 0004 (the compact audit trail)', () => {
  it('converts the events written before it: RFC 3339 text to milliseconds, outcome to type, ids kept', async () => {
    const url = await db.freshSchema();
    const store = openPostgresStore(url, { max: 2 });
    opened.push(store);
    expect(await store.migrate('0003_client_quotas')).toEqual([
      '0001_initial',
      '0002_audit_events',
      '0003_client_quotas',
    ]);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { columns, rows } = EVENTS_BEFORE_0004;
      const insert = `insert into audit_events (${columns.join(', ')}) values (${columns.map((_, i) => `$${i + 1}`).join(', ')})`;
      for (const row of rows) await client.query(insert, [...row]);
      await client.query(`select setval('audit_events_id_seq', 9)`);
    } finally {
      await client.end();
    }
    await expectCompactAuditConverted(store);
  });
});

describe('PostgreSQL change notifications', () => {
  it('a write through one store reaches a subscriber of another within a second', async () => {
    const url = await db.freshSchema();
    const writer = openPostgresStore(url, { max: 2 });
    const reader = openPostgresStore(url, { max: 2 });
    opened.push(writer, reader);
    await writer.migrate();
    let notified = 0;
    const unsubscribe = await reader.subscribe(
      (): void => void notified++,
      () => undefined,
    );
    const afterSubscribe = notified; // one call right after connecting, to catch up
    const started = Date.now();
    await writer.addAudience({
      url: 'https://api.example.com',
      name: null,
      tokenTtl: null,
      signingAlg: null,
    });
    while (notified === afterSubscribe && Date.now() - started < 1000) await sleep(10);
    expect(notified).toBeGreaterThan(afterSubscribe);
    expect(await reader.changesSince(0, 10)).toEqual([
      { seq: 1, entity: 'audience', key: 'https://api.example.com' },
    ]);
    await unsubscribe();
  });

  it('the change feed is in commit order: concurrent writers never leave a later seq visible before an earlier one', async () => {
    const url = await db.freshSchema();
    const store = openPostgresStore(url, { max: 8 });
    opened.push(store);
    await store.migrate();
    // Many concurrent writes, while a follower reads: every read must be a gap-free prefix.
    const writes = Array.from({ length: 40 }, (_, i) =>
      store.addAudience({ url: `https://api${i}.example.com`, name: null, tokenTtl: null, signingAlg: null }),
    );
    const seen: number[][] = [];
    const reading = (async () => {
      for (let i = 0; i < 40; i++) {
        seen.push((await store.changesSince(0, 1000)).map((c) => c.seq));
        await sleep(2);
      }
    })();
    await Promise.all([...writes, reading]);
    for (const seqs of seen) expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect((await store.changesSince(0, 1000)).length).toBe(40);
  });
});

describe("the replay guard's ids on PostgreSQL", () => {
  /** Two stores (two server instances) on one fresh database. */
  async function twoInstances() {
    const url = await db.freshSchema();
    const a = openPostgresStore(url, { max: 3 });
    const b = openPostgresStore(url, { max: 3 });
    opened.push(a, b);
    await a.migrate();
    return { url, a, b };
  }

  it('those of one turn go in one statement; the same id twice in a turn, or from two instances at once, is used once', async () => {
    const { url, a, b } = await twoInstances();
    const expires = Date.now() + 60_000;
    // Every query node-postgres sends, counted by its text.
    const sent: string[] = [];
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const first = args[0] as string | { text?: string };
      sent.push(typeof first === 'string' ? first : (first.text ?? ''));
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
    try {
      // B's in the opposite order (the next test shows why the order matters).
      const ids = Array.from({ length: 30 }, (_, i) => `pg-turn-${i % 10}`);
      const fromA = Promise.all(ids.map((id) => a.useAssertionJti(id, expires)));
      const fromB = Promise.all([...ids].reverse().map((id) => b.useAssertionJti(id, expires))).then(
        (answers) => answers.reverse(),
      );
      const [answersA, answersB] = await Promise.all([fromA, fromB]);
      // Each id is used once, by whichever instance got there first; every other use of it is a replay.
      for (let i = 0; i < 10; i++) {
        const uses = [
          answersA[i],
          answersA[i + 10],
          answersA[i + 20],
          answersB[i],
          answersB[i + 10],
          answersB[i + 20],
        ];
        expect(uses.filter(Boolean)).toEqual([true]);
      }
      // Within a turn, an id's first use in the order it was asked for is the one that may take it: A asked for
      // ids[i] first at i, B (asking in reverse) at i + 20. Which instance's statement commits first is the race
      // of two pools connecting at once, so either may win an id.
      expect([...answersA.slice(10), ...answersB.slice(0, 20)].filter(Boolean)).toEqual([]);
      expect(sent.filter((text) => text.includes('assertion_jtis'))).toHaveLength(2);
    } finally {
      pg.Client.prototype.query = query;
    }
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query(
        "select count(*)::int as n from assertion_jtis where id like 'pg-turn-%'",
      );
      expect(rows).toEqual([{ n: 10 }]);
    } finally {
      await client.end();
    }
  });

  it('two instances taking the same ids in opposite orders at once wait for each other, and never deadlock', async () => {
    const { url, a, b } = await twoInstances();
    const expires = Date.now() + 60_000;
    // A third connection holds `m` (inserted, not committed): A's statement takes `a` and waits at `m`, B's takes
    // `z` and waits at `m`, if each went in the order its ids came. Once `m` is free, one of them takes it and
    // waits for the other's first row, which waits for `m`: a deadlock, and PostgreSQL fails one statement.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query("insert into assertion_jtis (id, expires_at) values ('m', 0)");
      const fromA = Promise.all(['a', 'm', 'z'].map((id) => a.useAssertionJti(id, expires)));
      const fromB = Promise.all(['z', 'm', 'a'].map((id) => b.useAssertionJti(id, expires)));
      await sleep(300);
      await holder.query('rollback');
      const [answersA, answersB] = await Promise.all([fromA, fromB]);
      // Each id taken once, by one of the two.
      const takers = ['a', 'm', 'z'].map((_, i) => [answersA[i], answersB[2 - i]].filter(Boolean).length);
      expect(takers).toEqual([1, 1, 1]);
    } finally {
      await holder.end();
    }
  });
});
