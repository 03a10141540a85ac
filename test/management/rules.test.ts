/**
 * The rules that the management layer keeps in the transaction of a change, the store only storing what they
 * make of it: a client's secrets (at most five live, the grace of the others, expired ones pruned), a client
 * that switches to private_key_jwt losing its secrets, an audience's removed scopes leaving its grants, a
 * disabled or reset operator's sessions ending. On a real SQLite store, the store and the operations on one
 * clock that stands still until moved.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { digestSecret } from '../../src/domain/secrets.js';
import {
  audiences,
  clients,
  grants,
  operators,
  secrets,
  type ManagementContext,
} from '../../src/management/index.js';
import {
  ADMIN_AUDIENCE_SCOPES,
  adminAudienceUrl,
  ensureAdminAudience,
} from '../../src/management/builtin.js';
import type { Store } from '../../src/store/types.js';
import { rejection } from '../helpers/assert.js';
import { managementContext } from '../helpers/management.js';
import { type TestClock } from '../helpers/clock.js';
import { ManagementError } from '../../src/management/errors.js';

const API = 'https://api.example.com';

let clock: TestClock;
let store: Store;
let ctx: ManagementContext;
beforeEach(async () => {
  ({ store, ctx, clock } = await managementContext());
  await audiences.addAudience(ctx, { url: API });
});
afterEach(async () => {
  await store.close();
});

/** The changes recorded after `seq`, as [entity, key] pairs. */
async function changesAfter(seq: number): Promise<[string, string][]> {
  return (await store.changesSince(seq, 1000)).map((c) => [c.entity, c.key]);
}

/** Runs `write`, asserts that it recorded exactly the given changes, and returns what it resolved to. */
async function expectChanges<T>(write: () => Promise<T>, expected: [string, string][]): Promise<T> {
  const before = await store.latestChange();
  const result = await write();
  expect(await changesAfter(before)).toEqual(expected);
  return result;
}

/** Runs a write that must be refused; asserts that it wrote nothing (no change, no event) and returns the refusal. */
async function expectRefused(write: () => Promise<unknown>): Promise<ManagementError> {
  const before = await store.latestChange();
  const events = await store.queryAuditEvents({ limit: 1000 });
  const error = await rejection(write(), ManagementError);
  expect(await changesAfter(before)).toEqual([]);
  expect(await store.queryAuditEvents({ limit: 1000 })).toEqual(events);
  return error;
}

const iso = (ms: number): string => new Date(ms).toISOString();
const secretTimes = async (id: string) =>
  (await clients.getClient(ctx, id)).secrets.map((s) => [s.id, s.expiresAt]);

