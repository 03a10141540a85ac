import { describe, expect, it } from 'vitest';
import {
  AUDIT_BATCH,
  type AuditCursor,
  type AuditEvent,
  type AuditFilter,
  type AuditRecord,
} from '../../../src/store/types.js';
import { store } from './shared.js';

/** Audit events: appending them in batches with their spool positions, querying, paging and pruning them. */
export function auditEventsContract(): void {
  describe('audit events', () => {
    const T0 = Date.UTC(2026, 0, 1);
    const TYPES = ['token.issued', 'token.refused', 'token.throttled'] as const;
    const record = (i: number, overrides: Partial<AuditRecord> = {}): AuditRecord => ({
      at: T0 + i,
      type: TYPES[i % 3]!,
      clientId: `client-${i % 4}`,
      audience: i % 5 === 0 ? null : 'https://api.example.com',
      jti: i % 3 === 0 ? `jti-${i}` : null,
      reason: i % 3 === 0 ? null : 'invalid_client: wrong secret',
      source: i % 7 === 0 ? null : '203.0.113.7',
      count: i % 3 === 2 ? i * 10 : null,
      ...overrides,
    });
    /** A record as it reads back, without its id. */
    const read = ({ at, ...rest }: AuditRecord) => ({
      ...rest,
      at: new Date(at).toISOString(),
      // A token event has none of a change event's fields.
      actor: null,
      target: null,
      changes: null,
    });
    const withoutIds = (events: AuditEvent[]) => events.map(({ id: _id, ...rest }) => rest);
    const all = { limit: 10_000 };

    it('keeps every field of every event, null or not, newest first, in batches of any size', async () => {
      // Batch sizes repeat, so a reused insert (same row count) is exercised as well as a new one; a full
      // batch (AUDIT_BATCH) is the prepared statement on PostgreSQL.
      const sizes = [1, 3, 3, AUDIT_BATCH, 1, AUDIT_BATCH, 1000, 17];
      const written: AuditRecord[] = [];
      let i = 0;
      for (const [n, size] of sizes.entries()) {
        const batch = Array.from({ length: size }, () => record(i++));
        // Every other batch with a spool position: the same rows either way.
        if (n % 2 === 0) await store.appendAuditEvents(batch);
        else await store.appendAuditEvents(batch, { segment: `seg-${n}`, offset: i * 100 });
        written.push(...batch);
      }
      const events = await store.queryAuditEvents(all);
      expect(withoutIds(events)).toEqual(written.reverse().map(read));
      // Ids are unique and, for events of distinct times, follow them.
      const ids = events.map((e) => e.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect([...ids].sort((a, b) => b - a)).toEqual(ids);
    });

    it('appends nothing for an empty batch', async () => {
      await store.appendAuditEvents([]);
      expect(await store.queryAuditEvents(all)).toEqual([]);
    });

    it('filters by client, audience, type and time, and honours the limit', async () => {
      const records = Array.from({ length: 30 }, (_, i) => record(i));
      await store.appendAuditEvents(records);
      const newestFirst = [...records].reverse().map(read);
      const query = async (filter: Omit<AuditFilter, 'limit'>) =>
        withoutIds(await store.queryAuditEvents({ ...all, ...filter }));
      expect(await query({ clientId: 'client-1' })).toEqual(
        newestFirst.filter((e) => e.clientId === 'client-1'),
      );
      expect(await query({ audience: 'https://api.example.com' })).toEqual(
        newestFirst.filter((e) => e.audience === 'https://api.example.com'),
      );
      expect(await query({ types: ['token.refused'] })).toEqual(
        newestFirst.filter((e) => e.type === 'token.refused'),
      );
      expect(await query({ types: ['token.refused', 'token.throttled'] })).toEqual(
        newestFirst.filter((e) => e.type !== 'token.issued'),
      );
      expect(await query({ since: read(records[10]!).at, until: read(records[20]!).at })).toEqual(
        newestFirst.filter((_, i) => 29 - i >= 10 && 29 - i < 20),
      );
      expect(withoutIds(await store.queryAuditEvents({ limit: 4 }))).toEqual(newestFirst.slice(0, 4));
    });

    it('pages with a cursor: every event once, newest first, events of the same millisecond included', async () => {
      // Three events per millisecond: the cursor must tell them apart by id.
      const records = Array.from({ length: 50 }, (_, i) => record(i, { at: T0 + Math.floor(i / 3) }));
      await store.appendAuditEvents(records);
      const everything = await store.queryAuditEvents(all);
      const paged: AuditEvent[] = [];
      let after: AuditCursor | undefined;
      for (;;) {
        const page = await store.queryAuditEvents({ limit: 4, after });
        if (page.length === 0) break;
        paged.push(...page);
        after = { at: page.at(-1)!.at, id: page.at(-1)!.id };
      }
      expect(paged).toEqual(everything);
      expect(paged).toHaveLength(50);
      // With a filter too.
      const refused = await store.queryAuditEvents({ limit: 2, types: ['token.refused'], after });
      expect(refused).toEqual([]);
    });

    it('records a spool position in the transaction of its events, and forgets it', async () => {
      expect(await store.spoolPosition('a.00000001.spool')).toBe(0);
      await store.appendAuditEvents([record(1)], { segment: 'a.00000001.spool', offset: 120 });
      await store.appendAuditEvents([record(2), record(3)], { segment: 'a.00000001.spool', offset: 360 });
      await store.appendAuditEvents([record(4)], { segment: 'b.00000001.spool', offset: 99 });
      expect(await store.spoolPosition('a.00000001.spool')).toBe(360);
      expect(await store.spoolPosition('b.00000001.spool')).toBe(99);
      // A write that fails writes neither its events nor its position (a type that cannot be null).
      const bad = { ...record(5), type: null } as unknown as AuditRecord;
      await expect(
        store.appendAuditEvents([record(6), bad], { segment: 'a.00000001.spool', offset: 480 }),
      ).rejects.toThrow();
      expect(await store.spoolPosition('a.00000001.spool')).toBe(360);
      // Nor does a long batch whose bad event comes late (SQLite writes a batch in several statements).
      const long = Array.from({ length: 300 }, (_, i) => record(100 + i));
      long[290] = bad;
      await expect(
        store.appendAuditEvents(long, { segment: 'a.00000001.spool', offset: 9000 }),
      ).rejects.toThrow();
      expect(await store.spoolPosition('a.00000001.spool')).toBe(360);
      expect(withoutIds(await store.queryAuditEvents(all))).toEqual([4, 3, 2, 1].map((i) => read(record(i))));
      await store.forgetSpoolSegments(['a.00000001.spool', 'c.00000001.spool']);
      await store.forgetSpoolSegments([]);
      expect(await store.spoolPosition('a.00000001.spool')).toBe(0);
      expect(await store.spoolPosition('b.00000001.spool')).toBe(99);
    });

    it('writes a batch in parts: what resolves true is committed with its position, a held part only with the last, and a part that fails commits nothing held', async () => {
      const at = (offset: number) => ({ segment: 'p.00000001.spool', offset });
      const events = async () => withoutIds(await store.queryAuditEvents(all));
      const of = (...ids: number[]) => ids.map((i) => read(record(i)));
      // An engine may hold every part but the last (false) or commit each (true); the last is committed.
      const first = await store.appendAuditEvents([record(1)], at(100), { first: true, last: false });
      const held = !first;
      expect(await events()).toEqual(held ? [] : of(1));
      expect(
        await store.appendAuditEvents([record(2), record(3)], at(200), { first: false, last: false }),
      ).toBe(first);
      expect(await events()).toEqual(held ? [] : of(3, 2, 1));
      expect(await store.appendAuditEvents([record(4)], at(300), { first: false, last: true })).toBe(true);
      expect(await events()).toEqual(of(4, 3, 2, 1));
      expect(await store.spoolPosition('p.00000001.spool')).toBe(300);
      // A last part with nothing to write ends the batch all the same.
      expect(await store.appendAuditEvents([record(5)], at(400), { first: true, last: false })).toBe(first);
      expect(await store.appendAuditEvents([], undefined, { first: false, last: true })).toBe(true);
      expect(await events()).toEqual(of(5, 4, 3, 2, 1));
      // A batch whose second part fails: a held first part is rolled back with it, a committed one stays.
      const bad = { ...record(7), type: null } as unknown as AuditRecord;
      expect(await store.appendAuditEvents([record(6)], at(600), { first: true, last: false })).toBe(first);
      await expect(
        store.appendAuditEvents([record(8), bad], at(700), { first: false, last: true }),
      ).rejects.toThrow();
      expect(await store.spoolPosition('p.00000001.spool')).toBe(held ? 400 : 600);
      expect(await events()).toEqual(held ? of(5, 4, 3, 2, 1) : of(6, 5, 4, 3, 2, 1));
      // What continues a batch the engine no longer holds is refused, and writes nothing.
      if (held)
        await expect(
          store.appendAuditEvents([record(9)], at(900), { first: false, last: true }),
        ).rejects.toThrow("the audit batch's transaction was rolled back");
      // The next batch is written as usual.
      expect(await store.appendAuditEvents([record(10)], at(1000), { first: true, last: true })).toBe(true);
      expect((await events())[0]).toEqual(read(record(10)));
      expect(await store.spoolPosition('p.00000001.spool')).toBe(1000);
    });

    it('prunes events strictly older than the cut-off, oldest first, at most `limit` at a time', async () => {
      const records = Array.from({ length: 12 }, (_, i) => record(i));
      // Written out of time order (as a spool replayed after an outage would): pruning goes by time.
      await store.appendAuditEvents([...records.slice(6), ...records.slice(0, 6)]);
      const cut = new Date(records[5]!.at);
      expect(await store.pruneAuditEvents(cut, 2)).toBe(2);
      expect(withoutIds(await store.queryAuditEvents(all))).toEqual(records.slice(2).reverse().map(read));
      expect(await store.pruneAuditEvents(cut, 100)).toBe(3);
      expect(withoutIds(await store.queryAuditEvents(all))).toEqual(records.slice(5).reverse().map(read));
      expect(await store.pruneAuditEvents(cut, 100)).toBe(0);
    });
  });
}
