import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SEARCHED_CLIENTS } from '../helpers/expected.js';
import { rejection } from '../helpers/assert.js';
import { stillClock, type TestClock } from '../helpers/clock.js';
import {
  AUDIT_BATCH,
  StoreError,
  type AuditCursor,
  type AuditEvent,
  type AuditFilter,
  type AuditRecord,
  type Change,
  type ChangeAudit,
  type Client,
  type KeyChange,
  type NewClient,
  type NewOperator,
  type Operator,
  type OperatorSession,
  type SigningKey,
  type Store,
} from '../../src/store/types.js';

/**
 * Opens a store on a fresh, empty, unmigrated database. The store must take its time from `now` when given
 * (every engine's factory accepts an injected clock), so that timestamps and pruning can be asserted exactly.
 */
/** A change event as it reads back (without its id), written at `at`. */
const changeEventAt = (at: string, a: ChangeAudit) => ({
  at,
  type: a.type,
  clientId: null,
  audience: null,
  jti: null,
  reason: a.reason ?? null,
  source: a.source,
  count: null,
  actor: a.actor,
  target: a.target,
  changes: a.changes,
});

export type OpenStore = (now?: () => Date) => Promise<Store>;

const A = 'https://api.a.example.com';
const B = 'https://api.b.example.com';
const C = 'https://api.c.example.com';
const DIGEST_1 = 'sha256:' + Buffer.alloc(32, 1).toString('base64url');
const DIGEST_2 = 'sha256:' + Buffer.alloc(32, 2).toString('base64url');

const newClient = (id: string, audiences: string[] = [], extra: Partial<NewClient> = {}): NewClient => ({
  id,
  name: `client ${id}`,
  secretDigest: DIGEST_1,
  tokenTtl: null,
  audiences,
  ...extra,
});

/** Resolves to the StoreError a promise rejected with; fails the test if it resolved or threw something else. */
function storeError(promise: Promise<unknown>): Promise<StoreError> {
  return rejection(promise, StoreError);
}

/** The changes recorded after `seq`, as [entity, key] pairs. */
async function changesAfter(store: Store, seq: number): Promise<[string, string][]> {
  return (await store.changesSince(seq, 1000)).map((c) => [c.entity, c.key]);
}

/** Runs `write` and asserts that it appended exactly the given changes, and returns what it resolved to. */
async function expectChanges<T>(
  store: Store,
  write: () => Promise<T>,
  expected: [string, string][],
): Promise<T> {
  const before = await store.latestChange();
  const result = await write();
  expect(await changesAfter(store, before)).toEqual(expected);
  return result;
}

/** Runs a write that must fail and asserts that it appended no change. */
async function expectNoChange(store: Store, write: () => Promise<unknown>): Promise<StoreError> {
  const before = await store.latestChange();
  const error = await storeError(write());
  expect(await changesAfter(store, before)).toEqual([]);
  return error;
}

function signingKey(kid: string, extra: Partial<SigningKey> = {}): SigningKey {
  return {
    kid,
    alg: 'ES256',
    publicJwk: JSON.stringify({ kty: 'EC', crv: 'P-256', x: `x-${kid}`, y: `y-${kid}` }),
    privateJwkSealed: `sealed-${kid}`,
    createdAt: '2030-01-01T00:00:00.000Z',
    activatesAt: '2030-01-01T00:00:00.000Z',
    retiredAt: null,
    ...extra,
  };
}

/**
 * The behaviour every Store implementation shares. Uses only the Store interface, so that it runs unchanged
 * on every engine (SQLite now, PostgreSQL later).
 */