describe('secrets', () => {
  it('rotateSecret: the new secret alone (the others stop at once), its digest current, both times stamped', async () => {
    const { client: created } = await clients.createClient(ctx, { id: 'svc', name: 'svc', grants: [API] });
    clock.advance(60_000);
    const at = clock.iso();
    const rotated = await expectChanges(() => clients.rotateSecret(ctx, 'svc'), [['client', 'svc']]);
    const expected = {
      ...created,
      secretDigest: digestSecret(rotated.secret),
      updatedAt: at,
      secretRotatedAt: at,
      secrets: [
        {
          id: rotated.secretId,
          digest: digestSecret(rotated.secret),
          createdAt: at,
          expiresAt: null,
          lastUsedAt: null,
        },
      ],
    };
    expect(rotated.client).toEqual(expected);
    expect(await store.findClient('svc')).toEqual(expected);
  });

  it('a grace: the others expire at now + grace, one that expires sooner keeps its time; none: they stay', async () => {
    const { client } = await clients.createClient(ctx, { id: 'svc', name: 'svc', grants: [API] });
    const first = client.secrets[0]!.id;
    const t0 = clock.now();
    // A second secret that expires in 30 s, a third in an hour; without a grace, the others stay as they are.
    clock.advance(1);
    const soon = (await secrets.addSecret(ctx, 'svc', { expiresInSeconds: 30 })).secret;
    clock.advance(1);
    const later = (await secrets.addSecret(ctx, 'svc', { expiresAt: iso(t0 + 3_600_000) })).secret;
    expect(await secretTimes('svc')).toEqual([
      [first, null],
      [soon.id, iso(t0 + 1 + 30_000)],
      [later.id, iso(t0 + 3_600_000)],
    ]);
    clock.advance(10_000);
    const rotated = await clients.rotateSecret(ctx, 'svc', { graceSeconds: 60 });
    const until = iso(t0 + 2 + 10_000 + 60_000);
    expect(await secretTimes('svc')).toEqual([
      [first, until],
      [soon.id, iso(t0 + 1 + 30_000)],
      [later.id, until],
      [rotated.secretId, null],
    ]);
    // addSecret with a grace does the same to the others; the new one expires as asked.
    clock.advance(1000);
    const added = await secrets.addSecret(ctx, 'svc', { graceSeconds: 5, expiresInSeconds: 600 });
    const t1 = clock.now();
    expect(await secretTimes('svc')).toEqual([
      [first, iso(t1 + 5000)],
      [soon.id, iso(t1 + 5000)],
      [later.id, iso(t1 + 5000)],
      [rotated.secretId, iso(t1 + 5000)],
      [added.secret.id, iso(t1 + 600_000)],
    ]);
  });

  it('a secret that expires in seconds: counted from when it is made, exactly', async () => {
    await clients.createClient(ctx, { id: 'svc', name: 'svc', grants: [API] });
    clock.advance(1234);
    const { secret } = await secrets.addSecret(ctx, 'svc', { expiresInSeconds: 90 * 86_400 });
    expect(secret.createdAt).toBe(clock.iso());
    expect(Date.parse(secret.expiresAt!) - Date.parse(secret.createdAt)).toBe(90 * 86_400_000);
  });

  it('at most five live secrets: a sixth is refused (too_many_secrets) and nothing is written', async () => {
    const { client } = await clients.createClient(ctx, { id: 'svc', name: 'svc', grants: [API] });
    for (let i = 0; i < 4; i++) await secrets.addSecret(ctx, 'svc');
    const five = await store.findClient('svc');
    expect(five!.secrets).toHaveLength(5);
    const refused = await expectRefused(() => secrets.addSecret(ctx, 'svc'));
    expect(refused).toMatchObject({
      code: 'too_many_secrets',
      kind: 'conflict',
      message: `client ${client.id} has 5 live secrets already: revoke one, or rotate with a grace period shorter than theirs`,
    });
    // A rotation with a grace leaves the others live too: refused the same way.
    expect((await expectRefused(() => clients.rotateSecret(ctx, 'svc', { graceSeconds: 60 }))).code).toBe(
      'too_many_secrets',
    );
    expect(await store.findClient('svc')).toEqual(five);
    // Without a grace the others go at once: room for the new one.
    const rotated = await clients.rotateSecret(ctx, 'svc');
    expect(rotated.client.secrets.map((s) => s.id)).toEqual([rotated.secretId]);
  });

  it('secrets expired by now are pruned when a secret is added, and do not count', async () => {
    await clients.createClient(ctx, { id: 'svc', name: 'svc', grants: [API] });
    const t0 = clock.now();
    const short: string[] = [];
    // Made a millisecond apart (the list's order), each expiring a second after the one before.
    for (let i = 0; i < 4; i++) {
      clock.advance(1);
      short.push((await secrets.addSecret(ctx, 'svc', { expiresInSeconds: 10 + i })).secret.id);
    }
    // At t0 + 11 s + 2 ms two of them are over (the one expiring at exactly now included); the others count.
    clock.advance(11_000 - 2);
    const before = await store.findClient('svc');
    const kept = before!.secrets.filter((s) => !short.slice(0, 2).includes(s.id)).map((s) => s.id);
    const added = await secrets.addSecret(ctx, 'svc');
    expect((await clients.getClient(ctx, 'svc')).secrets.map((s) => s.id)).toEqual([
      ...kept,
      added.secret.id,
    ]);
    expect(await secretTimes('svc')).toEqual([
      [kept[0], null],
      [short[2], iso(t0 + 3 + 12_000)],
      [short[3], iso(t0 + 4 + 13_000)],
      [added.secret.id, null],
    ]);
    // An expired secret is pruned even when nothing else changes: four live, one over, one added.
    clock.advance(1001);
    await secrets.addSecret(ctx, 'svc');
    expect((await clients.getClient(ctx, 'svc')).secrets.map((s) => s.id)).not.toContain(short[2]);
  });

  it('revokeSecret: a secret the client does not have is secret_not_found', async () => {
    await clients.createClient(ctx, { id: 'svc', name: 'svc', grants: [API] });
    expect(await expectRefused(() => secrets.revokeSecret(ctx, 'svc', 'sec_nothing'))).toMatchObject({
      code: 'secret_not_found',
      message: 'client svc has no secret sec_nothing',
    });
    expect((await expectRefused(() => secrets.revokeSecret(ctx, 'nobody', 'sec_nothing'))).code).toBe(
      'client_not_found',
    );
  });
});

