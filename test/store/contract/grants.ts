import { beforeEach, describe, expect, it } from 'vitest';
import { A, B, C, clock, expectChanges, expectNoChange, newClient, store } from './shared.js';

/** Grants: adding, setting the scopes of, listing and removing a client's grants of audiences. */
export function grantsContract(): void {
  describe('grants', () => {
    beforeEach(async () => {
      for (const url of [A, B])
        await store.addAudience({ url, name: null, tokenTtl: null, signingAlg: null });
      await store.createClient(newClient('svc', [A]));
    });

    it('adds a grant once: true, then false with no change recorded', async () => {
      expect(await expectChanges(store, () => store.addGrant('svc', B), [['grant', `svc ${B}`]])).toBe(true);
      expect((await store.findClient('svc'))?.audiences).toEqual([A, B]);
      const before = await store.latestChange();
      expect(await store.addGrant('svc', B)).toBe(false);
      expect(await store.addGrant('svc', A)).toBe(false);
      expect(await store.latestChange()).toBe(before);
      expect((await store.findClient('svc'))?.audiences).toEqual([A, B]);
    });

    it('does not change the client record itself', async () => {
      const before = await store.findClient('svc');
      clock.advance(1000);
      await store.addGrant('svc', B);
      expect(await store.findClient('svc')).toEqual({
        ...before,
        audiences: [A, B],
        grants: [
          { audience: A, scopes: [], claims: null, tokenExchange: false },
          { audience: B, scopes: [], claims: null, tokenExchange: false },
        ],
      });
    });

    it('refuses a grant for an unknown client or audience (not_found)', async () => {
      expect((await expectNoChange(store, () => store.addGrant('nobody', A))).code).toBe('not_found');
      expect(
        (await expectNoChange(store, () => store.addGrant('svc', 'https://unknown.example.com'))).code,
      ).toBe('not_found');
      expect((await store.findClient('svc'))?.audiences).toEqual([A]);
    });

    it('putGrant creates a grant with its scopes (true), then sets them (false), a change each time', async () => {
      const before = (await store.findClient('svc'))!;
      clock.advance(1000);
      const audit = {
        type: 'grant.created' as const,
        actor: 'cli:test',
        source: null,
        target: 'svc',
        clientId: 'svc',
        audience: B,
        changes: { scopes: ['read', 'write'] },
      };
      const seq0 = await store.latestChange();
      expect(
        await expectChanges(store, () => store.putGrant('svc', B, ['write', 'read', 'write'], audit), [
          ['grant', `svc ${B}`],
        ]),
      ).toBe(true);
      const seq1 = await store.latestChange();
      expect(seq1).toBeGreaterThan(seq0);
      // The grant, not the client record: updated_at stays.
      expect(await store.findClient('svc')).toEqual({
        ...before,
        audiences: [A, B],
        grants: [
          { audience: A, scopes: [], claims: null, tokenExchange: false },
          { audience: B, scopes: ['read', 'write'], claims: null, tokenExchange: false },
        ],
      });
      expect(await store.queryAuditEvents({ limit: 10 })).toEqual([
        {
          id: expect.any(Number),
          at: clock.iso(),
          type: 'grant.created',
          clientId: 'svc',
          audience: B,
          jti: null,
          reason: null,
          source: null,
          count: null,
          actor: 'cli:test',
          target: 'svc',
          changes: { scopes: ['read', 'write'] },
        },
      ]);

      expect(
        await expectChanges(store, () => store.putGrant('svc', B, ['admin']), [['grant', `svc ${B}`]]),
      ).toBe(false);
      const seq2 = await store.latestChange();
      expect(seq2).toBeGreaterThan(seq1);
      expect((await store.findClient('svc'))?.grants).toEqual([
        { audience: A, scopes: [], claims: null, tokenExchange: false },
        { audience: B, scopes: ['admin'], claims: null, tokenExchange: false },
      ]);

      // The grant createClient made takes scopes too; an empty list clears them.
      expect(
        await expectChanges(store, () => store.putGrant('svc', A, ['read']), [['grant', `svc ${A}`]]),
      ).toBe(false);
      expect(await expectChanges(store, () => store.putGrant('svc', B, []), [['grant', `svc ${B}`]])).toBe(
        false,
      );
      expect(await store.latestChange()).toBeGreaterThan(seq2);
      const after = await store.findClient('svc');
      expect(after).toEqual({
        ...before,
        audiences: [A, B],
        grants: [
          { audience: A, scopes: ['read'], claims: null, tokenExchange: false },
          { audience: B, scopes: [], claims: null, tokenExchange: false },
        ],
      });
      expect(await store.listClients()).toEqual([after]);
      expect(await store.listClientsPage(null, 10)).toEqual([after]);

      // addGrant leaves a grant putGrant made as it is; once removed, putGrant creates it again.
      expect(await store.addGrant('svc', A)).toBe(false);
      expect((await store.findClient('svc'))?.grants[0]).toEqual({
        audience: A,
        scopes: ['read'],
        claims: null,
        tokenExchange: false,
      });
      await store.removeGrant('svc', A);
      expect(await store.putGrant('svc', A, ['x'])).toBe(true);
      expect((await store.findClient('svc'))?.grants).toEqual([
        { audience: A, scopes: ['x'], claims: null, tokenExchange: false },
        { audience: B, scopes: [], claims: null, tokenExchange: false },
      ]);
    });

    it('listGrantsOf: every grant of an audience, by client id; updateAudience sets their scopes in its write', async () => {
      const scopes = [
        { name: 'read', description: null },
        { name: 'write', description: null },
      ];
      await store.updateAudience(B, { scopes });
      await store.putGrant('svc', B, ['read', 'write'], undefined, { tier: 'gold' });
      await store.createClient(newClient('bare', [B]));
      await store.createClient(newClient('reader', [A, B], { scopes: { [B]: ['read'], [A]: ['x'] } }));
      expect(await store.listGrantsOf(B)).toEqual([
        { clientId: 'bare', audience: B, scopes: [], claims: null, tokenExchange: false },
        { clientId: 'reader', audience: B, scopes: ['read'], claims: null, tokenExchange: false },
        {
          clientId: 'svc',
          audience: B,
          scopes: ['read', 'write'],
          claims: { tier: 'gold' },
          tokenExchange: false,
        },
      ]);
      expect(await store.listGrantsOf(C)).toEqual([]);
      // The audience's change and its grants' new scopes: one write, one change of the audience.
      clock.advance(1000);
      const updated = await expectChanges(
        store,
        () =>
          store.updateAudience(B, { scopes: [scopes[0]!] }, undefined, [
            { clientId: 'svc', scopes: ['read'] },
            { clientId: 'bare', scopes: ['write', 'read'] },
          ]),
        [['audience', B]],
      );
      expect(updated).toMatchObject({ scopes: [scopes[0]], updatedAt: clock.iso() });
      expect(await store.listGrantsOf(B)).toEqual([
        { clientId: 'bare', audience: B, scopes: ['read', 'write'], claims: null, tokenExchange: false },
        { clientId: 'reader', audience: B, scopes: ['read'], claims: null, tokenExchange: false },
        { clientId: 'svc', audience: B, scopes: ['read'], claims: { tier: 'gold' }, tokenExchange: false },
      ]);
      // The other audience's grant is untouched; without `grants` the grants stay as they are (the rule
      // that a grant holds only its audience's scopes is the management layer's).
      expect((await store.findClient('reader'))!.grants[0]).toEqual({
        audience: A,
        scopes: ['x'],
        claims: null,
        tokenExchange: false,
      });
      await store.updateAudience(B, { scopes: [] });
      expect((await store.listGrantsOf(B)).map((g) => g.scopes)).toEqual([
        ['read', 'write'],
        ['read'],
        ['read'],
      ]);
      // A grant it does not have: not_found, nothing written.
      const before = await store.findAudience(B);
      const error = await expectNoChange(store, () =>
        store.updateAudience(B, { name: 'x' }, undefined, [{ clientId: 'nobody', scopes: [] }]),
      );
      expect(error).toMatchObject({ code: 'not_found', resource: 'grant' });
      expect(await store.findAudience(B)).toEqual(before);
    });

    it('putGrant refuses an unknown client or audience (not_found) and writes nothing', async () => {
      const before = await store.findClient('svc');
      const audit = (audience: string) => ({
        type: 'grant.created' as const,
        actor: 'cli:test',
        source: null,
        target: 'svc',
        clientId: 'svc',
        audience,
        changes: { scopes: ['read'] },
      });
      const unknownClient = await expectNoChange(store, () =>
        store.putGrant('nobody', A, ['read'], audit(A)),
      );
      expect(unknownClient).toMatchObject({ code: 'not_found', resource: 'client' });
      const unknownAudience = await expectNoChange(store, () =>
        store.putGrant('svc', 'https://unknown.example.com', ['read'], audit('https://unknown.example.com')),
      );
      expect(unknownAudience).toMatchObject({ code: 'not_found', resource: 'audience' });
      expect(unknownAudience.message).toContain('https://unknown.example.com');
      expect(await store.findClient('svc')).toEqual(before);
      expect(await store.findClient('nobody')).toBeUndefined();
      expect(await store.queryAuditEvents({ limit: 10 })).toEqual([]);
    });

    it('removes a grant', async () => {
      await expectChanges(store, () => store.removeGrant('svc', A), [['grant', `svc ${A}`]]);
      expect((await store.findClient('svc'))?.audiences).toEqual([]);
      expect(await store.findAudience(A)).toBeDefined();
    });

    it('refuses to remove a grant that does not exist (not_found)', async () => {
      expect((await expectNoChange(store, () => store.removeGrant('svc', B))).code).toBe('not_found');
      expect((await expectNoChange(store, () => store.removeGrant('nobody', A))).code).toBe('not_found');
      expect(
        (await expectNoChange(store, () => store.removeGrant('svc', 'https://unknown.example.com'))).code,
      ).toBe('not_found');
      expect((await store.findClient('svc'))?.audiences).toEqual([A]);
    });
  });
}
