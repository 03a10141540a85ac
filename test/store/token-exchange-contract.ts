import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stillClock, type TestClock } from '../helpers/clock.js';
import type { ChangeAudit, NewClient, Store } from '../../src/store/types.js';
import { migrationsAfter, type OpenStore } from './contract.js';

const A = 'https://api.a.example.com';
const B = 'https://api.b.example.com';
const DIGEST = 'sha256:' + Buffer.alloc(32, 1).toString('base64url');

const newClient = (id: string, audiences: string[] = [], extra: Partial<NewClient> = {}): NewClient => ({
  id,
  name: `client ${id}`,
  secretDigest: DIGEST,
  tokenTtl: null,
  audiences,
  ...extra,
});

/** The changes a write appended, as [entity, key] pairs. */
async function changesOf(store: Store, write: () => Promise<unknown>): Promise<[string, string][]> {
  const before = await store.latestChange();
  await write();
  return (await store.changesSince(before, 1000)).map((c) => [c.entity, c.key]);
}

/**
 * Token exchange's part of the store (migration 0015): a grant's token_exchange and an audience's resource servers,
 * on every engine (SQLite and PostgreSQL run it alike).
 */
export function tokenExchangeContract(name: string, open: OpenStore): void {
  describe(`Store contract, token exchange: ${name}`, () => {
    let clock: TestClock;
    let store: Store;

    beforeEach(async () => {
      clock = stillClock();
      store = await open(clock.date);
      await store.migrate();
      for (const url of [A, B])
        await store.addAudience({ url, name: null, tokenTtl: null, signingAlg: null });
    });

    afterEach(async () => {
      await store.close();
    });

    it('0015 gives every grant there is token_exchange false and every audience no resource servers', async () => {
      const fresh = await open(clock.date);
      try {
        await fresh.migrate('0014_revocation');
        await fresh.addAudience({ url: A, name: 'A', tokenTtl: null, signingAlg: null });
        await fresh.createClient(newClient('old', [A], { scopes: {} }));
        expect(await fresh.migrate()).toEqual(migrationsAfter('0014_revocation'));
        expect((await fresh.findClient('old'))!.grants).toEqual([
          { audience: A, scopes: [], claims: null, tokenExchange: false },
        ]);
        expect((await fresh.findAudience(A))!.resourceServerClientIds).toEqual([]);
        expect(await fresh.listGrantsOf(A)).toEqual([
          { clientId: 'old', audience: A, scopes: [], claims: null, tokenExchange: false },
        ]);
        expect(await fresh.migrate()).toEqual([]);
      } finally {
        await fresh.close();
      }
    });

    it('putGrant sets token_exchange (false when left out), read back by every client read', async () => {
      await store.createClient(newClient('svc', [A]));
      expect(await changesOf(store, () => store.putGrant('svc', B, ['x'], undefined, null, true))).toEqual([
        ['grant', `svc ${B}`],
      ]);
      const expected = [
        { audience: A, scopes: [], claims: null, tokenExchange: false },
        { audience: B, scopes: ['x'], claims: null, tokenExchange: true },
      ];
      expect((await store.findClient('svc'))!.grants).toEqual(expected);
      expect((await store.findClients(['svc']))[0]!.grants).toEqual(expected);
      expect((await store.listClients())[0]!.grants).toEqual(expected);
      expect((await store.listClientsPage(null, 10))[0]!.grants).toEqual(expected);
      expect(await store.listGrantsOf(B)).toEqual([{ clientId: 'svc', ...expected[1]! }]);
      // Left out: false, as scopes and claims are none.
      await store.putGrant('svc', B, ['x']);
      expect((await store.findClient('svc'))!.grants[1]).toEqual({ ...expected[1]!, tokenExchange: false });
    });

    it('createClient makes the grants it is told allow token exchange so, and the others not', async () => {
      const created = await store.createClient(newClient('svc', [B, A], { grantTokenExchange: [B] }));
      const grants = [
        { audience: A, scopes: [], claims: null, tokenExchange: false },
        { audience: B, scopes: [], claims: null, tokenExchange: true },
      ];
      expect(created.grants).toEqual(grants);
      expect((await store.findClient('svc'))!.grants).toEqual(grants);
    });

    it("an audience's resource servers: set at creation and by updateAudience, sorted, each once", async () => {
      const at = clock.iso();
      const added = await store.addAudience({
        url: 'https://api.c.example.com',
        name: null,
        tokenTtl: null,
        signingAlg: null,
        resourceServerClientIds: ['rs-b', 'rs-a', 'rs-b'],
      });
      expect(added).toEqual({
        id: expect.stringMatching(/^aud_/),
        url: 'https://api.c.example.com',
        name: null,
        tokenTtl: null,
        signingAlg: null,
        scopes: [],
        resourceServerClientIds: ['rs-a', 'rs-b'],
        tokenProfile: null,
        createdAt: at,
        updatedAt: at,
      });
      expect(await store.findAudienceById(added.id)).toEqual(added);
      clock.advance(1000);
      expect(
        await changesOf(store, () => store.updateAudience(A, { resourceServerClientIds: ['z', 'y'] })),
      ).toEqual([['audience', A]]);
      expect(await store.findAudience(A)).toMatchObject({
        resourceServerClientIds: ['y', 'z'],
        updatedAt: clock.iso(),
      });
      await store.updateAudience(A, { resourceServerClientIds: [] });
      expect((await store.findAudience(A))!.resourceServerClientIds).toEqual([]);
    });

    it('deleteClient takes the client off every audience that names it, recorded as a change of each, in its transaction', async () => {
      await store.createClient(newClient('rs-1'));
      await store.createClient(newClient('rs-2'));
      await store.updateAudience(A, { resourceServerClientIds: ['rs-1', 'rs-2'] });
      await store.updateAudience(B, { resourceServerClientIds: ['rs-2'] });
      clock.advance(1000);
      const audit: ChangeAudit = {
        type: 'client.deleted',
        actor: 'cli:test',
        source: null,
        target: 'rs-2',
        clientId: 'rs-2',
        changes: { resource_server_of: { from: [A, B], to: [] } },
      };
      expect(await changesOf(store, () => store.deleteClient('rs-2', audit))).toEqual([
        ['client', 'rs-2'],
        ['audience', A],
        ['audience', B],
      ]);
      expect(await store.findAudience(A)).toMatchObject({
        resourceServerClientIds: ['rs-1'],
        updatedAt: clock.iso(),
      });
      expect((await store.findAudience(B))!.resourceServerClientIds).toEqual([]);
      // One event: the client's deletion, which says which audiences it left.
      const [event] = await store.queryAuditEvents({ limit: 10 });
      expect(event).toMatchObject({ type: 'client.deleted', changes: audit.changes });
      // A client no audience names: only its own change.
      expect(await changesOf(store, () => store.deleteClient('rs-1'))).toEqual([
        ['client', 'rs-1'],
        ['audience', A],
      ]);
      await store.createClient(newClient('lonely'));
      expect(await changesOf(store, () => store.deleteClient('lonely'))).toEqual([['client', 'lonely']]);
    });

    it('a transaction that fails after deleteClient leaves the audiences as they were', async () => {
      await store.createClient(newClient('rs-1'));
      await store.updateAudience(A, { resourceServerClientIds: ['rs-1'] });
      await expect(
        store.transaction(async (tx) => {
          await tx.deleteClient('rs-1');
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect((await store.findAudience(A))!.resourceServerClientIds).toEqual(['rs-1']);
      expect(await store.findClient('rs-1')).toBeDefined();
    });
  });
}