describe('a switch to private_key_jwt', () => {
  const jwks = {
    keys: [{ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo', kid: 'k1' }],
  };

  it("deletes the client's secrets in the same change, for good", async () => {
    await clients.createClient(ctx, { id: 'svc-sc', name: 'svc-sc', grants: [API] });
    await secrets.addSecret(ctx, 'svc-sc');
    expect((await store.findClient('svc-sc'))!.secrets).toHaveLength(2);
    clock.advance(1000);
    const switched = await expectChanges(
      () => clients.updateClient(ctx, 'svc-sc', { authMethod: 'private_key_jwt', jwks }),
      [['client', 'svc-sc']],
    );
    expect(switched).toMatchObject({
      authMethod: 'private_key_jwt',
      jwks,
      secrets: [],
      updatedAt: clock.iso(),
    });
    expect(await store.findClient('svc-sc')).toEqual(switched);
    const [event] = await store.queryAuditEvents({ limit: 1 });
    expect(event).toMatchObject({ type: 'client.updated', target: 'svc-sc' });
    // Back to a secret method: the old secrets do not come back.
    const back = await clients.updateClient(ctx, 'svc-sc', { authMethod: 'client_secret_basic' });
    expect(back).toMatchObject({ authMethod: 'client_secret_basic', jwks: null, secrets: [] });
  });

  it('a change of a key client that is no switch leaves the secrets alone (it has none to lose)', async () => {
    await clients.createClient(ctx, {
      id: 'svc-kc',
      name: 'svc-kc',
      grants: [API],
      authMethod: 'private_key_jwt',
      jwks,
    });
    const renamed = await expectChanges(
      () => clients.updateClient(ctx, 'svc-kc', { name: 'renamed', authMethod: 'private_key_jwt' }),
      [['client', 'svc-kc']],
    );
    expect(renamed).toMatchObject({ name: 'renamed', authMethod: 'private_key_jwt', secrets: [] });
  });
});

describe("an audience's scopes", () => {
  const OTHER = 'https://other.example.com';
  const scope = (name: string) => ({ name, description: null });

  beforeEach(async () => {
    await audiences.updateAudience(ctx, API, { scopes: ['read', 'write', 'delete'].map(scope) });
    await audiences.addAudience(ctx, { url: OTHER, scopes: ['read', 'delete'].map(scope) });
    await clients.createClient(ctx, { id: 'svc-all', name: 'all', grants: [API, OTHER] });
    await grants.setGrantScopes(ctx, 'svc-all', API, ['delete', 'read', 'write']);
    await grants.setGrantScopes(ctx, 'svc-all', OTHER, ['delete', 'read']);
    await clients.createClient(ctx, { id: 'svc-read', name: 'read', grants: [API] });
    await grants.setGrant(ctx, 'svc-read', API, { scopes: ['read'], claims: { tier: 'gold' } });
    await clients.createClient(ctx, { id: 'svc-none', name: 'none', grants: [API] });
  });

  const grantsOf = async (id: string) =>
    (await store.findClient(id))!.grants.map((g) => [g.audience, g.scopes, g.claims]);

  it('a scope removed from an audience leaves every grant of it in the same change; other grants stay', async () => {
    clock.advance(1000);
    const updated = await expectChanges(
      () => audiences.removeScopes(ctx, API, ['delete', 'write']),
      [['audience', API]],
    );
    expect(updated).toMatchObject({ scopes: [scope('read')], updatedAt: clock.iso() });
    expect(await grantsOf('svc-all')).toEqual([
      [API, ['read'], null],
      [OTHER, ['delete', 'read'], null],
    ]);
    expect(await grantsOf('svc-read')).toEqual([[API, ['read'], { tier: 'gold' }]]);
    expect(await grantsOf('svc-none')).toEqual([[API, [], null]]);
    // One event, the audience's: the grants' loss is part of it.
    expect((await store.queryAuditEvents({ limit: 1 }))[0]).toMatchObject({
      type: 'audience.updated',
      changes: { scopes: { from: ['delete', 'read', 'write'].map(scope), to: [scope('read')] } },
    });
  });

  it('updateAudience with a new list: the scopes it leaves out leave the grants; a new scope is granted to nobody', async () => {
    await audiences.updateAudience(ctx, API, { scopes: ['read', 'admin'].map(scope) });
    expect(await grantsOf('svc-all')).toEqual([
      [API, ['read'], null],
      [OTHER, ['delete', 'read'], null],
    ]);
    // An empty list takes every scope from every grant; the grants themselves stay.
    await audiences.updateAudience(ctx, API, { scopes: [] });
    expect(await grantsOf('svc-all')).toEqual([
      [API, [], null],
      [OTHER, ['delete', 'read'], null],
    ]);
    expect(await grantsOf('svc-read')).toEqual([[API, [], { tier: 'gold' }]]);
  });

  it('a change that keeps every scope (a description, a new one, the name) leaves the grants alone', async () => {
    await audiences.putScope(ctx, API, { name: 'read', description: 'reads' });
    await audiences.putScope(ctx, API, { name: 'admin' });
    await audiences.updateAudience(ctx, API, { name: 'renamed' });
    expect(await grantsOf('svc-all')).toEqual([
      [API, ['delete', 'read', 'write'], null],
      [OTHER, ['delete', 'read'], null],
    ]);
  });

  it("the server's own change of the admin audience's scopes takes the ones it drops from the grants too", async () => {
    const url = adminAudienceUrl(ctx.config);
    await ensureAdminAudience(ctx);
    // An admin audience as an older server left it: with a scope this one no longer defines, granted.
    const old = await store.findAudience(url);
    await store.updateAudience(url, { scopes: [...ADMIN_AUDIENCE_SCOPES, scope('legacy:all')] });
    await store.putGrant('svc-none', url, ['audiences:read', 'legacy:all']);
    const made = await ensureAdminAudience(ctx);
    expect(made.scopes).toEqual(old!.scopes);
    expect((await store.findClient('svc-none'))!.grants.find((g) => g.audience === url)!.scopes).toEqual([
      'audiences:read',
    ]);
  });
});

describe("an operator's sessions", () => {
  const session = (id: string, operatorId: string) => {
    const at = clock.now();
    return { id, operatorId, createdAt: at, lastSeenAt: at, expiresAt: at + 3_600_000, source: null };
  };
  const sessionIds = async (...ids: string[]) => {
    const found: string[] = [];
    for (const id of ids) if (await store.findOperatorSession(id)) found.push(id);
    return found;
  };
  const token = (url: string) => new URL(url).hash.slice('#token='.length);

  let ops: string;
  let opsLink: string;
  let other: string;
  beforeEach(async () => {
    const added = await operators.addOperator(ctx, { email: 'ops@example.com', role: 'admin' });
    ops = added.operator.id;
    opsLink = added.url;
    other = (await operators.addOperator(ctx, { email: 'other@example.com', role: 'admin' })).operator.id;
    await store.createOperatorSession(session('s1', ops));
    await store.createOperatorSession(session('s2', ops));
    await store.createOperatorSession(session('s3', other));
  });

  it('disabling an operator ends their sessions (only theirs) in the same transaction; enabling brings none back', async () => {
    // Rolled back with the transaction: the operator enabled, the sessions there, no event.
    const before = await store.queryAuditEvents({ limit: 100 });
    await expect(
      store.transaction(async (tx) => {
        await operators.updateOperator({ ...ctx, store: tx }, ops, { enabled: false });
        expect(await tx.findOperatorSession('s1')).toBeUndefined();
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect((await store.findOperator(ops))?.enabled).toBe(true);
    expect(await sessionIds('s1', 's2', 's3')).toEqual(['s1', 's2', 's3']);
    expect(await store.queryAuditEvents({ limit: 100 })).toEqual(before);

    const disabled = await operators.updateOperator(ctx, ops, { enabled: false });
    expect(disabled.enabled).toBe(false);
    expect(await sessionIds('s1', 's2', 's3')).toEqual(['s3']);
    expect((await store.queryAuditEvents({ limit: 1 }))[0]).toMatchObject({
      type: 'operator.updated',
      target: ops,
      changes: { enabled: { from: true, to: false } },
    });
    // Enabled again: the sessions that ended stay ended. A change of role alone ends none.
    expect((await operators.updateOperator(ctx, ops, { enabled: true })).enabled).toBe(true);
    expect(await sessionIds('s1', 's2', 's3')).toEqual(['s3']);
    await operators.updateOperator(ctx, other, { role: 'viewer' });
    expect(await sessionIds('s3')).toEqual(['s3']);
  });

  it('a reset clears the password, closes the old link and ends the sessions, in one transaction', async () => {
    await operators.enroll(ctx, token(opsLink), 'a long enough password, surely');
    expect((await store.findOperatorCredentials('ops@example.com'))?.passwordHash).toMatch(/^scrypt\$/);
    await store.createOperatorSession(session('s4', ops));
    // Rolled back with the transaction: the password, the sessions.
    await expect(
      store.transaction(async (tx) => {
        await operators.resetOperator({ ...ctx, store: tx }, ops);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect((await store.findOperatorCredentials('ops@example.com'))?.passwordHash).toMatch(/^scrypt\$/);
    expect(await sessionIds('s1', 's2', 's3', 's4')).toEqual(['s1', 's2', 's3', 's4']);

    clock.advance(1000);
    const reset = await operators.resetOperator(ctx, 'ops@example.com');
    expect(reset.operator).toMatchObject({ id: ops, enrolled: false, enrollmentExpiresAt: reset.expiresAt });
    expect((await store.findOperatorCredentials('ops@example.com'))?.passwordHash).toBeNull();
    expect(await sessionIds('s1', 's2', 's3', 's4')).toEqual(['s3']);
    // The new link works; the old one does not.
    await expect(operators.enroll(ctx, token(opsLink), 'another long password')).rejects.toMatchObject({
      code: 'enrollment_invalid',
    });
    expect((await operators.enroll(ctx, token(reset.url), 'another long password')).enrolled).toBe(true);
  });
});
