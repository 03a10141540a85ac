import { describe, expect, it } from 'vitest';
import type { Store } from '../../../src/store/types.js';
import { A, B, C, changesAfter, newClient, store, storeError } from './shared.js';

/** Transactions: the operations of a bound store commit together, or none of them does. */
export function transactionsContract(): void {
  describe('transactions', () => {
    it('commits every operation of the bound store together, with their change records', async () => {
      const before = await store.latestChange();
      const result = await store.transaction(async (tx) => {
        await tx.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
        await tx.createClient(newClient('t1', [A]));
        await tx.updateClient('t1', { quotaPerDay: 9 });
        // Reads on the bound store see its own writes.
        expect((await tx.findClient('t1'))?.quotaPerDay).toBe(9);
        expect(await tx.listClients()).toHaveLength(1);
        // Joining: a transaction inside one is the same transaction, and sees its writes (B).
        await tx.addAudience({ url: B, name: null, tokenTtl: null, signingAlg: null });
        expect(await tx.transaction((inner) => inner.addGrant('t1', B))).toBe(true);
        return 'done';
      });
      expect(result).toBe('done');
      expect(await changesAfter(store, before)).toEqual([
        ['audience', A],
        ['client', 't1'],
        ['client', 't1'],
        ['audience', B],
        ['grant', `t1 ${B}`],
      ]);
      expect(await store.findClient('t1')).toMatchObject({ quotaPerDay: 9, audiences: [A, B] });
    });

    it('writes nothing, not even change records, when an operation fails part-way', async () => {
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
      await store.createClient(newClient('kept', [A]));
      const before = await store.latestChange();
      const error = await storeError(
        store.transaction(async (tx) => {
          await tx.addAudience({ url: B, name: null, tokenTtl: null, signingAlg: null });
          await tx.createClient(newClient('t2', [A, B]));
          await tx.updateClient('kept', { name: 'changed' });
          await tx.deleteClient('kept');
          await tx.createClient(newClient('t3', [C])); // C is not registered: not_found
        }),
      );
      expect(error).toMatchObject({ code: 'not_found', resource: 'audience' });
      expect(await store.latestChange()).toBe(before);
      expect(await store.findAudience(B)).toBeUndefined();
      expect(await store.findClient('t2')).toBeUndefined();
      expect(await store.findClient('kept')).toMatchObject({ name: 'client kept', audiences: [A] });
      expect(await store.countClients()).toBe(1);
    });

    it('rolls back when the callback itself throws, and the store works on afterwards', async () => {
      await expect(
        store.transaction(async (tx) => {
          await tx.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
          throw new Error('changed my mind');
        }),
      ).rejects.toThrow('changed my mind');
      expect(await store.listAudiences()).toEqual([]);
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
      expect(await store.listAudiences()).toHaveLength(1);
    });

    it("a change's audit event commits with it, and rolls back with it", async () => {
      const audit = (target: string) => ({
        type: 'audience.created' as const,
        actor: 'cli:test',
        source: null,
        target,
        audience: target,
        changes: { name: null },
      });
      await expect(
        store.transaction(async (tx) => {
          await tx.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null }, audit(A));
          throw new Error('changed my mind');
        }),
      ).rejects.toThrow('changed my mind');
      expect(await store.queryAuditEvents({ limit: 10 })).toEqual([]);
      await store.transaction(async (tx) => {
        await tx.addAudience({ url: B, name: null, tokenTtl: null, signingAlg: null }, audit(B));
      });
      expect(await store.queryAuditEvents({ limit: 10 })).toEqual([
        expect.objectContaining({
          type: 'audience.created',
          actor: 'cli:test',
          target: B,
          changes: { name: null },
        }),
      ]);
    });

    it('a store bound to a transaction that is over refuses to be used', async () => {
      let kept: Store | undefined;
      await store.transaction(async (tx) => {
        kept = tx;
      });
      await expect(kept!.listAudiences()).rejects.toThrow(
        'this store was bound to a transaction that is over: use the store itself',
      );
    });
  });
}
