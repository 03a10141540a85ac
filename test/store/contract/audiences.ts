import { describe, expect, it } from 'vitest';
import { A, B, C, clock, expectChanges, expectNoChange, newClient, store } from './shared.js';

/** Audiences: adding, finding, listing, updating and removing them, by URL or by id. */
export function audiencesContract(): void {
  describe('audiences', () => {
    it('adds an audience and returns it with both timestamps from the clock', async () => {
      const at = clock.iso();
      const added = await store.addAudience({ url: A, name: 'API A', tokenTtl: 600, signingAlg: 'RS256' });
      const expected = {
        id: expect.stringMatching(/^aud_[A-Za-z0-9_-]{16}$/),
        url: A,
        name: 'API A',
        tokenTtl: 600,
        signingAlg: 'RS256',
        scopes: [],
        resourceServerClientIds: [],
        tokenProfile: null,
        createdAt: at,
        updatedAt: at,
      };
      expect(added).toEqual(expected);
      expect(await store.findAudience(A)).toEqual(expected);
    });

    it('a token profile: set at creation, changed and cleared (0018), null for rfc9068', async () => {
      const added = await store.addAudience({
        url: A,
        name: null,
        tokenTtl: null,
        signingAlg: null,
        tokenProfile: 'auth0',
      });
      expect(added.tokenProfile).toBe('auth0');
      expect((await store.findAudience(A))!.tokenProfile).toBe('auth0');
      await store.updateAudience(A, { tokenProfile: 'keycloak' });
      expect((await store.listAudiences()).map((a) => a.tokenProfile)).toEqual(['keycloak']);
      await store.updateAudience(A, { tokenProfile: null });
      expect((await store.findAudience(A))!.tokenProfile).toBeNull();
    });

    it('keeps nulls as nulls', async () => {
      const at = clock.iso();
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
      expect(await store.findAudience(A)).toEqual({
        id: expect.stringMatching(/^aud_/),
        url: A,
        name: null,
        tokenTtl: null,
        signingAlg: null,
        scopes: [],
        resourceServerClientIds: [],
        tokenProfile: null,
        createdAt: at,
        updatedAt: at,
      });
    });

    it('refuses a second audience with the same URL (conflict) and keeps the first', async () => {
      await store.addAudience({ url: A, name: 'first', tokenTtl: null, signingAlg: null });
      const error = await expectNoChange(store, () =>
        store.addAudience({ url: A, name: 'second', tokenTtl: 60, signingAlg: 'EdDSA' }),
      );
      expect(error.code).toBe('conflict');
      expect((await store.findAudience(A))?.name).toBe('first');
      expect(await store.listAudiences()).toHaveLength(1);
    });

    it('matches URLs exactly: a trailing slash or another case is another audience', async () => {
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
      expect(await store.findAudience(`${A}/`)).toBeUndefined();
      expect(await store.findAudience(A.toUpperCase())).toBeUndefined();
      await store.addAudience({ url: `${A}/`, name: null, tokenTtl: null, signingAlg: null });
      expect((await store.listAudiences()).map((a) => a.url)).toEqual([A, `${A}/`]);
    });

    it('finds nothing for an unknown URL', async () => {
      expect(await store.findAudience('https://nowhere.example.com')).toBeUndefined();
    });

    it('lists audiences sorted by URL (code-unit order, whatever the insertion order or collation)', async () => {
      // Upper case and punctuation sort differently under a locale collation than by code unit.
      const urls = [C, 'https://Z.example.com', A, 'https://a-b.example.com', 'https://ab.example.com', B];
      for (const url of urls) await store.addAudience({ url, name: null, tokenTtl: null, signingAlg: null });
      expect((await store.listAudiences()).map((a) => a.url)).toEqual([...urls].sort());
    });

    it('removes an audience and every grant of it, and nothing else', async () => {
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
      await store.addAudience({ url: B, name: null, tokenTtl: null, signingAlg: null });
      await store.createClient(newClient('one', [A, B]));
      await store.createClient(newClient('two', [A]));
      await expectChanges(store, () => store.removeAudience(A), [['audience', A]]);
      expect(await store.findAudience(A)).toBeUndefined();
      expect((await store.listAudiences()).map((a) => a.url)).toEqual([B]);
      expect((await store.findClient('one'))?.audiences).toEqual([B]);
      expect((await store.findClient('two'))?.audiences).toEqual([]);
      const listed = (await store.listClients()).map((c) => [c.id, c.audiences]);
      expect(listed.sort()).toEqual([
        ['one', [B]],
        ['two', []],
      ]);
      // The grant is really gone: it can be added again once the audience is back.
      await store.addAudience({ url: A, name: null, tokenTtl: null, signingAlg: null });
      expect(await store.addGrant('two', A)).toBe(true);
    });

    it('keeps the id it is given, or makes a distinct aud_ one; findAudienceById finds by either', async () => {
      const given = await store.addAudience({
        id: 'aud_given',
        url: A,
        name: 'API A',
        tokenTtl: null,
        signingAlg: null,
      });
      expect(given.id).toBe('aud_given');
      const b = await store.addAudience({ url: B, name: null, tokenTtl: null, signingAlg: null });
      const c = await store.addAudience({ url: C, name: null, tokenTtl: null, signingAlg: null });
      expect(b.id).toMatch(/^aud_[A-Za-z0-9_-]{16}$/);
      expect(c.id).toMatch(/^aud_[A-Za-z0-9_-]{16}$/);
      expect(new Set([given.id, b.id, c.id]).size).toBe(3);
      // The id is stored, not made anew on each read.
      expect(await store.findAudience(A)).toEqual(given);
      expect(await store.findAudience(B)).toEqual(b);
      expect(await store.findAudienceById('aud_given')).toEqual(given);
      expect(await store.findAudienceById(b.id)).toEqual(b);
      expect(await store.findAudienceById(c.id)).toEqual(c);
      expect((await store.listAudiences()).map((a) => a.id)).toEqual([given.id, b.id, c.id]);
    });

    it('findAudienceById finds nothing for an unknown id, a URL, or another case', async () => {
      await store.addAudience({ id: 'aud_given', url: A, name: null, tokenTtl: null, signingAlg: null });
      expect(await store.findAudienceById('aud_AAAAAAAAAAAAAAAA')).toBeUndefined();
      expect(await store.findAudienceById(A)).toBeUndefined();
      expect(await store.findAudienceById('AUD_GIVEN')).toBeUndefined();
      expect(await store.findAudienceById('')).toBeUndefined();
    });

    it('refuses a second audience with the same id (conflict) and keeps the first', async () => {
      const first = await store.addAudience({
        id: 'aud_same',
        url: A,
        name: 'first',
        tokenTtl: null,
        signingAlg: null,
      });
      const error = await expectNoChange(store, () =>
        store.addAudience({ id: 'aud_same', url: B, name: 'second', tokenTtl: null, signingAlg: null }),
      );
      expect(error).toMatchObject({ code: 'conflict', resource: 'audience' });
      expect(await store.findAudienceById('aud_same')).toEqual(first);
      expect(await store.findAudience(B)).toBeUndefined();
      expect(await store.listAudiences()).toEqual([first]);
    });

    it('keeps the scopes an audience is added with, and updateAudience sets, keeps and clears them', async () => {
      const read = { name: 'read', description: 'Reads "things", ü ✓' };
      const added = await store.addAudience({
        url: A,
        name: 'A',
        tokenTtl: 300,
        signingAlg: 'ES256',
        scopes: [read],
        resourceServerClientIds: [],
      });
      expect(added.scopes).toEqual([read]);
      expect(await store.findAudience(A)).toEqual(added);

      clock.advance(1000);
      const scopes = [read, { name: 'write', description: null }];
      const updated = await expectChanges(store, () => store.updateAudience(A, { scopes }), [
        ['audience', A],
      ]);
      const expected = { ...added, scopes, updatedAt: clock.iso() };
      expect(updated).toEqual(expected);
      expect(await store.findAudience(A)).toEqual(expected);
      expect(await store.findAudienceById(added.id)).toEqual(expected);
      expect(await store.listAudiences()).toEqual([expected]);

      // A patch without scopes keeps them.
      clock.advance(1000);
      const renamed = await store.updateAudience(A, { name: 'renamed' });
      expect(renamed).toEqual({ ...expected, name: 'renamed', updatedAt: clock.iso() });
      expect(await store.findAudience(A)).toEqual(renamed);

      // An empty list clears them; the id never changes.
      clock.advance(1000);
      const cleared = await store.updateAudience(A, { scopes: [] });
      expect(cleared).toEqual({ ...renamed, scopes: [], updatedAt: clock.iso() });
      expect(await store.findAudience(A)).toEqual(cleared);
      expect(cleared.id).toBe(added.id);
    });

    it('refuses to remove an unknown audience (not_found)', async () => {
      const error = await expectNoChange(store, () => store.removeAudience(A));
      expect(error.code).toBe('not_found');
    });
  });
}
