import { beforeEach, describe, expect, it } from 'vitest';
import { SEARCHED_CLIENTS } from '../../helpers/expected.js';
import type { ChangeAudit, Client } from '../../../src/store/types.js';
import {
  A,
  B,
  C,
  changeEventAt,
  clock,
  DIGEST_1,
  DIGEST_2,
  expectChanges,
  expectNoChange,
  newClient,
  store,
} from './shared.js';

/** Clients: creating, finding, listing, paging, updating and deleting them; their secrets, keys and assertion ids. */
export function clientsContract(): void {
  describe('clients', () => {
    beforeEach(async () => {
      for (const url of [A, B, C])
        await store.addAudience({ url, name: null, tokenTtl: null, signingAlg: null });
    });

    it('creates a client with its grants, and returns it enabled with three equal timestamps', async () => {
      const at = clock.iso();
      const created = await store.createClient(
        newClient('svc-1', [C, A], { name: 'Billing', tokenTtl: 300 }),
      );
      const expected = {
        id: 'svc-1',
        name: 'Billing',
        description: null,
        secretDigest: DIGEST_1,
        enabled: true,
        tokenTtl: 300,
        createdAt: at,
        updatedAt: at,
        secretRotatedAt: at,
        quotaPerMinute: null,
        quotaPerDay: null,
        claims: null,
        authMethod: 'client_secret_basic',
        jwks: null,
        jwksUri: null,
        federatedCredentials: [],
        dpopBoundAccessTokens: false,
        revokedBefore: null,
        tlsClientAuth: null,
        certificateBoundAccessTokens: false,
        secrets: [
          {
            id: expect.stringMatching(/^sec_/),
            digest: DIGEST_1,
            createdAt: at,
            expiresAt: null,
            lastUsedAt: null,
          },
        ],
        audiences: [A, C],
        grants: [
          { audience: A, scopes: [], claims: null, tokenExchange: false },
          { audience: C, scopes: [], claims: null, tokenExchange: false },
        ],
      };
      expect(created).toEqual(expected);
      expect(await store.findClient('svc-1')).toEqual(expected);
    });

    it('finds several clients in one call: those that exist, each as findClient has it', async () => {
      await store.createClient(newClient('svc-1', [C, A], { name: 'Billing', tokenTtl: 300 }));
      await store.createClient(newClient('lonely'));
      await store.createClient(newClient('svc-2', [B]));
      const ids = ['svc-2', 'nobody', 'svc-1', 'lonely', 'svc-1', 'SVC-1'];
      const found = await store.findClients(ids);
      const byId = new Map(found.map((c) => [c.id, c]));
      expect([...byId.keys()].sort()).toEqual(['lonely', 'svc-1', 'svc-2']);
      expect(found).toHaveLength(3);
      for (const id of ['svc-1', 'svc-2', 'lonely']) expect(byId.get(id)).toEqual(await store.findClient(id));
      expect(await store.findClients([])).toEqual([]);
      expect(await store.findClients(['nobody'])).toEqual([]);
    });

    it('finds clients by ids with quotes, commas, braces, backslashes and non-ASCII characters exactly', async () => {
      const odd = ['a"b', 'c,d', '{e}', 'f\\g', "h'i", 'ü-✓', 'NULL', ' sp '];
      for (const id of odd) await store.createClient(newClient(id, [A]));
      const found = await store.findClients([...odd, 'a', 'c', 'e', 'null']);
      expect(found.map((c) => c.id).sort()).toEqual([...odd].sort());
    });

    it('finds a hundred clients in one call, and as many again that do not exist', async () => {
      const ids = Array.from({ length: 100 }, (_, n) => `bulk-${String(n).padStart(3, '0')}`);
      // Even-numbered clients hold two grants, the others none.
      const grants = (id: string) => (Number(id.slice(-3)) % 2 === 0 ? [A, B] : []);
      for (const id of ids) await store.createClient(newClient(id, grants(id)));
      const found = await store.findClients([...ids, ...ids.map((id) => `${id}-missing`)]);
      expect(found.map((c) => c.id).sort()).toEqual(ids);
      for (const client of found) expect(client.audiences).toEqual(grants(client.id));
    });

    it('creates a client without grants', async () => {
      const created = await store.createClient(newClient('lonely'));
      expect(created.audiences).toEqual([]);
      expect((await store.findClient('lonely'))?.audiences).toEqual([]);
    });

    it('ignores a duplicated audience in the new grants', async () => {
      const created = await store.createClient(newClient('dup', [B, A, B]));
      expect(created.audiences).toEqual([A, B]);
      expect((await store.findClient('dup'))?.audiences).toEqual([A, B]);
    });

    it('returns the granted audiences sorted by code unit, from create, find and list alike', async () => {
      const odd = ['https://Z.example.com', 'https://a-b.example.com', 'https://ab.example.com'];
      for (const url of odd) await store.addAudience({ url, name: null, tokenTtl: null, signingAlg: null });
      const grants = [C, ...odd, A];
      const sorted = [...grants].sort();
      expect((await store.createClient(newClient('sorted', grants))).audiences).toEqual(sorted);
      expect((await store.findClient('sorted'))?.audiences).toEqual(sorted);
      expect((await store.listClients())[0]?.audiences).toEqual(sorted);
    });

    it('creates nothing when a granted audience is unknown (not_found), in one transaction', async () => {
      const error = await expectNoChange(store, () =>
        store.createClient(newClient('half', [A, 'https://unknown.example.com'])),
      );
      expect(error.code).toBe('not_found');
      expect(error.message).toContain('https://unknown.example.com');
      expect(await store.findClient('half')).toBeUndefined();
      expect(await store.countClients()).toBe(0);
      // Nothing of it is left behind: the same id can be created afterwards.
      expect((await store.createClient(newClient('half', [A]))).audiences).toEqual([A]);
    });

    it('refuses a duplicate id (conflict) and keeps the first client as it was', async () => {
      const first = await store.createClient(newClient('svc', [A]));
      clock.advance(1000);
      const error = await expectNoChange(store, () =>
        store.createClient(newClient('svc', [B], { name: 'other', secretDigest: DIGEST_2 })),
      );
      expect(error.code).toBe('conflict');
      expect(await store.findClient('svc')).toEqual(first);
      expect(await store.countClients()).toBe(1);
    });

    it('createClients makes each client as createClient does, with its audit event and change, in order, across insert batches', async () => {
      // 1,203 clients: more than two of the store's multi-row inserts; every kind of field on some of them.
      const many = Array.from({ length: 1203 }, (_, i) =>
        newClient(`bulk-${i}`, i % 3 === 0 ? [] : i % 3 === 1 ? [A] : [C, A], {
          ...(i % 5 === 0 ? { secretDigest: null, authMethod: 'private_key_jwt' as const } : {}),
          ...(i % 7 === 0 ? { scopes: { [A]: ['read', 'write'] }, grantClaims: { [A]: { tier: i } } } : {}),
          ...(i % 11 === 1 ? { grantTokenExchange: [A] } : {}),
          ...(i % 13 === 0 ? { claims: { team: 'x' }, tokenTtl: 600, enabled: false } : {}),
          ...(i % 17 === 0 ? { quotaPerMinute: 10, quotaPerDay: 1000, dpopBoundAccessTokens: true } : {}),
        }),
      );
      const audit = (id: string): ChangeAudit => ({
        type: 'client.created',
        actor: 'operator:op_1',
        source: 'cli',
        target: id,
        clientId: id,
        audience: null,
        changes: { name: `client ${id}` },
        reason: null,
      });
      const before = await store.latestChange();
      await store.createClients(many.map((client) => ({ client, audit: audit(client.id) })));
      expect((await store.changesSince(before, 5000)).map((c) => [c.entity, c.key])).toEqual(
        many.map((c) => ['client', c.id]),
      );
      // The same clients one by one, under other ids, read back the same but for their ids.
      const sample = [0, 1, 2, 5, 7, 12, 13, 17, 500, 1001, 1202];
      for (const i of sample) await store.createClient({ ...many[i]!, id: `one-${i}` });
      const norm = (c: Client | undefined) => ({
        ...c,
        id: undefined,
        secrets: c?.secrets.map((s) => ({ ...s, id: undefined })),
        // A client without secrets has a random digest in the column older servers read.
        secretDigest: c?.secrets.length === 0 ? undefined : c?.secretDigest,
      });
      for (const i of sample)
        expect(norm(await store.findClient(`bulk-${i}`))).toEqual(norm(await store.findClient(`one-${i}`)));
      // Every client's grants as asked, token_exchange where it was given (rows of mixed columns in one insert).
      const all = await store.findClients(many.map((c) => c.id));
      expect(all).toHaveLength(1203);
      for (const c of all) {
        const i = Number(c.id.slice('bulk-'.length));
        const audiences = i % 3 === 0 ? [] : i % 3 === 1 ? [A] : [A, C];
        expect(
          c.grants.map((g) => [g.audience, g.tokenExchange]),
          c.id,
        ).toEqual(audiences.map((url) => [url, i % 11 === 1 && url === A]));
      }
      expect(await store.countClients()).toBe(1203 + sample.length);
      const events = await store.queryAuditEvents({ types: ['client.created'], limit: 2000 });
      expect(events.filter((e) => e.target?.startsWith('bulk-'))).toHaveLength(1203);
      expect(events.find((e) => e.target === 'bulk-42')).toMatchObject(audit('bulk-42'));
    });

    it('markSecretsUsed sets the last-used time of every secret given, across statements, never back in time', async () => {
      const many = Array.from({ length: 250 }, (_, i) => newClient(`used-${i}`));
      await store.createClients(many.map((client) => ({ client })));
      const secretOf = new Map(
        (await store.findClients(many.map((c) => c.id))).map((c) => [c.id, c.secrets[0]!.id]),
      );
      const T1 = '2026-11-27T10:00:00.000Z';
      const T2 = '2026-11-27T10:05:00.000Z';
      // 230 of them, in no order, more than two statements' worth; a later time for the first 20 after.
      const marked = many.slice(20).map((c) => secretOf.get(c.id)!);
      await store.markSecretsUsed([...marked].reverse(), T2);
      await store.markSecretsUsed(
        many.slice(0, 40).map((c) => secretOf.get(c.id)!),
        T1,
      );
      const lastUsed = new Map(
        (await store.findClients(many.map((c) => c.id))).map((c) => [c.id, c.secrets[0]!.lastUsedAt]),
      );
      for (const [i, c] of many.entries()) expect(lastUsed.get(c.id), c.id).toBe(i < 20 ? T1 : T2);
      await store.markSecretsUsed([], T2);
    });

    it('createClients writes nothing when an id is taken, given twice, or an audience is unknown', async () => {
      await store.createClient(newClient('taken', [A]));
      const batch = (ids: string[], audiences = [A]) =>
        store.createClients(ids.map((id) => ({ client: newClient(id, audiences) })));
      const ids = Array.from({ length: 700 }, (_, i) => `new-${i}`);
      const taken = await expectNoChange(store, () => batch([...ids, 'taken', 'new-x']));
      expect([taken.code, taken.message]).toEqual(['conflict', 'client taken already exists']);
      const twice = await expectNoChange(store, () => batch([...ids, 'new-3']));
      expect([twice.code, twice.message]).toEqual(['conflict', 'client new-3 already exists']);
      const unknown = await expectNoChange(store, () => batch(ids, [A, 'https://unknown.example.com']));
      expect(unknown.code).toBe('not_found');
      expect(unknown.message).toContain('https://unknown.example.com');
      expect(await store.countClients()).toBe(1);
      await store.createClients([]);
      expect(await store.countClients()).toBe(1);
    });

    it('finds nothing for an unknown id; ids are case-sensitive', async () => {
      await store.createClient(newClient('svc'));
      expect(await store.findClient('nobody')).toBeUndefined();
      expect(await store.findClient('SVC')).toBeUndefined();
    });

    it('lists every client with its grants and counts them', async () => {
      const one = await store.createClient(newClient('one', [B, A]));
      clock.advance(1000);
      const two = await store.createClient(newClient('two'));
      clock.advance(1000);
      const three = await store.createClient(newClient('three', [C]));
      const listed = await store.listClients();
      expect([...listed].sort((x, y) => x.id.localeCompare(y.id))).toEqual([one, three, two]);
      expect(await store.countClients()).toBe(3);
    });

    it('a private_key_jwt client: its method and keys are kept, it has no secret; updateClient changes them', async () => {
      const jwks = {
        keys: [{ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo', kid: 'k1' }],
      };
      const created = await store.createClient(
        newClient('kj', [A], { secretDigest: null, authMethod: 'private_key_jwt', jwks }),
      );
      expect(created).toMatchObject({ authMethod: 'private_key_jwt', jwks, jwksUri: null, secrets: [] });
      expect(await store.findClient('kj')).toEqual(created);
      const moved = await store.updateClient('kj', {
        jwks: null,
        jwksUri: 'https://keys.example.com/jwks',
      });
      expect(moved).toMatchObject({
        authMethod: 'private_key_jwt',
        jwks: null,
        jwksUri: 'https://keys.example.com/jwks',
      });
      expect((await store.listClients()).find((c) => c.id === 'kj')).toEqual(moved);
      const secretClient = await store.createClient(newClient('sc'));
      expect(secretClient).toMatchObject({ authMethod: 'client_secret_basic', jwks: null, jwksUri: null });
      expect(secretClient.secrets).toHaveLength(1);
      // A change of method and keys with a change of the secrets (a switch to keys): one write, one change.
      const switched = await expectChanges(
        store,
        () =>
          store.updateClient('sc', { authMethod: 'private_key_jwt', jwks }, undefined, {
            delete: secretClient.secrets.map((s) => s.id),
          }),
        [['client', 'sc']],
      );
      expect(switched).toMatchObject({ authMethod: 'private_key_jwt', jwks, secrets: [] });
      expect((await store.findClient('sc'))!.secrets).toEqual([]);
      // Without one, the secrets stay: what goes with a switch is the management layer's rule.
      const other = await store.createClient(newClient('sc2'));
      const kept = await store.updateClient('sc2', { authMethod: 'private_key_jwt', jwks });
      expect(kept).toMatchObject({ authMethod: 'private_key_jwt', secrets: other.secrets });
    });

    it('useAssertionJti: a new id is taken, the same one again is a replay until its time is over', async () => {
      const now = clock.now();
      expect(await store.useAssertionJti('jti-a', now + 60_000)).toBe(true);
      expect(await store.useAssertionJti('jti-a', now + 60_000)).toBe(false);
      expect(await store.useAssertionJti('jti-b', now + 1_000)).toBe(true);
      clock.advance(1_000);
      // jti-b's time is over: taken again (a new assertion may reuse an id once the old one is worthless).
      expect(await store.useAssertionJti('jti-b', now + 120_000)).toBe(true);
      expect(await store.useAssertionJti('jti-b', now + 120_000)).toBe(false);
      expect(await store.useAssertionJti('jti-a', now + 60_000)).toBe(false);
      expect(await store.useAssertionJti('jti-c', now + 2_000)).toBe(true);
      expect(await store.useAssertionJti('jti-d', now + 3_000)).toBe(true);
      // At most `limit` a statement: jti-a, jti-c and jti-d are over by now + 60 s, two go, then the third.
      expect(await store.pruneAssertionJtis(now + 60_000, 2)).toBe(2);
      expect(await store.pruneAssertionJtis(now + 60_000, 2)).toBe(1);
      expect(await store.pruneAssertionJtis(now + 60_000, 2)).toBe(0);
      expect(await store.useAssertionJti('jti-a', now + 90_000)).toBe(true);
    });

    it('useAssertionJtis: several in one transaction, in order: an id given twice is a replay the second time', async () => {
      const now = clock.now();
      expect(await store.useAssertionJti('many-a', now + 1_000)).toBe(true);
      expect(
        await store.useAssertionJtis([
          { id: 'many-b', expiresAt: now + 60_000 },
          { id: 'many-a', expiresAt: now + 60_000 },
          { id: 'many-b', expiresAt: now + 60_000 },
          { id: 'many-c', expiresAt: now + 60_000 },
        ]),
      ).toEqual([true, false, false, true]);
      expect(await store.useAssertionJtis([])).toEqual([]);
      clock.advance(1_000);
      // many-a's time is over: taken again, and then in use.
      expect(
        await store.useAssertionJtis([
          { id: 'many-a', expiresAt: now + 120_000 },
          { id: 'many-a', expiresAt: now + 120_000 },
          { id: 'many-c', expiresAt: now + 120_000 },
        ]),
      ).toEqual([true, false, false]);
      expect(await store.useAssertionJti('many-b', now + 60_000)).toBe(false);
    });

    it('changeSecrets adds a secret: the current digest, updated_at and secret_rotated_at follow it', async () => {
      const created = await store.createClient(newClient('svc', [A]));
      const [first] = created.secrets;
      clock.advance(60_000);
      const at = clock.iso();
      const second = { id: 'sec_second', digest: DIGEST_2, createdAt: at, expiresAt: null };
      const updated = await expectChanges(store, () => store.changeSecrets('svc', { add: second }), [
        ['client', 'svc'],
      ]);
      const expected = {
        ...created,
        secretDigest: DIGEST_2,
        updatedAt: at,
        secretRotatedAt: at,
        // The store adds and keeps: the first one stays as it was (the rules are the management layer's).
        secrets: [first, { ...second, lastUsedAt: null }],
      };
      expect(updated).toEqual(expected);
      expect(await store.findClient('svc')).toEqual(expected);
      // A secret made earlier than the write's own time keeps its time: secret_rotated_at is the secret's.
      clock.advance(1000);
      const third = {
        id: 'sec_third',
        digest: DIGEST_1,
        createdAt: at,
        expiresAt: '2031-01-01T00:00:00.000Z',
      };
      expect(await store.changeSecrets('svc', { add: third })).toMatchObject({
        secretDigest: DIGEST_1,
        secretRotatedAt: at,
        updatedAt: clock.iso(),
      });
    });

    it('changeSecrets deletes, expires and adds in one write, with its audit event; the digest stays without an add', async () => {
      const created = await store.createClient(newClient('svc', [A]));
      const at = clock.iso();
      const add = (id: string) => ({ id, digest: DIGEST_2, createdAt: at, expiresAt: null });
      await store.changeSecrets('svc', { add: add('sec_b') });
      await store.changeSecrets('svc', { add: add('sec_c') });
      clock.advance(1000);
      const audit: ChangeAudit = {
        type: 'client.secret_rotated',
        actor: 'cli:test',
        source: null,
        target: 'svc',
        changes: { secret_id: 'sec_d' },
      };
      const until = '2030-02-01T00:00:00.000Z';
      const changed = await expectChanges(
        store,
        () =>
          store.changeSecrets(
            'svc',
            { delete: [created.secrets[0]!.id], expire: { ids: ['sec_b'], at: until }, add: add('sec_d') },
            audit,
          ),
        [['client', 'svc']],
      );
      expect(changed.secrets.map((s) => [s.id, s.expiresAt])).toEqual([
        ['sec_b', until],
        ['sec_c', null],
        ['sec_d', null],
      ]);
      const [event] = await store.queryAuditEvents({ limit: 1 });
      expect(event).toEqual({ id: expect.any(Number), ...changeEventAt(clock.iso(), audit) });
      // Without a new secret, the client's current digest and rotation time stay; updated_at moves.
      clock.advance(1000);
      const revoked = await store.changeSecrets('svc', { delete: ['sec_d'] });
      expect(revoked).toMatchObject({
        secretDigest: DIGEST_2,
        secretRotatedAt: at,
        updatedAt: clock.iso(),
      });
      expect(revoked.secrets.map((s) => s.id)).toEqual(['sec_b', 'sec_c']);
      expect(await store.findClient('svc')).toEqual(revoked);
    });

    it('changeSecrets refuses a secret the client does not have (not_found, secret) and writes nothing', async () => {
      await store.createClient(newClient('svc', [A]));
      await store.createClient(newClient('other', [A]));
      const before = await store.findClient('svc');
      const theirs = (await store.findClient('other'))!.secrets[0]!.id;
      const add = { id: 'sec_new', digest: DIGEST_2, createdAt: clock.iso(), expiresAt: null };
      for (const change of [
        { delete: ['sec_nothing'], add },
        { delete: [theirs] },
        { expire: { ids: ['sec_nothing'], at: clock.iso() } },
      ]) {
        const missing = change.delete?.[0] ?? 'sec_nothing';
        const error = await expectNoChange(store, () => store.changeSecrets('svc', change));
        expect(error).toMatchObject({
          code: 'not_found',
          resource: 'secret',
          message: `client svc has no secret ${missing}`,
        });
      }
      expect(await store.findClient('svc')).toEqual(before);
      expect((await store.findClient('other'))!.secrets).toHaveLength(1);
    });

    it('updateClient enabled toggles the flag and stamps updated_at only', async () => {
      const created = await store.createClient(newClient('svc', [A, B]));
      clock.advance(60_000);
      const disabledAt = clock.iso();
      const disabled = await expectChanges(store, () => store.updateClient('svc', { enabled: false }), [
        ['client', 'svc'],
      ]);
      expect(disabled).toEqual({ ...created, enabled: false, updatedAt: disabledAt });
      expect(await store.findClient('svc')).toEqual(disabled);
      clock.advance(60_000);
      const enabledAt = clock.iso();
      const enabled = await store.updateClient('svc', { enabled: true });
      expect(enabled).toEqual({ ...created, enabled: true, updatedAt: enabledAt });
      expect((await store.listClients())[0]).toEqual(enabled);
    });

    it('updateClient sets and clears the per-minute and per-day quotas', async () => {
      await store.createClient({ ...newClient('q', [A]), quotaPerMinute: 5 });
      expect(await store.findClient('q')).toMatchObject({ quotaPerMinute: 5, quotaPerDay: null });
      const updated = await store.updateClient('q', { quotaPerMinute: null, quotaPerDay: 1000 });
      expect(updated).toMatchObject({ quotaPerMinute: null, quotaPerDay: 1000 });
      expect(await store.findClient('q')).toEqual(updated);
    });

    it('dpopBoundAccessTokens: false unless a client is created with it; updateClient sets and clears it', async () => {
      await store.createClient({ ...newClient('d', [A]), dpopBoundAccessTokens: true });
      expect(await store.findClient('d')).toMatchObject({ dpopBoundAccessTokens: true });
      expect((await store.findClients(['d']))[0]).toMatchObject({ dpopBoundAccessTokens: true });
      const cleared = await store.updateClient('d', { dpopBoundAccessTokens: false });
      expect(cleared).toMatchObject({ dpopBoundAccessTokens: false });
      expect(await store.findClient('d')).toEqual(cleared);
      expect(await store.updateClient('d', { dpopBoundAccessTokens: true })).toMatchObject({
        dpopBoundAccessTokens: true,
      });
      // A change of another field keeps it.
      expect(await store.updateClient('d', { name: 'renamed' })).toMatchObject({
        dpopBoundAccessTokens: true,
      });
      expect((await store.listClients()).find((c) => c.id === 'd')).toMatchObject({
        dpopBoundAccessTokens: true,
      });
    });

    it('refuses to update an unknown client (not_found)', async () => {
      const secret = { id: 'sec_x', digest: DIGEST_2, createdAt: clock.iso(), expiresAt: null };
      expect(await expectNoChange(store, () => store.changeSecrets('nobody', { add: secret }))).toMatchObject(
        { code: 'not_found', resource: 'client' },
      );
      expect((await expectNoChange(store, () => store.updateClient('nobody', { enabled: false }))).code).toBe(
        'not_found',
      );
      expect(await store.countClients()).toBe(0);
    });

    it('deletes a client with its grants', async () => {
      await store.createClient(newClient('gone', [A, B]));
      await store.createClient(newClient('stays', [A]));
      await expectChanges(store, () => store.deleteClient('gone'), [['client', 'gone']]);
      expect(await store.findClient('gone')).toBeUndefined();
      expect(await store.countClients()).toBe(1);
      expect((await store.listClients()).map((c) => [c.id, c.audiences])).toEqual([['stays', [A]]]);
      // The audiences are untouched, and the id can be used again, without any grant of the old one.
      expect(await store.listAudiences()).toHaveLength(3);
      expect((await store.createClient(newClient('gone'))).audiences).toEqual([]);
      expect((await store.findClient('gone'))?.audiences).toEqual([]);
    });

    it('creates a client with a description and the scopes of its grants, sorted, each once', async () => {
      const at = clock.iso();
      const created = await store.createClient(
        newClient('scoped', [C, A, B], {
          description: 'Billing backend',
          scopes: { [B]: ['write', 'read', 'write', 'admin'], [A]: [] },
        }),
      );
      const expected = {
        id: 'scoped',
        name: 'client scoped',
        description: 'Billing backend',
        secretDigest: DIGEST_1,
        enabled: true,
        tokenTtl: null,
        createdAt: at,
        updatedAt: at,
        secretRotatedAt: at,
        quotaPerMinute: null,
        quotaPerDay: null,
        claims: null,
        authMethod: 'client_secret_basic',
        jwks: null,
        jwksUri: null,
        federatedCredentials: [],
        dpopBoundAccessTokens: false,
        revokedBefore: null,
        tlsClientAuth: null,
        certificateBoundAccessTokens: false,
        secrets: [
          {
            id: expect.stringMatching(/^sec_/),
            digest: DIGEST_1,
            createdAt: at,
            expiresAt: null,
            lastUsedAt: null,
          },
        ],
        audiences: [A, B, C],
        grants: [
          { audience: A, scopes: [], claims: null, tokenExchange: false },
          { audience: B, scopes: ['admin', 'read', 'write'], claims: null, tokenExchange: false },
          { audience: C, scopes: [], claims: null, tokenExchange: false },
        ],
      };
      expect(created).toEqual(expected);
      expect(await store.findClient('scoped')).toEqual(expected);
      expect(await store.findClients(['scoped'])).toEqual([expected]);
      expect(await store.listClients()).toEqual([expected]);
      expect(await store.listClientsPage(null, 10)).toEqual([expected]);
    });

    it('updateClient sets a description, keeps it when not given, and clears it to null', async () => {
      const created = await store.createClient(newClient('d', [A], { description: 'first' }));
      expect(created.description).toBe('first');
      clock.advance(1000);
      const changed = await expectChanges(store, () => store.updateClient('d', { description: 'second' }), [
        ['client', 'd'],
      ]);
      expect(changed).toEqual({ ...created, description: 'second', updatedAt: clock.iso() });
      expect(await store.findClient('d')).toEqual(changed);

      clock.advance(1000);
      const renamed = await store.updateClient('d', { name: 'renamed' });
      expect(renamed).toEqual({ ...changed, name: 'renamed', updatedAt: clock.iso() });

      clock.advance(1000);
      const cleared = await expectChanges(store, () => store.updateClient('d', { description: null }), [
        ['client', 'd'],
      ]);
      expect(cleared).toEqual({ ...renamed, description: null, updatedAt: clock.iso() });
      expect(await store.findClient('d')).toEqual(cleared);

      // An empty description is a description, not null.
      const empty = await store.updateClient('d', { description: '' });
      expect(empty.description).toBe('');
      expect((await store.findClient('d'))?.description).toBe('');
    });

    it('listClientsPage pages by id (code-unit order): strictly after `after`, at most `limit`, with grants', async () => {
      expect(await store.listClientsPage(null, 10)).toEqual([]);
      // Created out of id order, a second apart: listClients' order (creation) is not the page order.
      await store.createClient(newClient('svc-c', [B, A], { scopes: { [A]: ['read'] } }));
      clock.advance(1000);
      await store.createClient(newClient('Svc-z'));
      clock.advance(1000);
      await store.createClient(newClient('svc-a', [C]));
      clock.advance(1000);
      await store.createClient(newClient('svc-b', [A, B, C], { scopes: { [C]: ['y', 'x'] } }));
      clock.advance(1000);
      await store.createClient(newClient('svc-a-1', [A]));
      const ids = ['Svc-z', 'svc-a', 'svc-a-1', 'svc-b', 'svc-c'];
      const all = await Promise.all(ids.map(async (id) => (await store.findClient(id))!));
      expect(all.map((c) => c.id)).toEqual(ids);
      expect(all[3]!.grants).toEqual([
        { audience: A, scopes: [], claims: null, tokenExchange: false },
        { audience: B, scopes: [], claims: null, tokenExchange: false },
        { audience: C, scopes: ['x', 'y'], claims: null, tokenExchange: false },
      ]);
      expect(all[4]!.grants).toEqual([
        { audience: A, scopes: ['read'], claims: null, tokenExchange: false },
        { audience: B, scopes: [], claims: null, tokenExchange: false },
      ]);

      const first = await store.listClientsPage(null, 2);
      expect(first).toEqual(all.slice(0, 2));
      const second = await store.listClientsPage(first[1]!.id, 2);
      expect(second).toEqual(all.slice(2, 4));
      const third = await store.listClientsPage(second[1]!.id, 2);
      expect(third).toEqual(all.slice(4));
      expect(await store.listClientsPage(third[0]!.id, 2)).toEqual([]);

      expect(await store.listClientsPage(null, 5)).toEqual(all);
      expect(await store.listClientsPage(null, 100)).toEqual(all);
      expect(await store.listClientsPage(null, 1)).toEqual(all.slice(0, 1));
      // Strictly after: the client named by `after` is not on the page.
      expect(await store.listClientsPage('svc-a', 10)).toEqual(all.slice(2));
      expect(await store.listClientsPage('Svc-z', 1)).toEqual(all.slice(1, 2));
      // `after` need not be a client's id; '' is an id before every other, not "from the start" by accident.
      expect(await store.listClientsPage('svc-b0', 10)).toEqual(all.slice(4));
      expect(await store.listClientsPage('', 3)).toEqual(all.slice(0, 3));
      expect(await store.listClientsPage('svc-d', 10)).toEqual([]);
    });

    it('listClientsPage with `search`: a substring of the id or the name, any ASCII case, %, _ and \\ literally, with `after` and `limit`', async () => {
      // [id, name]: created out of id order.
      const made: (readonly [string, string])[] = [
        ...SEARCHED_CLIENTS,
        ['svc-0', 'zero'],
        ['svc-a', 'Alpha'],
      ];
      for (const [id, name] of made) {
        await store.createClient(newClient(id, id === 'svc-a' ? [A] : [], { name }));
        clock.advance(1000);
      }
      const page = async (after: string | null, limit: number, search?: string) =>
        (await store.listClientsPage(after, limit, search)).map((c) => c.id);

      // In id order (code units: upper case first), whichever of id and name matched.
      expect(await page(null, 100, 'bill')).toEqual(['Billing-1', 'svc-zeta']);
      expect(await page(null, 100, 'BILL')).toEqual(['Billing-1', 'svc-zeta']);
      expect(await page(null, 100, 'bIlLiNg-')).toEqual(['Billing-1']);
      expect(await page(null, 100, 'SVC-S')).toEqual(['svc-slash', 'svc-snake']);
      expect(await page(null, 100, 'ALPHA')).toEqual(['svc-a']);
      expect(await page(null, 100, 'nobody')).toEqual([]);
      // LIKE's wildcards are plain characters: % is not "anything", _ is not "one character".
      expect(await page(null, 100, '%')).toEqual(['svc-pct']);
      expect(await page(null, 100, '0%')).toEqual(['svc-pct']);
      expect(await page(null, 100, '_')).toEqual(['pay_ment', 'svc-snake']);
      expect(await page(null, 100, 'e_c')).toEqual(['svc-snake']);
      expect(await page(null, 100, 'y_m')).toEqual(['pay_ment']);
      // A backslash is itself too, alone, before a letter, or before a wildcard.
      expect(await page(null, 100, '\\')).toEqual(['svc-slash']);
      expect(await page(null, 100, ':\\t')).toEqual(['svc-slash']);
      expect(await page(null, 100, '\\%')).toEqual([]);
      expect(await page(null, 100, '\\_')).toEqual([]);
      // Combined with `after` (strictly after, by id) and `limit`.
      const svc = ['svc-0', 'svc-a', 'svc-pct', 'svc-slash', 'svc-snake', 'svc-three', 'svc-zeta'];
      expect(await page(null, 100, 'svc-')).toEqual(svc);
      expect(await page(null, 3, 'svc-')).toEqual(svc.slice(0, 3));
      expect(await page('svc-pct', 3, 'svc-')).toEqual(svc.slice(3, 6));
      expect(await page('svc-three', 3, 'svc-')).toEqual(svc.slice(6));
      expect(await page('svc-zeta', 3, 'svc-')).toEqual([]);
      expect(await page('Billing-1', 100, 'bill')).toEqual(['svc-zeta']);
      expect(await page('svc-pct', 100, '%')).toEqual([]);
      // An empty search is no search.
      expect(await store.listClientsPage(null, 100, '')).toEqual(await store.listClientsPage(null, 100));
      // The clients found are whole: grants and secrets, as findClient has them.
      expect(await store.listClientsPage('pay_ment', 2, 'SVC-')).toEqual([
        await store.findClient('svc-0'),
        await store.findClient('svc-a'),
      ]);
      expect((await store.findClient('svc-a'))?.audiences).toEqual([A]);
    });

    it('listClientIds pages through every id in code-unit order: strictly after `after`, at most `limit`, ids only', async () => {
      expect(await store.listClientIds(null, 10)).toEqual([]);
      // Created out of id order, some of them with grants and a key method: only the ids come back.
      const made = ['svc-c', 'Svc-z', 'svc-a', 'b.2~x', 'svc-a-1', '0_first', 'svc-b'];
      for (const [i, id] of made.entries()) {
        await store.createClient(
          newClient(
            id,
            i % 2 === 0 ? [A, B] : [],
            i === 3
              ? {
                  secretDigest: null,
                  authMethod: 'private_key_jwt',
                  jwksUri: 'https://keys.example.com/jwks',
                }
              : {},
          ),
        );
        clock.advance(1000);
      }
      const ids = ['0_first', 'Svc-z', 'b.2~x', 'svc-a', 'svc-a-1', 'svc-b', 'svc-c'];
      expect(await store.listClientIds(null, 100)).toEqual(ids);
      expect(await store.listClientIds(null, 7)).toEqual(ids);
      // Page by page, each starting after the last id of the one before.
      const pages: string[][] = [];
      for (let after: string | null = null; ;) {
        const page = await store.listClientIds(after, 3);
        pages.push(page);
        if (page.length < 3) break;
        after = page[2]!;
      }
      expect(pages).toEqual([ids.slice(0, 3), ids.slice(3, 6), ids.slice(6)]);
      // `after` need not be a client's id; '' is before every id.
      expect(await store.listClientIds('svc-a', 10)).toEqual(ids.slice(4));
      expect(await store.listClientIds('svc-a-0', 1)).toEqual(['svc-a-1']);
      expect(await store.listClientIds('', 2)).toEqual(ids.slice(0, 2));
      expect(await store.listClientIds('svc-c', 10)).toEqual([]);
      // A deleted client's id is gone; a client created afterwards is there, in its place in the order.
      await store.deleteClient('svc-a');
      await store.createClient(newClient('a-late'));
      expect(await store.listClientIds(null, 100)).toEqual([
        '0_first',
        'Svc-z',
        'a-late',
        'b.2~x',
        'svc-a-1',
        'svc-b',
        'svc-c',
      ]);
      expect(await store.listClientIds(null, 100)).toEqual(
        (await store.listClientsPage(null, 100)).map((c) => c.id),
      );
    });

    it('refuses to delete an unknown client (not_found)', async () => {
      expect((await expectNoChange(store, () => store.deleteClient('nobody'))).code).toBe('not_found');
    });
  });
}