export function storeContract(name: string, open: OpenStore): void {
  describe(`Store contract: ${name}`, () => {
    let clock: TestClock;
    let store: Store;

    beforeEach(async () => {
      clock = stillClock();
      store = await open(clock.date);
      await store.migrate();
    });

    afterEach(async () => {
      await store.close();
    });

    describe('migrate, ping', () => {
      it('runs every migration once on a fresh database, and nothing the second time', async () => {
        const fresh = await open(clock.date);
        try {
          expect(await fresh.migrate()).toEqual([
            '0001_initial',
            '0002_audit_events',
            '0003_client_quotas',
            '0004_compact_audit',
            '0005_change_audit',
            '0006_ids_and_scopes',
            '0007_custom_claims',
            '0008_client_secrets',
            '0009_private_key_jwt',
            '0010_console',
            '0011_typed_actors',
            '0012_federated_credentials',
            '0013_dpop_bound_access_tokens',
            '0014_revocation',
            '0015_token_exchange',
            '0016_client_deletions',
          ]);
          expect(await fresh.migrate()).toEqual([]);
          expect(await fresh.migrate()).toEqual([]);
        } finally {
          await fresh.close();
        }
      });

      it('0011 gives the actors of earlier events their kind: client:<id>, and none for an anonymous login', async () => {
        const fresh = await open(clock.date);
        try {
          await fresh.migrate('0010_console');
          const written: [string, string | null, ChangeAudit['type']][] = [
            // [actor as recorded before, its source, type]
            ['ops-client', '10.0.0.1', 'client.updated'],
            ['tessera', null, 'key.rotated'], // the server itself (no address)
            ['tessera', '10.0.0.2', 'client.created'], // an admin client whose id is tessera
            ['anonymous', '10.0.0.3', 'operator.login_failed'], // a failed login for an unknown email
            ['anonymous', '10.0.0.4', 'grant.updated'], // an admin client whose id is anonymous
            ['cli:root', null, 'audience.created'],
            ['operator:ann@example.com', '10.0.0.5', 'operator.login'],
          ];
          for (const [actor, source, type] of written) {
            clock.advance(1000);
            await fresh.recordEvent({ type, actor, source, target: null, changes: null });
          }
          expect(await fresh.migrate()).toEqual([
            '0011_typed_actors',
            '0012_federated_credentials',
            '0013_dpop_bound_access_tokens',
            '0014_revocation',
            '0015_token_exchange',
            '0016_client_deletions',
          ]);
          const events = await fresh.queryAuditEvents({ limit: 10 });
          expect(events.reverse().map((e) => [e.actor, e.source, e.type])).toEqual([
            ['client:ops-client', '10.0.0.1', 'client.updated'],
            ['tessera', null, 'key.rotated'],
            ['client:tessera', '10.0.0.2', 'client.created'],
            [null, '10.0.0.3', 'operator.login_failed'],
            ['client:anonymous', '10.0.0.4', 'grant.updated'],
            ['cli:root', null, 'audience.created'],
            ['operator:ann@example.com', '10.0.0.5', 'operator.login'],
          ]);
        } finally {
          await fresh.close();
        }
      });

      it('answers ping', async () => {
        await expect(store.ping()).resolves.toBeUndefined();
      });

      it('starts empty', async () => {
        expect(await store.listAudiences()).toEqual([]);
        expect(await store.listClients()).toEqual([]);
        expect(await store.countClients()).toBe(0);
        expect(await store.listSigningKeys()).toEqual([]);
        expect(await store.latestChange()).toBe(0);
        expect(await store.changesSince(0, 100)).toEqual([]);
      });
    });

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
          createdAt: at,
          updatedAt: at,
        };
        expect(added).toEqual(expected);
        expect(await store.findAudience(A)).toEqual(expected);
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
        for (const url of urls)
          await store.addAudience({ url, name: null, tokenTtl: null, signingAlg: null });
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
        for (const id of ['svc-1', 'svc-2', 'lonely'])
          expect(byId.get(id)).toEqual(await store.findClient(id));
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
        expect(
          await expectNoChange(store, () => store.changeSecrets('nobody', { add: secret })),
        ).toMatchObject({ code: 'not_found', resource: 'client' });
        expect(
          (await expectNoChange(store, () => store.updateClient('nobody', { enabled: false }))).code,
        ).toBe('not_found');
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

    describe('grants', () => {
      beforeEach(async () => {
        for (const url of [A, B])
          await store.addAudience({ url, name: null, tokenTtl: null, signingAlg: null });
        await store.createClient(newClient('svc', [A]));
      });

      it('adds a grant once: true, then false with no change recorded', async () => {
        expect(await expectChanges(store, () => store.addGrant('svc', B), [['grant', `svc ${B}`]])).toBe(
          true,
        );
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
          store.putGrant(
            'svc',
            'https://unknown.example.com',
            ['read'],
            audit('https://unknown.example.com'),
          ),
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

    describe('signing keys', () => {
      it('inserts keys and lists them oldest first, every field as given', async () => {
        const newer = signingKey('kid-new', {
          alg: 'EdDSA',
          createdAt: '2030-01-03T00:00:00.000Z',
          activatesAt: '2030-01-04T00:00:00.000Z',
        });
        const older = signingKey('kid-old', {
          alg: 'RS256',
          createdAt: '2030-01-01T00:00:00.000Z',
          activatesAt: '2030-01-01T00:00:00.000Z',
          retiredAt: '2030-01-04T00:00:00.000Z',
        });
        // A change of the keys is recorded as one of them all: followers reload every key.
        await expectChanges(store, () => store.changeSigningKeys(() => ({ insert: newer })), [['key', '*']]);
        await expectChanges(store, () => store.changeSigningKeys(() => ({ insert: older })), [['key', '*']]);
        expect(await store.listSigningKeys()).toEqual([older, newer]);
      });

      it('orders keys created at the same time by kid', async () => {
        await store.changeSigningKeys(() => ({ insert: signingKey('b') }));
        await store.changeSigningKeys(() => ({ insert: signingKey('a') }));
        expect((await store.listSigningKeys()).map((k) => k.kid)).toEqual(['a', 'b']);
      });

      it('refuses a second key with the same kid, and records no change', async () => {
        await store.changeSigningKeys(() => ({ insert: signingKey('same') }));
        const before = await store.latestChange();
        await expect(
          store.changeSigningKeys(() => ({ insert: signingKey('same', { alg: 'PS256' }) })),
        ).rejects.toThrow();
        expect(await store.latestChange()).toBe(before);
        expect(await store.listSigningKeys()).toEqual([signingKey('same')]);
      });
      it('changeSigningKeys: the plan reads the keys; its times are set, in one write with its event', async () => {
        await store.changeSigningKeys(() => ({ insert: signingKey('k1') }));
        const seen: string[][] = [];
        const audit = (change: KeyChange): ChangeAudit => ({
          type: 'key.rotated',
          actor: 'tessera',
          source: null,
          target: change.insert?.kid ?? null,
          changes: null,
        });
        const k2 = signingKey('k2', { activatesAt: '2030-01-05T00:00:00.000Z' });
        const change = { insert: k2, update: [{ kid: 'k1', retiredAt: '2030-01-06T00:00:00.000Z' }] };
        const written = await expectChanges(
          store,
          () =>
            store.changeSigningKeys((keys) => {
              seen.push(keys.map((k) => k.kid));
              return change;
            }, audit),
          [['key', '*']],
        );
        expect(written).toEqual(change);
        expect(seen).toEqual([['k1']]);
        expect(await store.listSigningKeys()).toEqual([
          signingKey('k1', { retiredAt: '2030-01-06T00:00:00.000Z' }),
          k2,
        ]);
        expect((await store.queryAuditEvents({ limit: 10 })).map((e) => [e.type, e.target])).toEqual([
          ['key.rotated', 'k2'],
        ]);
        // retiredAt null cancels a retirement; activatesAt moves.
        await store.changeSigningKeys(() => ({
          update: [
            { kid: 'k1', retiredAt: null },
            { kid: 'k2', activatesAt: '2030-01-07T00:00:00.000Z' },
          ],
        }));
        expect(await store.listSigningKeys()).toEqual([
          signingKey('k1'),
          { ...k2, activatesAt: '2030-01-07T00:00:00.000Z' },
        ]);
        // A plan that makes nothing writes nothing, not even a change.
        const before = await store.latestChange();
        expect(await store.changeSigningKeys(() => undefined, audit)).toBeUndefined();
        expect(await store.changeSigningKeys(() => ({ update: [] }), audit)).toBeUndefined();
        expect(await store.latestChange()).toBe(before);
        // An update of a key that does not exist: not_found, and the whole plan is undone.
        const error = await expectNoChange(store, () =>
          store.changeSigningKeys(
            () => ({ insert: signingKey('k3'), update: [{ kid: 'nope', retiredAt: null }] }),
            audit,
          ),
        );
        expect(error).toMatchObject({ code: 'not_found', resource: 'signing_key' });
        expect((await store.listSigningKeys()).map((k) => k.kid)).toEqual(['k1', 'k2']);
        expect(await store.queryAuditEvents({ limit: 10 })).toHaveLength(1);
      });
    });

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
        for (const url of urls)
          await store.addAudience({ url, name: null, tokenTtl: null, signingAlg: null });
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
        expect(withoutIds(await store.queryAuditEvents(all))).toEqual(
          [4, 3, 2, 1].map((i) => read(record(i))),
        );
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
    describe('operators', () => {
      const T = '2030-01-02T03:04:05.006Z'; // the clock's start
      const DAY_LATER = '2030-01-03T03:04:05.006Z';
      const newOperator = (id: string, email: string, extra: Partial<NewOperator> = {}): NewOperator => ({
        id,
        email,
        role: 'admin',
        enrollDigest: `enroll-${id}`,
        enrollExpiresAt: DAY_LATER,
        ...extra,
      });
      const audit = (type: ChangeAudit['type'], target: string | null, extra: Partial<ChangeAudit> = {}) => ({
        type,
        actor: 'cli:test',
        source: null,
        target,
        changes: null,
        ...extra,
      });
      const events = async () =>
        (await store.queryAuditEvents({ limit: 100 })).map(({ id: _id, ...rest }) => rest);
      const session = (id: string, operatorId: string, extra: Partial<OperatorSession> = {}) => ({
        id,
        operatorId,
        createdAt: Date.parse(T),
        lastSeenAt: Date.parse(T),
        expiresAt: Date.parse(T) + 12 * 3600_000,
        source: '203.0.113.7',
        ...extra,
      });
      const sessionIds = async (...ids: string[]) => {
        const found: string[] = [];
        for (const id of ids) if (await store.findOperatorSession(id)) found.push(id);
        return found;
      };
      const added = (id: string, email: string, extra: Partial<Operator> = {}): Operator => ({
        id,
        email,
        role: 'admin',
        enabled: true,
        enrolled: false,
        enrollmentExpiresAt: DAY_LATER,
        lastLoginAt: null,
        createdAt: T,
        updatedAt: T,
        ...extra,
      });

      it('addOperator: enabled, not enrolled, its link open, both times from the clock, its event in the same write', async () => {
        const created = audit('operator.created', 'op_1', {
          changes: { email: 'ops@example.com', role: 'admin' },
        });
        const operator = await store.addOperator(newOperator('op_1', 'ops@example.com'), created);
        const expected = added('op_1', 'ops@example.com');
        expect(operator).toEqual(expected);
        expect(await store.findOperator('op_1')).toEqual(expected);
        expect(await store.findOperator('ops@example.com')).toEqual(expected);
        expect(await store.findOperatorCredentials('ops@example.com')).toEqual({
          operator: expected,
          passwordHash: null,
        });
        expect(await store.findOperatorByEnrollment('enroll-op_1')).toEqual(expected);
        expect(await store.listOperators()).toEqual([expected]);
        expect(await events()).toEqual([changeEventAt(T, created)]);
        // A viewer, without an audit event.
        const viewer = await store.addOperator(
          newOperator('op_2', 'viewer@example.com', {
            role: 'viewer',
            enrollExpiresAt: '2030-01-02T04:00:00.000Z',
          }),
        );
        expect(viewer).toEqual(
          added('op_2', 'viewer@example.com', {
            role: 'viewer',
            enrollmentExpiresAt: '2030-01-02T04:00:00.000Z',
          }),
        );
        expect(await store.findOperator('op_2')).toEqual(viewer);
        expect(await events()).toEqual([changeEventAt(T, created)]);
        // Operators are not tokens: the per-minute counts stay empty.
        expect(await store.tokenCounts(0, Date.parse('2100-01-01T00:00:00Z'))).toEqual([]);
      });

      it('addOperator refuses an email that is taken (conflict, operator), writes no event, keeps the first', async () => {
        const first = await store.addOperator(newOperator('op_1', 'ops@example.com'));
        clock.advance(1000);
        const error = await storeError(
          store.addOperator(
            newOperator('op_2', 'ops@example.com', { role: 'viewer' }),
            audit('operator.created', 'op_2'),
          ),
        );
        expect(error).toMatchObject({
          code: 'conflict',
          resource: 'operator',
          message: 'operator ops@example.com already exists',
        });
        expect(await store.listOperators()).toEqual([first]);
        expect(await store.findOperator('op_2')).toBeUndefined();
        expect(await store.findOperatorByEnrollment('enroll-op_2')).toBeUndefined();
        expect(await events()).toEqual([]);
      });

      it('addOperator: of two adds of one email at the same moment, exactly one succeeds', async () => {
        const results = await Promise.allSettled(
          ['op_1', 'op_2', 'op_3'].map((id) =>
            store.addOperator(newOperator(id, 'same@example.com'), audit('operator.created', id)),
          ),
        );
        const won = results.filter((r) => r.status === 'fulfilled');
        const lost = results.filter((r) => r.status === 'rejected');
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(2);
        for (const r of lost) {
          expect(r.reason).toBeInstanceOf(StoreError);
          expect(r.reason).toMatchObject({ code: 'conflict', resource: 'operator' });
        }
        const winner = (won[0] as PromiseFulfilledResult<Operator>).value;
        expect(await store.listOperators()).toEqual([winner]);
        expect((await events()).map((e) => e.target)).toEqual([winner.id]);
      });

      it('finds nothing for an unknown id, email or digest; credentials by email only', async () => {
        await store.addOperator(newOperator('op_1', 'ops@example.com'));
        expect(await store.findOperator('op_2')).toBeUndefined();
        expect(await store.findOperator('other@example.com')).toBeUndefined();
        expect(await store.findOperator('')).toBeUndefined();
        expect(await store.findOperatorCredentials('other@example.com')).toBeUndefined();
        expect(await store.findOperatorCredentials('op_1')).toBeUndefined();
        expect(await store.findOperatorByEnrollment('enroll-op_2')).toBeUndefined();
        expect(await store.findOperatorByEnrollment('op_1')).toBeUndefined();
      });

      it('listOperators: by email, in code-unit order, whatever the order they were added in', async () => {
        const emails = [
          'zed@example.com',
          'a.b@example.com',
          'a-b@example.com',
          'ab@example.com',
          'a_b@example.com',
        ];
        for (const [i, email] of emails.entries()) await store.addOperator(newOperator(`op_${i}`, email));
        expect((await store.listOperators()).map((o) => o.email)).toEqual([...emails].sort());
        expect([...emails].sort()).toEqual([
          'a-b@example.com',
          'a.b@example.com',
          'a_b@example.com',
          'ab@example.com',
          'zed@example.com',
        ]);
      });

      it('updateOperator sets the role and stamps updated_at, with its event; sessions stay', async () => {
        await store.addOperator(newOperator('op_1', 'ops@example.com'));
        await store.createOperatorSession(session('s1', 'op_1'));
        clock.advance(5000);
        const changed = audit('operator.updated', 'op_1', {
          changes: { role: { from: 'admin', to: 'viewer' } },
        });
        const updated = await store.updateOperator('op_1', { role: 'viewer' }, changed);
        const expected = added('op_1', 'ops@example.com', {
          role: 'viewer',
          lastLoginAt: T,
          updatedAt: clock.iso(),
        });
        expect(updated).toEqual(expected);
        expect(await store.findOperator('op_1')).toEqual(expected);
        expect(await sessionIds('s1')).toEqual(['s1']);
        expect(await events()).toEqual([changeEventAt(clock.iso(), changed)]);
        // enabled: true keeps the sessions too; a patch without a field keeps it.
        clock.advance(5000);
        const again = await store.updateOperator('op_1', { enabled: true });
        expect(again).toEqual({ ...expected, updatedAt: clock.iso() });
        expect(await sessionIds('s1')).toEqual(['s1']);
      });

      it('updateOperator enabled:false disables the operator, with its event; endOperatorSessions ends only theirs', async () => {
        await store.addOperator(newOperator('op_1', 'ops@example.com'));
        await store.addOperator(newOperator('op_2', 'other@example.com'));
        await store.createOperatorSession(session('s1', 'op_1'));
        await store.createOperatorSession(session('s2', 'op_1'));
        await store.createOperatorSession(session('s3', 'op_2'));
        const disabled = audit('operator.updated', 'op_1', {
          changes: { enabled: { from: true, to: false } },
        });
        clock.advance(1000);
        const updated = await store.updateOperator('op_1', { enabled: false }, disabled);
        expect(updated).toEqual(
          added('op_1', 'ops@example.com', { enabled: false, lastLoginAt: T, updatedAt: clock.iso() }),
        );
        expect(await events()).toEqual([changeEventAt(clock.iso(), disabled)]);
        // The store stores: ending the sessions of a disabled operator is the management layer's rule.
        expect(await sessionIds('s1', 's2', 's3')).toEqual(['s1', 's2', 's3']);
        // Rolled back with a transaction: the sessions are there.
        await expect(
          store.transaction(async (tx) => {
            await tx.endOperatorSessions('op_1');
            expect(await tx.findOperatorSession('s1')).toBeUndefined();
            throw new Error('changed my mind');
          }),
        ).rejects.toThrow('changed my mind');
        expect(await sessionIds('s1', 's2', 's3')).toEqual(['s1', 's2', 's3']);
        await store.endOperatorSessions('op_1');
        expect(await sessionIds('s1', 's2', 's3')).toEqual(['s3']);
        // No operator, or none of theirs: nothing to end, no error.
        await store.endOperatorSessions('op_1');
        await store.endOperatorSessions('op_nobody');
        expect(await sessionIds('s1', 's2', 's3')).toEqual(['s3']);
        expect(await events()).toHaveLength(1);
      });

      it('updateOperator with a new enrollment: the password cleared, the old link closed, the sessions kept', async () => {
        await store.addOperator(newOperator('op_1', 'ops@example.com'));
        await store.addOperator(newOperator('op_2', 'other@example.com'));
        const hash = 'scrypt$hash-of-a-password';
        await store.enrollOperator('enroll-op_1', hash, T, (op) => audit('operator.enrolled', op.id));
        await store.createOperatorSession(session('s1', 'op_1'));
        await store.createOperatorSession(session('s2', 'op_2'));
        clock.advance(60_000);
        const link = { digest: 'enroll-op_1-again', expiresAt: '2030-01-03T03:05:05.006Z' };
        const reset = audit('operator.reset', 'op_1', { changes: { email: 'ops@example.com' } });
        const updated = await store.updateOperator('op_1', { enrollment: link }, reset);
        const expected = added('op_1', 'ops@example.com', {
          enrollmentExpiresAt: link.expiresAt,
          lastLoginAt: T,
          updatedAt: clock.iso(),
        });
        expect(updated).toEqual(expected);
        expect(await store.findOperatorCredentials('ops@example.com')).toEqual({
          operator: expected,
          passwordHash: null,
        });
        expect(await store.findOperatorByEnrollment('enroll-op_1')).toBeUndefined();
        expect(await store.findOperatorByEnrollment('enroll-op_1-again')).toEqual(expected);
        // Ending the sessions of an operator reset is the management layer's rule (endOperatorSessions).
        expect(await sessionIds('s1', 's2')).toEqual(['s1', 's2']);
        expect((await events())[0]).toEqual(changeEventAt(clock.iso(), reset));
        // The new link works, once; the old one never again.
        expect(
          await store.enrollOperator('enroll-op_1', 'old', clock.iso(), (op) =>
            audit('operator.enrolled', op.id),
          ),
        ).toBeUndefined();
        const enrolled = await store.enrollOperator('enroll-op_1-again', 'scrypt$new', clock.iso(), (op) =>
          audit('operator.enrolled', op.id),
        );
        expect(enrolled?.enrolled).toBe(true);
        expect((await store.findOperatorCredentials('ops@example.com'))?.passwordHash).toBe('scrypt$new');
      });

      it('updateOperator refuses an unknown operator (not_found, operator) and writes no event', async () => {
        await store.addOperator(newOperator('op_1', 'ops@example.com'));
        const error = await storeError(
          store.updateOperator('op_2', { role: 'viewer' }, audit('operator.updated', 'op_2')),
        );
        expect(error).toMatchObject({
          code: 'not_found',
          resource: 'operator',
          message: 'operator op_2 does not exist',
        });
        // By id only: an email is not an id here.
        const byEmail = await storeError(store.updateOperator('ops@example.com', { role: 'viewer' }));
        expect(byEmail).toMatchObject({ code: 'not_found', resource: 'operator' });
        expect(await store.listOperators()).toEqual([added('op_1', 'ops@example.com')]);
        expect(await events()).toEqual([]);
      });

      it('removeOperator deletes the operator and their sessions, with its event; not_found for nobody', async () => {
        await store.addOperator(newOperator('op_1', 'ops@example.com'));
        await store.addOperator(newOperator('op_2', 'other@example.com'));
        await store.createOperatorSession(session('s1', 'op_1'));
        await store.createOperatorSession(session('s2', 'op_2'));
        clock.advance(1000);
        const removed = audit('operator.deleted', 'op_1', { changes: { email: 'ops@example.com' } });
        await store.removeOperator('op_1', removed);
        expect(await store.findOperator('op_1')).toBeUndefined();
        expect(await store.findOperator('ops@example.com')).toBeUndefined();
        expect(await store.findOperatorByEnrollment('enroll-op_1')).toBeUndefined();
        expect(await sessionIds('s1', 's2')).toEqual(['s2']);
        expect((await store.listOperators()).map((o) => o.id)).toEqual(['op_2']);
        expect(await events()).toEqual([changeEventAt(clock.iso(), removed)]);

        const error = await storeError(store.removeOperator('op_1', audit('operator.deleted', 'op_1')));
        expect(error).toMatchObject({
          code: 'not_found',
          resource: 'operator',
          message: 'operator op_1 does not exist',
        });
        expect(await events()).toEqual([changeEventAt(clock.iso(), removed)]);
        // The email is free again.
        expect((await store.addOperator(newOperator('op_3', 'ops@example.com'))).id).toBe('op_3');
      });

      it('enrollOperator sets the password and closes the link, with the event the callback makes; works once', async () => {
        await store.addOperator(newOperator('op_1', 'ops@example.com'));
        clock.advance(1000);
        const now = '2030-01-02T10:00:00.000Z';
        const seen: Operator[] = [];
        const enrolled = (op: Operator) => {
          seen.push(op);
          return audit('operator.enrolled', op.id, { actor: `operator:${op.email}`, source: '203.0.113.7' });
        };
        const operator = await store.enrollOperator('enroll-op_1', 'scrypt$first', now, enrolled);
        const expected = added('op_1', 'ops@example.com', {
          enrolled: true,
          enrollmentExpiresAt: null,
          updatedAt: now,
        });
        expect(operator).toEqual(expected);
        expect(seen).toEqual([expected]);
        expect(await store.findOperatorCredentials('ops@example.com')).toEqual({
          operator: expected,
          passwordHash: 'scrypt$first',
        });
        expect(await store.findOperatorByEnrollment('enroll-op_1')).toBeUndefined();
        const written = changeEventAt(clock.iso(), enrolled(expected));
        expect(await events()).toEqual([written]);

        // The same link again: nothing, and the password stays.
        seen.length = 0;
        expect(await store.enrollOperator('enroll-op_1', 'scrypt$second', now, enrolled)).toBeUndefined();
        expect(seen).toEqual([]);
        expect((await store.findOperatorCredentials('ops@example.com'))?.passwordHash).toBe('scrypt$first');
        expect(await events()).toEqual([written]);
        // A link nobody has.
        expect(await store.enrollOperator('enroll-nobody', 'scrypt$x', now, enrolled)).toBeUndefined();
        expect(seen).toEqual([]);
      });

      it('enrollOperator refuses a link past its expiry (the expiry itself included) and a disabled operator', async () => {
        await store.addOperator(newOperator('op_1', 'one@example.com'));
        await store.addOperator(newOperator('op_2', 'two@example.com'));
        await store.addOperator(newOperator('op_3', 'three@example.com'));
        const enrolled = (op: Operator) => audit('operator.enrolled', op.id);
        // At the expiry and after: closed.
        expect(await store.enrollOperator('enroll-op_1', 'h', DAY_LATER, enrolled)).toBeUndefined();
        expect(
          await store.enrollOperator('enroll-op_1', 'h', '2030-01-04T00:00:00.000Z', enrolled),
        ).toBeUndefined();
        expect((await store.findOperatorCredentials('one@example.com'))?.passwordHash).toBeNull();
        // The link is still the operator's (the enroll page can say it expired), and works no more.
        expect((await store.findOperatorByEnrollment('enroll-op_1'))?.id).toBe('op_1');
        // A millisecond before: open.
        expect(
          (await store.enrollOperator('enroll-op_2', 'h2', '2030-01-03T03:04:05.005Z', enrolled))?.enrolled,
        ).toBe(true);
        // Disabled: refused, the link kept; enabled again within its time, it works.
        await store.updateOperator('op_3', { enabled: false });
        expect(await store.enrollOperator('enroll-op_3', 'h3', T, enrolled)).toBeUndefined();
        expect((await store.findOperatorCredentials('three@example.com'))?.passwordHash).toBeNull();
        expect((await store.findOperatorByEnrollment('enroll-op_3'))?.enabled).toBe(false);
        await store.updateOperator('op_3', { enabled: true });
        expect((await store.enrollOperator('enroll-op_3', 'h3', T, enrolled))?.enrolled).toBe(true);
        expect((await events()).map((e) => [e.type, e.target])).toEqual([
          ['operator.enrolled', 'op_3'],
          ['operator.enrolled', 'op_2'],
        ]);
      });

      it('each write and its event are one transaction: an event that cannot be written undoes the write', async () => {
        // An event the table refuses (a type that cannot be null): the write must leave nothing behind.
        const bad = { ...audit('operator.updated', 'op_1'), type: null } as unknown as ChangeAudit;
        await expect(store.addOperator(newOperator('op_1', 'ops@example.com'), bad)).rejects.toThrow();
        expect(await store.listOperators()).toEqual([]);

        await store.addOperator(newOperator('op_1', 'ops@example.com'));
        const hash = 'scrypt$h';
        await expect(store.enrollOperator('enroll-op_1', hash, T, () => bad)).rejects.toThrow();
        expect(await store.findOperatorCredentials('ops@example.com')).toEqual({
          operator: added('op_1', 'ops@example.com'),
          passwordHash: null,
        });
        await expect(store.createOperatorSession(session('s1', 'op_1'), bad)).rejects.toThrow();
        expect(await store.findOperatorSession('s1')).toBeUndefined();
        expect((await store.findOperator('op_1'))?.lastLoginAt).toBeNull();

        await store.createOperatorSession(session('s1', 'op_1'));
        const before = await store.findOperator('op_1');
        clock.advance(1000);
        for (const patch of [
          { enabled: false },
          { role: 'viewer' as const },
          { enrollment: { digest: 'new', expiresAt: DAY_LATER } },
        ])
          await expect(store.updateOperator('op_1', patch, bad)).rejects.toThrow();
        expect(await store.findOperator('op_1')).toEqual(before);
        expect(await store.findOperatorByEnrollment('enroll-op_1')).toEqual(before);
        expect(await store.findOperatorByEnrollment('new')).toBeUndefined();
        expect(await sessionIds('s1')).toEqual(['s1']);
        await expect(store.deleteOperatorSession('s1', bad)).rejects.toThrow();
        expect(await sessionIds('s1')).toEqual(['s1']);
        await expect(store.removeOperator('op_1', bad)).rejects.toThrow();
        expect(await store.findOperator('op_1')).toEqual(before);
        expect(await sessionIds('s1')).toEqual(['s1']);
        await expect(store.recordEvent(bad)).rejects.toThrow();
        expect(await events()).toEqual([]);
      });

      it('enrollOperator: of several requests presenting one link at the same moment, exactly one succeeds', async () => {
        for (let round = 0; round < 3; round++) {
          const id = `op_${round}`;
          await store.addOperator(newOperator(id, `ops${round}@example.com`));
          const hashes = ['a', 'b', 'c', 'd'].map((h) => `scrypt$${round}${h}`);
          const results = await Promise.all(
            hashes.map((hash) =>
              store.enrollOperator(`enroll-${id}`, hash, T, (op) =>
                audit('operator.enrolled', op.id, { changes: { hash } }),
              ),
            ),
          );
          const won = results.flatMap((r, i) => (r === undefined ? [] : [i]));
          expect(won).toHaveLength(1);
          expect(results[won[0]!]).toMatchObject({ id, enrolled: true, enrollmentExpiresAt: null });
          expect((await store.findOperatorCredentials(`ops${round}@example.com`))?.passwordHash).toBe(
            hashes[won[0]!],
          );
          const enrolledEvents = (await events()).filter((e) => e.target === id);
          expect(enrolledEvents.map((e) => e.changes)).toEqual([{ hash: hashes[won[0]!] }]);
        }
      });
    });

    describe('operator sessions', () => {
      const T = Date.parse('2030-01-02T03:04:05.006Z');
      const EXPIRES = '2030-01-03T03:04:05.006Z';
      const session = (
        id: string,
        operatorId: string,
        extra: Partial<OperatorSession> = {},
      ): OperatorSession => ({
        id,
        operatorId,
        createdAt: T,
        lastSeenAt: T,
        expiresAt: T + 12 * 3600_000,
        source: '203.0.113.7',
        ...extra,
      });
      const login = (target: string): ChangeAudit => ({
        type: 'operator.login',
        actor: `operator:${target}`,
        source: '203.0.113.7',
        target,
        changes: null,
      });
      const events = async () =>
        (await store.queryAuditEvents({ limit: 100 })).map(({ id: _id, ...rest }) => rest);
      let operator: Operator;

      beforeEach(async () => {
        operator = await store.addOperator({
          id: 'op_1',
          email: 'ops@example.com',
          role: 'viewer',
          enrollDigest: 'enroll-op_1',
          enrollExpiresAt: EXPIRES,
        });
        await store.addOperator({
          id: 'op_2',
          email: 'other@example.com',
          role: 'admin',
          enrollDigest: 'enroll-op_2',
          enrollExpiresAt: EXPIRES,
        });
      });

      it('createOperatorSession keeps the session, stamps the last login (the session’s time), writes its event', async () => {
        clock.advance(3000);
        const loginAt = T + 2000; // the session's own time, not the store's clock
        const s = session('sess-1', 'op_1', {
          createdAt: loginAt,
          lastSeenAt: loginAt,
          expiresAt: loginAt + 43_200_000,
        });
        await store.createOperatorSession(s, login('op_1'));
        const withLogin = { ...operator, lastLoginAt: new Date(loginAt).toISOString() };
        expect(await store.findOperatorSession('sess-1')).toEqual({ session: s, operator: withLogin });
        expect(await store.findOperator('op_1')).toEqual(withLogin);
        // The other operator is untouched.
        expect((await store.findOperator('op_2'))?.lastLoginAt).toBeNull();
        expect(await events()).toEqual([changeEventAt(clock.iso(), login('op_1'))]);
        // A session with no source, without an event; a later login moves the stamp.
        const later = session('sess-2', 'op_1', { createdAt: T + 9000, lastSeenAt: T + 9000, source: null });
        await store.createOperatorSession(later);
        const stamped = { ...operator, lastLoginAt: new Date(T + 9000).toISOString() };
        expect(await store.findOperatorSession('sess-2')).toEqual({ session: later, operator: stamped });
        expect(await store.findOperatorSession('sess-1')).toEqual({ session: s, operator: stamped });
        expect(await events()).toEqual([changeEventAt(clock.iso(), login('op_1'))]);
      });

      it('findOperatorSession joins the operator as it is now; nothing for an unknown id', async () => {
        await store.createOperatorSession(session('sess-1', 'op_1'));
        await store.updateOperator('op_1', { role: 'admin' });
        await store.createOperatorSession(session('sess-2', 'op_2', { source: null }));
        const found = await store.findOperatorSession('sess-1');
        expect(found?.operator).toEqual(await store.findOperator('op_1'));
        expect(found?.operator.role).toBe('admin');
        expect(found?.session).toEqual(session('sess-1', 'op_1'));
        expect(await store.findOperatorSession('sess-2')).toEqual({
          session: session('sess-2', 'op_2', { source: null }),
          operator: await store.findOperator('op_2'),
        });
        expect(await store.findOperatorSession('sess-3')).toBeUndefined();
        expect(await store.findOperatorSession('')).toBeUndefined();
      });

      it('touchOperatorSession moves last_seen_at forward, never back; an unknown id is no error', async () => {
        await store.createOperatorSession(session('sess-1', 'op_1'));
        const seen = async () => (await store.findOperatorSession('sess-1'))?.session.lastSeenAt;
        await store.touchOperatorSession('sess-1', T + 60_000);
        expect(await seen()).toBe(T + 60_000);
        await store.touchOperatorSession('sess-1', T + 30_000);
        expect(await seen()).toBe(T + 60_000);
        await store.touchOperatorSession('sess-1', T + 60_000);
        expect(await seen()).toBe(T + 60_000);
        await store.touchOperatorSession('sess-1', T + 60_001);
        expect(await seen()).toBe(T + 60_001);
        await store.touchOperatorSession('nobody', T + 90_000);
        expect(await store.findOperatorSession('nobody')).toBeUndefined();
        // Only the last-seen time moves.
        expect((await store.findOperatorSession('sess-1'))?.session).toEqual(
          session('sess-1', 'op_1', { lastSeenAt: T + 60_001 }),
        );
        expect(await events()).toEqual([]);
      });

      it('deleteOperatorSession ends one session, with its event (logout) or without', async () => {
        await store.createOperatorSession(session('sess-1', 'op_1'));
        await store.createOperatorSession(session('sess-2', 'op_1'));
        await store.createOperatorSession(session('sess-3', 'op_2'));
        clock.advance(1000);
        const logout: ChangeAudit = { ...login('op_1'), type: 'operator.logout' };
        await store.deleteOperatorSession('sess-1', logout);
        expect(await store.findOperatorSession('sess-1')).toBeUndefined();
        expect(await store.findOperatorSession('sess-2')).toBeDefined();
        expect(await events()).toEqual([changeEventAt(clock.iso(), logout)]);
        await store.deleteOperatorSession('sess-3');
        expect(await store.findOperatorSession('sess-3')).toBeUndefined();
        expect(await store.findOperatorSession('sess-2')).toEqual({
          session: session('sess-2', 'op_1'),
          operator: { ...operator, lastLoginAt: new Date(T).toISOString() },
        });
        expect(await events()).toEqual([changeEventAt(clock.iso(), logout)]);
        // Rolled back with its transaction: the session is there again, no event.
        await expect(
          store.transaction(async (tx) => {
            await tx.deleteOperatorSession('sess-2', logout);
            throw new Error('changed my mind');
          }),
        ).rejects.toThrow('changed my mind');
        expect(await store.findOperatorSession('sess-2')).toBeDefined();
        expect(await events()).toEqual([changeEventAt(clock.iso(), logout)]);
      });

      it('pruneOperatorSessions deletes those at or past their end and those idle since before the bound; returns how many', async () => {
        const now = T + 3600_000;
        const idleBefore = now - 1800_000;
        const sessions = {
          ended: session('ended', 'op_1', { expiresAt: now, lastSeenAt: now - 1000 }), // its end is now: over
          'ended-long-ago': session('ended-long-ago', 'op_2', { expiresAt: now - 1, lastSeenAt: now - 1 }),
          'ends-next': session('ends-next', 'op_1', { expiresAt: now + 1, lastSeenAt: idleBefore }), // idle exactly to the bound: kept
          idle: session('idle', 'op_2', { lastSeenAt: idleBefore - 1 }),
          fresh: session('fresh', 'op_1', { lastSeenAt: now - 1000 }),
        };
        for (const s of Object.values(sessions)) await store.createOperatorSession(s);
        expect(await store.pruneOperatorSessions(now, idleBefore)).toBe(3);
        const left: string[] = [];
        for (const id of Object.keys(sessions)) if (await store.findOperatorSession(id)) left.push(id);
        expect(left).toEqual(['ends-next', 'fresh']);
        expect(await store.pruneOperatorSessions(now, idleBefore)).toBe(0);
        expect(await store.pruneOperatorSessions(now + 1, idleBefore)).toBe(1);
        expect(await store.pruneOperatorSessions(now + 1, now - 999)).toBe(1);
        expect(await store.pruneOperatorSessions(now + 1, now - 999)).toBe(0);
        // The operators stay.
        expect((await store.listOperators()).map((o) => o.id)).toEqual(['op_1', 'op_2']);
      });

      it('recordEvent writes an event that goes with no change: a failed login, its reason, no target', async () => {
        clock.advance(1234);
        const failed: ChangeAudit = {
          type: 'operator.login_failed',
          actor: null,
          source: '2001:db8::1',
          target: null,
          changes: null,
          reason: 'unknown email',
        };
        const changesBefore = await store.latestChange();
        await store.recordEvent(failed);
        const known: ChangeAudit = {
          ...failed,
          actor: 'operator:ops@example.com',
          target: 'op_1',
          reason: 'wrong password',
        };
        await store.recordEvent(known);
        expect(await events()).toEqual([
          changeEventAt(clock.iso(), known),
          changeEventAt(clock.iso(), failed),
        ]);
        expect((await events())[1]).toEqual({
          at: '2030-01-02T03:04:06.240Z',
          type: 'operator.login_failed',
          clientId: null,
          audience: null,
          jti: null,
          reason: 'unknown email',
          source: '2001:db8::1',
          count: null,
          actor: null,
          target: null,
          changes: null,
        });
        expect(await store.queryAuditEvents({ limit: 10, types: ['operator.login_failed'] })).toHaveLength(2);
        expect(await store.latestChange()).toBe(changesBefore);
        expect((await store.findOperator('op_1'))?.lastLoginAt).toBeNull();
      });
    });

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
        expect((await store.queryAuditEvents({ limit: 10 })).map((e) => [e.type, e.count]).reverse()).toEqual(
          [
            ['token.issued', null],
            ['admin.forbidden', 3],
            ['admin.auth_failed', 4],
            ['admin.auth_failed', 2],
          ],
        );
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
        expect((await all()).map((c) => c.minute)).toEqual(
          [0, 1, 2, 5, 6, 7].map((m) => iso(M + m * 60_000)),
        );
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
          [0, 1, 2, 3].map((m) =>
            ev(M + m * 60_000 + 30_000, m % 2 === 0 ? 'token.issued' : 'token.refused'),
          ),
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
        expect(
          (await store.findClients(['first', 'last', 'svc'])).map((c) => [c.id, c.revokedBefore]),
        ).toEqual([
          ['first', null],
          ['last', null],
          ['svc', again],
        ]);
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
          expect(await fresh.migrate()).toEqual([
            '0014_revocation',
            '0015_token_exchange',
            '0016_client_deletions',
          ]);
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
  });
}

/** The two audit events each engine's test writes before migration 0004, in the schema of 0003. */
export const EVENTS_BEFORE_0004 = {
  columns: ['id', 'at', 'outcome', 'client_id', 'audience', 'jti', 'reason', 'source'],
  rows: [
    [7, '2026-11-01T10:00:00.123Z', 'issued', 'c1', 'https://api.example.com', 'j1', null, '10.0.0.1'],
    [9, '2026-11-01T10:00:01.999Z', 'refused', null, null, null, 'invalid_client: unknown client', null],
  ],
} as const;

/**
 * After migration 0004 on a store that held two events written before it (ids 7 and 9, RFC 3339 times,
 * outcomes): both converted, ids kept, and new events numbered after them. Each engine's test writes the
 * old rows its own way.
 */
export async function expectCompactAuditConverted(store: Store): Promise<void> {
  const event = (id: number, at: string, fields: Partial<AuditEvent>): AuditEvent => ({
    id,
    at,
    type: 'token.issued',
    clientId: null,
    audience: null,
    jti: null,
    reason: null,
    source: null,
    count: null,
    actor: null,
    target: null,
    changes: null,
    ...fields,
  });
  expect(await store.migrate()).toEqual([
    '0004_compact_audit',
    '0005_change_audit',
    '0006_ids_and_scopes',
    '0007_custom_claims',
    '0008_client_secrets',
    '0009_private_key_jwt',
    '0010_console',
    '0011_typed_actors',
    '0012_federated_credentials',
    '0013_dpop_bound_access_tokens',
    '0014_revocation',
    '0015_token_exchange',
    '0016_client_deletions',
  ]);
  expect(await store.queryAuditEvents({ limit: 10 })).toEqual([
    event(9, '2026-11-01T10:00:01.999Z', { type: 'token.refused', reason: 'invalid_client: unknown client' }),
    event(7, '2026-11-01T10:00:00.123Z', {
      clientId: 'c1',
      audience: 'https://api.example.com',
      jti: 'j1',
      source: '10.0.0.1',
    }),
  ]);
  // New events continue after the copied ids.
  const {
    id: _id,
    at: _at,
    actor: _a,
    target: _t,
    changes: _c,
    ...record
  } = event(0, '', { clientId: 'c2' });
  await store.appendAuditEvents([
    { ...record, type: 'token.issued', at: Date.parse('2026-11-02T00:00:00Z') },
  ]);
  expect((await store.queryAuditEvents({ limit: 1 }))[0]!.id).toBe(10);
}

/**
 * The rows each engine's test writes, table by table in this order, with the schema of migration 0005 (before
 * audiences had ids and scopes, grants scopes, clients a description).
 */
export const ROWS_BEFORE_0006 = {
  audiences: [
    {
      url: 'https://api.example.com',
      name: 'API',
      token_ttl: 600,
      signing_alg: 'ES256',
      created_at: '2026-11-01T10:00:00.000Z',
      updated_at: '2026-11-02T10:00:00.000Z',
    },
    {
      url: 'https://other.example.com',
      name: null,
      token_ttl: null,
      signing_alg: null,
      created_at: '2026-11-03T10:00:00.000Z',
      updated_at: '2026-11-03T10:00:00.000Z',
    },
  ],
  clients: [
    {
      id: 'old',
      name: 'Old client',
      secret_digest: DIGEST_1,
      enabled: 1,
      token_ttl: null,
      created_at: '2026-11-04T10:00:00.000Z',
      updated_at: '2026-11-04T10:00:00.000Z',
      secret_rotated_at: '2026-11-04T10:00:00.000Z',
      quota_per_minute: null,
      quota_per_day: 100,
    },
  ],
  grants: [
    { client_id: 'old', audience_url: 'https://api.example.com', created_at: '2026-11-04T10:00:00.000Z' },
  ],
} as const;

/**
 * After migration 0006 on a store that held the rows of ROWS_BEFORE_0006 (and nothing else): each audience has
 * an id of its own, in the form the store makes, and no scopes; the ids are stored and unique; the client has
 * no description and its grant no scopes.
 */
export async function expectAudienceIdsAssigned(store: Store): Promise<void> {
  expect(await store.migrate()).toEqual([
    '0006_ids_and_scopes',
    '0007_custom_claims',
    '0008_client_secrets',
    '0009_private_key_jwt',
    '0010_console',
    '0011_typed_actors',
    '0012_federated_credentials',
    '0013_dpop_bound_access_tokens',
    '0014_revocation',
    '0015_token_exchange',
    '0016_client_deletions',
  ]);
  const audiences = await store.listAudiences();
  expect(audiences).toEqual(
    ROWS_BEFORE_0006.audiences.map((row) => ({
      id: expect.stringMatching(/^aud_[A-Za-z0-9_-]{16}$/),
      url: row.url,
      name: row.name,
      tokenTtl: row.token_ttl,
      signingAlg: row.signing_alg,
      scopes: [],
      resourceServerClientIds: [],
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    })),
  );
  const [first, second] = audiences;
  expect(first!.id).not.toBe(second!.id);
  expect(await store.findAudienceById(first!.id)).toEqual(first);
  expect(await store.findAudienceById(second!.id)).toEqual(second);
  expect(await store.listAudiences()).toEqual(audiences);
  expect(await store.findClient('old')).toEqual({
    id: 'old',
    name: 'Old client',
    description: null,
    secretDigest: DIGEST_1,
    enabled: true,
    tokenTtl: null,
    createdAt: '2026-11-04T10:00:00.000Z',
    updatedAt: '2026-11-04T10:00:00.000Z',
    secretRotatedAt: '2026-11-04T10:00:00.000Z',
    quotaPerMinute: null,
    quotaPerDay: 100,
    claims: null,
    // Every client before 0009 authenticates with its secret, as before.
    authMethod: 'client_secret_basic',
    jwks: null,
    jwksUri: null,
    federatedCredentials: [],
    // Every client before 0013 gets tokens with or without a DPoP proof.
    dpopBoundAccessTokens: false,
    // Enabled, so 0014 set no revoked_before.
    revokedBefore: null,
    // Its single secret became its first, made when it was last rotated.
    secrets: [
      {
        id: expect.stringMatching(/^sec_/),
        digest: DIGEST_1,
        createdAt: '2026-11-04T10:00:00.000Z',
        expiresAt: null,
        lastUsedAt: null,
      },
    ],
    audiences: ['https://api.example.com'],
    grants: [{ audience: 'https://api.example.com', scopes: [], claims: null, tokenExchange: false }],
  });
  // The ids are unique from now on: one given again is refused, a new one is another.
  const third = { url: 'https://third.example.com', name: null, tokenTtl: null, signingAlg: null };
  expect((await storeError(store.addAudience({ ...third, id: first!.id }))).code).toBe('conflict');
  const added = await store.addAudience(third);
  expect(added.id).toMatch(/^aud_[A-Za-z0-9_-]{16}$/);
  expect([first!.id, second!.id]).not.toContain(added.id);
}
