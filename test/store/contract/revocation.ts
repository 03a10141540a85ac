import { describe, expect, it } from 'vitest';
import type { ChangeAudit } from '../../../src/store/types.js';
import { clock, expectChanges, migrationsAfter, newClient, type OpenStore, store } from './shared.js';

/** Revocation: the denylist of tokens, the tombstones of deleted clients, and the standings of clients. */
export function revocationContract(open: OpenStore): void {
  describe('revocation', () => {
    const seconds = () => Math.floor(clock.now() / 1000);
    const revokedAudit = (jti: string): ChangeAudit => ({
      type: 'token.revoked',
      actor: 'client:svc',
      source: '203.0.113.7',
      target: jti,
      clientId: 'svc',
      changes: null,
    });

    it('puts a token on the denylist once, with one change (<exp> <jti>) and its audit event', async () => {
      const exp = seconds() + 600;
      const written = await expectChanges(
        store,
        () => store.revokeToken({ jti: 'j-1', clientId: 'svc', exp }, revokedAudit('j-1')),
        [['token', `${exp} j-1`]],
      );
      expect(written).toBe(true);
      const [event] = await store.queryAuditEvents({ limit: 10 });
      expect(event).toMatchObject({
        type: 'token.revoked',
        actor: 'client:svc',
        target: 'j-1',
        clientId: 'svc',
      });
      // Again (another instance, a second request): nothing written, no change, no second event.
      expect(
        await expectChanges(
          store,
          () => store.revokeToken({ jti: 'j-1', clientId: 'svc', exp }, revokedAudit('j-1')),
          [],
        ),
      ).toBe(false);
      expect(await store.queryAuditEvents({ limit: 10 })).toHaveLength(1);
    });

    it('lists the entries whose exp is after now, and prunes those at or before it, a batch at a time', async () => {
      const now = seconds();
      for (const [jti, exp] of [
        ['gone-1', now - 10],
        ['gone-2', now],
        ['gone-3', now - 1],
        ['live-1', now + 1],
        ['live-2', now + 86_400],
      ] as const)
        await store.revokeToken({ jti, clientId: 'svc', exp });
      const live = await store.listRevokedTokens(now);
      expect(live.sort((a, b) => a.exp - b.exp)).toEqual([
        { jti: 'live-1', exp: now + 1 },
        { jti: 'live-2', exp: now + 86_400 },
      ]);
      expect(await store.pruneRevokedTokens(now, 2)).toBe(2);
      expect(await store.pruneRevokedTokens(now, 2)).toBe(1);
      expect(await store.pruneRevokedTokens(now, 2)).toBe(0);
      expect((await store.listRevokedTokens(now - 100)).map((t) => t.jti).sort()).toEqual([
        'live-1',
        'live-2',
      ]);
      // A page at a time, in jti order, each going on after the last one's jti.
      for (const jti of ['live-0', 'live-3', 'expired-late'])
        await store.revokeToken({ jti, clientId: 'svc', exp: now + 9 });
      const first = await store.listRevokedTokens(now, { after: null, limit: 2 });
      expect(first).toEqual([
        { jti: 'expired-late', exp: now + 9 },
        { jti: 'live-0', exp: now + 9 },
      ]);
      expect(await store.listRevokedTokens(now, { after: 'live-0', limit: 2 })).toEqual([
        { jti: 'live-1', exp: now + 1 },
        { jti: 'live-2', exp: now + 86_400 },
      ]);
      expect(await store.listRevokedTokens(now, { after: 'live-2', limit: 2 })).toEqual([
        { jti: 'live-3', exp: now + 9 },
      ]);
      expect(await store.listRevokedTokens(now + 10, { after: null, limit: 5 })).toEqual([
        { jti: 'live-2', exp: now + 86_400 },
      ]);
      // A pruned token can be listed again (its row is gone; a revocation of it writes anew).
      expect(await store.revokeToken({ jti: 'gone-1', clientId: 'svc', exp: now + 5 })).toBe(true);
    });

    it("sets a client's revoked_before with a change of the client, and reads it back", async () => {
      await store.createClient(newClient('svc'));
      const at = clock.iso();
      clock.advance(1500);
      const updated = await expectChanges(store, () => store.updateClient('svc', { revokedBefore: at }), [
        ['client', 'svc'],
      ]);
      expect(updated.revokedBefore).toBe(at);
      expect(updated.updatedAt).toBe(clock.iso());
      expect((await store.findClient('svc'))!.revokedBefore).toBe(at);
      expect((await store.findClients(['svc']))[0]!.revokedBefore).toBe(at);
    });

    it('a client made under the id of one deleted starts with its tokens cut at the deletion; its grants are its own', async () => {
      await store.addAudience({
        url: 'https://old.example.com',
        name: null,
        tokenTtl: null,
        signingAlg: null,
      });
      await store.addAudience({
        url: 'https://new.example.com',
        name: null,
        tokenTtl: null,
        signingAlg: null,
      });
      await store.createClient(
        newClient('svc', ['https://old.example.com'], { scopes: { 'https://old.example.com': ['read'] } }),
      );
      clock.advance(400);
      const deletedAt = clock.iso();
      await store.deleteClient('svc');
      clock.advance(300);
      const made = await store.createClient(newClient('svc', ['https://new.example.com']));
      expect(made.revokedBefore).toBe(deletedAt);
      expect(made.createdAt).toBe(clock.iso());
      expect(made.grants).toEqual([
        { audience: 'https://new.example.com', scopes: [], claims: null, tokenExchange: false },
      ]);
      expect((await store.findClient('svc'))!.revokedBefore).toBe(deletedAt);
      expect(await store.findClientStandings(['svc'])).toEqual([
        { id: 'svc', enabled: true, revokedBefore: deletedAt, createdAt: clock.iso() },
      ]);
      // The tombstone has served: deleted and made again, the cut is the second deletion.
      clock.advance(5000);
      const again = clock.iso();
      await store.deleteClient('svc');
      await store.createClients([
        { client: newClient('first') },
        { client: newClient('svc') },
        { client: newClient('last') },
      ]);
      expect((await store.findClients(['first', 'last', 'svc'])).map((c) => [c.id, c.revokedBefore])).toEqual(
        [
          ['first', null],
          ['last', null],
          ['svc', again],
        ],
      );
    });

    it('prunes the tombstones of clients deleted before a time, the oldest first, a batch at a time', async () => {
      for (const id of ['a', 'b', 'c']) {
        await store.createClient(newClient(id));
        await store.deleteClient(id);
        clock.advance(1000);
      }
      const late = clock.iso();
      await store.createClient(newClient('d'));
      await store.deleteClient('d');
      expect(await store.pruneClientDeletions(late, 2)).toBe(2);
      expect(await store.pruneClientDeletions(late, 2)).toBe(1);
      expect(await store.pruneClientDeletions(late, 2)).toBe(0);
      // The pruned ids start afresh; the one deleted since keeps its cut.
      expect((await store.createClient(newClient('a'))).revokedBefore).toBeNull();
      expect((await store.createClient(newClient('d'))).revokedBefore).toBe(late);
    });

    it('lists the standing of the clients disabled, revoked or created since a time; finds any by id', async () => {
      const start = clock.iso();
      await store.createClient(newClient('old-enabled'));
      await store.createClient(newClient('old-disabled', [], { enabled: false }));
      await store.createClient(newClient('old-revoked'));
      clock.advance(60_000);
      const since = clock.iso();
      await store.updateClient('old-revoked', { revokedBefore: since });
      await store.createClient(newClient('new'));
      const standing = (id: string, enabled: boolean, revokedBefore: string | null, createdAt: string) => ({
        id,
        enabled,
        revokedBefore,
        createdAt,
      });
      const listed = await store.listClientStandings(since);
      expect(listed.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
        standing('new', true, null, since),
        standing('old-disabled', false, null, start),
        standing('old-revoked', true, since, start),
      ]);
      // A page at a time, in id order: the clients that are not listed at all take no place in a page.
      expect(await store.listClientStandings(since, { after: null, limit: 2 })).toEqual([
        standing('new', true, null, since),
        standing('old-disabled', false, null, start),
      ]);
      expect(await store.listClientStandings(since, { after: 'new', limit: 2 })).toEqual([
        standing('old-disabled', false, null, start),
        standing('old-revoked', true, since, start),
      ]);
      expect(await store.listClientStandings(since, { after: 'old-disabled', limit: 2 })).toEqual([
        standing('old-revoked', true, since, start),
      ]);
      expect(await store.listClientStandings(since, { after: 'old-revoked', limit: 2 })).toEqual([]);
      const found = await store.findClientStandings(['old-enabled', 'new', 'nobody']);
      expect(found.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
        standing('new', true, null, since),
        standing('old-enabled', true, null, start),
      ]);
      expect(await store.findClientStandings([])).toEqual([]);
    });

    it('0014 sets revoked_before of the clients disabled before it, and of no other', async () => {
      const fresh = await open(clock.date);
      try {
        await fresh.migrate('0013_dpop_bound_access_tokens');
        for (const id of ['on', 'off']) {
          await fresh.addAudience({
            url: `https://${id}.example.com`,
            name: null,
            tokenTtl: null,
            signingAlg: null,
          });
          await fresh.updateClient(
            (await fresh.createClient(newClient(id, [`https://${id}.example.com`]))).id,
            { enabled: id === 'on' },
          );
        }
        const before = Date.now();
        expect(await fresh.migrate()).toEqual(migrationsAfter('0013_dpop_bound_access_tokens'));
        expect((await fresh.findClient('on'))!.revokedBefore).toBeNull();
        // The moment of the migration, by the wall clock (a migration has no other).
        const at = Date.parse((await fresh.findClient('off'))!.revokedBefore!);
        expect(at).toBeGreaterThanOrEqual(before - 1);
        expect(at).toBeLessThanOrEqual(Date.now());
        expect(await fresh.listRevokedTokens(0)).toEqual([]);
      } finally {
        await fresh.close();
      }
    });
  });
}
