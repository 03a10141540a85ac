import { describe, expect, it } from 'vitest';
import type { Change } from '../../../src/store/types.js';
import { A, B, C, clock, DIGEST_2, newClient, signingKey, store } from './shared.js';

/** The change feed: one change per write, paged after a seq, pruned, and no seq ever used twice. */
export function changeFeedContract(): void {
  describe('change feed', () => {
    it('records exactly one change per write, with the entity and key of what changed, in order', async () => {
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
      await store.addAudience({ url: B, name: null, tokenTtl: null, signingAlg: null });
      await store.createClient(newClient('svc', [A]));
      await store.addGrant('svc', B);
      await store.addGrant('svc', B); // already there: not a write
      await store.changeSecrets('svc', {
        add: { id: 'sec_2', digest: DIGEST_2, createdAt: clock.iso(), expiresAt: null },
      });
      await store.updateClient('svc', { enabled: false });
      await store.removeGrant('svc', A);
      await store.changeSigningKeys(() => ({ insert: signingKey('k1') }));
      await store.removeAudience(B);
      await store.deleteClient('svc');

      const changes = await store.changesSince(0, 100);
      expect(changes.map((c) => [c.entity, c.key])).toEqual([
        ['audience', A],
        ['audience', B],
        ['client', 'svc'],
        ['grant', `svc ${B}`],
        ['client', 'svc'],
        ['client', 'svc'],
        ['grant', `svc ${A}`],
        ['key', '*'],
        ['audience', B],
        ['client', 'svc'],
      ]);
      const seqs = changes.map((c) => c.seq);
      for (const seq of seqs) expect(Number.isSafeInteger(seq) && seq > 0).toBe(true);
      for (let i = 1; i < seqs.length; i++) expect(seqs[i]!).toBeGreaterThan(seqs[i - 1]!);
      expect(await store.latestChange()).toBe(seqs[seqs.length - 1]);
    });

    it('returns plain numbers and only the documented fields', async () => {
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
      const [change] = await store.changesSince(0, 10);
      expect(change).toEqual({ seq: expect.any(Number), entity: 'audience', key: A } satisfies Change);
      expect(Object.keys(change!).sort()).toEqual(['entity', 'key', 'seq']);
    });

    it('pages with changesSince(seq, limit), oldest first', async () => {
      const urls = Array.from({ length: 5 }, (_, i) => `https://api${i}.example.com`);
      for (const url of urls) await store.addAudience({ url, name: null, tokenTtl: null, signingAlg: null });
      const all = await store.changesSince(0, 100);
      expect(all.map((c) => c.key)).toEqual(urls);

      const first = await store.changesSince(0, 2);
      expect(first).toEqual(all.slice(0, 2));
      const second = await store.changesSince(first[1]!.seq, 2);
      expect(second).toEqual(all.slice(2, 4));
      const third = await store.changesSince(second[1]!.seq, 2);
      expect(third).toEqual(all.slice(4));
      expect(await store.changesSince(third[0]!.seq, 2)).toEqual([]);
      expect(await store.changesSince(all[2]!.seq, 100)).toEqual(all.slice(3));
      expect(await store.latestChange()).toBe(all[4]!.seq);
    });

    it('prunes changes older than the given time, by the store clock, and keeps the rest', async () => {
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
      clock.advance(60_000);
      await store.addAudience({ url: B, name: null, tokenTtl: null, signingAlg: null });
      const cutoff = clock.date();
      clock.advance(60_000);
      await store.addAudience({ url: C, name: null, tokenTtl: null, signingAlg: null });
      const all = await store.changesSince(0, 100);

      // Strictly older: the change stamped at exactly `cutoff` stays.
      expect(await store.pruneChanges(cutoff)).toBe(1);
      expect(await store.changesSince(0, 100)).toEqual(all.slice(1));
      expect(await store.pruneChanges(cutoff)).toBe(0);
      expect(await store.pruneChanges(new Date(cutoff.getTime() + 1))).toBe(1);
      expect(await store.changesSince(0, 100)).toEqual(all.slice(2));
      expect(await store.latestChange()).toBe(all[2]!.seq);
      // Pruning records no change of its own, and never touches the data.
      expect((await store.listAudiences()).map((a) => a.url)).toEqual([A, B, C]);
    });

    it('never reuses a sequence number, even after every change was pruned', async () => {
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
      await store.addAudience({ url: B, name: null, tokenTtl: null, signingAlg: null });
      const last = await store.latestChange();
      clock.advance(1000);
      expect(await store.pruneChanges(clock.date())).toBe(2);
      expect(await store.changesSince(0, 100)).toEqual([]);
      await store.addAudience({ url: C, name: null, tokenTtl: null, signingAlg: null });
      const [next] = await store.changesSince(0, 100);
      expect(next?.key).toBe(C);
      expect(next!.seq).toBeGreaterThan(last);
    });
  });
}
