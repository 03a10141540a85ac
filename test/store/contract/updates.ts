import { describe, expect, it } from 'vitest';
import { A, B, clock, DIGEST_1, expectChanges, expectNoChange, newClient, store } from './shared.js';

/** Updates: updateAudience and updateClient change the fields given and keep the others. */
export function updatesContract(): void {
  describe('updates', () => {
    it('updateAudience changes the fields given, keeps the others, stamps updated_at, records a change', async () => {
      await store.addAudience({ url: A, name: 'A', tokenTtl: 300, signingAlg: 'ES256' });
      clock.advance(1000);
      const updated = await expectChanges(
        store,
        () => store.updateAudience(A, { name: null, tokenTtl: 600 }),
        [['audience', A]],
      );
      expect(updated).toMatchObject({ url: A, name: null, tokenTtl: 600, signingAlg: 'ES256' });
      expect(updated.updatedAt).toBe(clock.iso());
      expect(updated.createdAt).not.toBe(clock.iso());
      expect(await store.findAudience(A)).toEqual(updated);
      expect((await expectNoChange(store, () => store.updateAudience(B, { name: 'x' }))).code).toBe(
        'not_found',
      );
    });

    it('updateClient changes name, enabled, token lifetime and quotas, never the secret', async () => {
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
      await store.createClient(newClient('u', [A], { enabled: false }));
      expect(await store.findClient('u')).toMatchObject({ enabled: false });
      const updated = await expectChanges(
        store,
        () => store.updateClient('u', { name: 'renamed', enabled: true, tokenTtl: 120, quotaPerMinute: 7 }),
        [['client', 'u']],
      );
      expect(updated).toMatchObject({
        name: 'renamed',
        enabled: true,
        tokenTtl: 120,
        quotaPerMinute: 7,
        quotaPerDay: null,
        secretDigest: DIGEST_1,
        audiences: [A],
      });
      expect(await store.findClient('u')).toEqual(updated);
      expect((await expectNoChange(store, () => store.updateClient('nobody', { name: 'x' }))).code).toBe(
        'not_found',
      );
    });
  });
}
