import { describe, expect, it } from 'vitest';
import { AUDIT_BATCH, type AuditRecord } from '../../../src/store/types.js';
import { store } from './shared.js';

/** Token counts: the token endpoint's requests counted by minute as audit events are appended, and pruned. */
export function tokenCountsContract(): void {
  describe('token counts', () => {
    /** A minute's start; and events of the token endpoint in it. */
    const M = Date.UTC(2030, 0, 2, 3, 4);
    const iso = (ms: number) => new Date(ms).toISOString();
    const ev = (at: number, type: AuditRecord['type'], count: number | null = null): AuditRecord => ({
      at,
      type,
      clientId: 'svc',
      audience: 'https://api.example.com',
      jti: type === 'token.issued' ? `jti-${at}-${Math.random()}` : null,
      reason: type === 'token.issued' ? null : 'invalid_client: wrong secret',
      source: '203.0.113.7',
      count,
    });
    const all = () => store.tokenCounts(0, Date.UTC(2100, 0, 1));

    it('appendAuditEvents adds each minute’s issued and refused requests; a throttled summary counts its `count`', async () => {
      await store.appendAuditEvents([
        ev(M, 'token.issued'),
        ev(M + 1, 'token.issued'),
        ev(M + 59_999, 'token.issued'),
        ev(M + 10, 'token.refused'),
        ev(M + 20, 'token.refused'),
        ev(M + 30, 'token.throttled', 5),
        ev(M + 40, 'token.throttled', 7),
        ev(M + 50, 'token.throttled'), // no count: one request
      ]);
      expect(await all()).toEqual([{ minute: iso(M), issued: 3, refused: 15 }]);
      expect(await store.tokenCounts(M, M + 60_000)).toEqual([{ minute: iso(M), issued: 3, refused: 15 }]);
      expect(await store.tokenCounts(M, M + 1)).toEqual([{ minute: iso(M), issued: 3, refused: 15 }]);
      // From `since` inclusive, to `until` exclusive (minutes' starts).
      expect(await store.tokenCounts(M + 1, M + 60_000)).toEqual([]);
      expect(await store.tokenCounts(M - 60_000, M)).toEqual([]);
      expect(await store.queryAuditEvents({ limit: 100 })).toHaveLength(8);
    });

    it("leaves the admin API's refusals out of the counts, alone in a batch or with a spool position too", async () => {
      await store.appendAuditEvents([ev(M, 'token.issued'), ev(M + 1, 'admin.forbidden', 3)]);
      await store.appendAuditEvents([ev(M + 2, 'admin.auth_failed', 4)]);
      await store.appendAuditEvents([ev(M + 60_000, 'admin.auth_failed', 2)], {
        segment: 'a.00000001.spool',
        offset: 42,
      });
      expect(await all()).toEqual([{ minute: iso(M), issued: 1, refused: 0 }]);
      expect(await store.spoolPosition('a.00000001.spool')).toBe(42);
      expect((await store.queryAuditEvents({ limit: 10 })).map((e) => [e.type, e.count]).reverse()).toEqual([
        ['token.issued', null],
        ['admin.forbidden', 3],
        ['admin.auth_failed', 4],
        ['admin.auth_failed', 2],
      ]);
    });

    it('adds up across calls for the same minute, keeps minutes apart, and lists only minutes that had any, oldest first', async () => {
      await store.appendAuditEvents([ev(M + 5, 'token.issued'), ev(M + 6, 'token.refused')]);
      await store.appendAuditEvents([ev(M + 7, 'token.issued'), ev(M + 8, 'token.throttled', 4)]);
      expect(await all()).toEqual([{ minute: iso(M), issued: 2, refused: 5 }]);
      // One batch over three minutes (one of them earlier), then another over two.
      await store.appendAuditEvents([
        ev(M + 60_000, 'token.issued'),
        ev(M + 59_999, 'token.issued'),
        ev(M - 1, 'token.refused'),
        ev(M + 3 * 60_000 + 1, 'token.throttled', 10),
        ev(M + 60_001, 'token.throttled', 2),
      ]);
      await store.appendAuditEvents([ev(M + 60_002, 'token.issued')], {
        segment: 'a.00000001.spool',
        offset: 10,
      });
      const expected = [
        { minute: iso(M - 60_000), issued: 0, refused: 1 },
        { minute: iso(M), issued: 3, refused: 5 },
        { minute: iso(M + 60_000), issued: 2, refused: 2 },
        { minute: iso(M + 3 * 60_000), issued: 0, refused: 10 },
      ];
      expect(await all()).toEqual(expected);
      expect(await store.tokenCounts(M, M + 3 * 60_000)).toEqual(expected.slice(1, 3));
      expect(await store.tokenCounts(M + 60_000, M + 4 * 60_000)).toEqual(expected.slice(2));
    });

    it('full batches, over one, two and three minutes, with and without a spool position, count exactly', async () => {
      const batch = (start: number, minutes: number) =>
        Array.from({ length: AUDIT_BATCH }, (_, i) =>
          ev(
            start + Math.floor((i * minutes) / AUDIT_BATCH) * 60_000 + (i % 1000),
            i % 5 === 0 ? 'token.refused' : i % 5 === 1 ? 'token.throttled' : 'token.issued',
            i % 5 === 1 ? 3 : null,
          ),
        );
      // What each minute should hold, counted here.
      const expected = new Map<number, { issued: number; refused: number }>();
      const count = (events: AuditRecord[]) => {
        for (const e of events) {
          const minute = e.at - (e.at % 60_000);
          const c = expected.get(minute) ?? { issued: 0, refused: 0 };
          if (e.type === 'token.issued') c.issued += 1;
          else c.refused += e.count ?? 1;
          expected.set(minute, c);
        }
      };
      const runs: [number, number, boolean][] = [
        [M, 1, false],
        [M, 1, true],
        [M + 60_000, 2, false],
        [M + 60_000, 2, true],
        [M + 5 * 60_000, 3, false],
        [M + 5 * 60_000, 3, true],
        [M, 1, false],
      ];
      for (const [n, [start, minutes, withPosition]] of runs.entries()) {
        const events = batch(start, minutes);
        if (withPosition) await store.appendAuditEvents(events, { segment: `seg-${n}`, offset: n * 1000 });
        else await store.appendAuditEvents(events);
        count(events);
      }
      expect(await all()).toEqual(
        [...expected.entries()]
          .sort(([a], [b]) => a - b)
          .map(([minute, c]) => ({ minute: iso(minute), ...c })),
      );
      expect((await all()).map((c) => c.minute)).toEqual([0, 1, 2, 5, 6, 7].map((m) => iso(M + m * 60_000)));
      expect(await all()).toContainEqual({ minute: iso(M), issued: 3 * 300, refused: 3 * (100 + 100 * 3) });
      expect(await store.spoolPosition('seg-5')).toBe(5000);
    });

    it('a batch that fails counts nothing and moves no spool position; the counts are in the events’ transaction', async () => {
      await store.appendAuditEvents([ev(M, 'token.issued')], { segment: 'a.00000001.spool', offset: 100 });
      const bad = { ...ev(M + 2, 'token.refused'), type: null } as unknown as AuditRecord;
      await expect(
        store.appendAuditEvents([ev(M + 1, 'token.issued'), bad, ev(M + 60_000, 'token.throttled', 9)], {
          segment: 'a.00000001.spool',
          offset: 300,
        }),
      ).rejects.toThrow();
      await expect(store.appendAuditEvents([ev(M + 1, 'token.issued'), bad])).rejects.toThrow();
      expect(await all()).toEqual([{ minute: iso(M), issued: 1, refused: 0 }]);
      expect(await store.spoolPosition('a.00000001.spool')).toBe(100);
      expect(await store.queryAuditEvents({ limit: 100 })).toHaveLength(1);
      // Inside a transaction that rolls back: neither the events nor their counts.
      await expect(
        store.transaction(async (tx) => {
          await tx.appendAuditEvents([ev(M + 3, 'token.issued')], {
            segment: 'a.00000001.spool',
            offset: 200,
          });
          throw new Error('changed my mind');
        }),
      ).rejects.toThrow('changed my mind');
      expect(await all()).toEqual([{ minute: iso(M), issued: 1, refused: 0 }]);
      expect(await store.spoolPosition('a.00000001.spool')).toBe(100);
      expect(await store.queryAuditEvents({ limit: 100 })).toHaveLength(1);
    });

    it('pruneTokenCounts deletes the minutes strictly before the cut-off; returns how many', async () => {
      await store.appendAuditEvents(
        [0, 1, 2, 3].map((m) => ev(M + m * 60_000 + 30_000, m % 2 === 0 ? 'token.issued' : 'token.refused')),
      );
      expect(await store.pruneTokenCounts(new Date(M + 60_000))).toBe(1);
      expect((await all()).map((c) => c.minute)).toEqual([1, 2, 3].map((m) => iso(M + m * 60_000)));
      expect(await store.pruneTokenCounts(new Date(M + 60_000))).toBe(0);
      expect(await store.pruneTokenCounts(new Date(M + 2 * 60_000 + 1))).toBe(2);
      expect(await all()).toEqual([{ minute: iso(M + 3 * 60_000), issued: 0, refused: 1 }]);
      // The events themselves stay: they are pruned on their own.
      expect(await store.queryAuditEvents({ limit: 100 })).toHaveLength(4);
      // A minute pruned and counted again starts from nothing.
      await store.appendAuditEvents([ev(M + 5, 'token.issued')]);
      expect(await store.tokenCounts(M, M + 1)).toEqual([{ minute: iso(M), issued: 1, refused: 0 }]);
    });
  });
}
