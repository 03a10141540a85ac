/**
 * The management layer on a real SQLite store: every rule refuses with a stable code and the field at fault,
 * whatever face called it, and nothing is written when it refuses.
 */
import { EVERY_SCOPE } from '../../src/management/context.js';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import {
  audiences,
  audit,
  clients,
  grants,
  keys,
  ManagementError,
  views,
  type ManagementContext,
} from '../../src/management/index.js';
import { digestSecret } from '../../src/domain/secrets.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { tempDir } from '../helpers/server.js';

const API = 'https://api.example.com';

let ctx: ManagementContext;
beforeEach(async () => {
  const dataDir = tempDir();
  const store = openSqliteStore(path.join(dataDir, 'tessera.db'));
  await store.migrate();
  const config = loadConfig({
    TESSERA_DATA_DIR: dataDir,
    TESSERA_MASTER_KEY: randomBytes(32).toString('base64url'),
  });
  ctx = { store, config, actor: 'cli:test', holds: EVERY_SCOPE };
});
afterEach(async () => {
  await ctx.store.close();
});

/** The failure of `run` as { code, field, message }. */
async function refusal(run: () => Promise<unknown>) {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(ManagementError);
    const e = error as ManagementError;
    return { code: e.code, kind: e.kind, field: e.field, message: e.message };
  }
  throw new Error('expected a refusal');
}

describe('management rules', () => {
  it('audiences: each field checked, with its name; a duplicate is audience_exists', async () => {
    expect(await refusal(() => audiences.addAudience(ctx, { url: 'ftp://x.example' }))).toEqual({
      code: 'invalid_field',
      kind: 'invalid',
      field: 'identifier',
      message: 'audience must be an http or https URL',
    });
    expect(await refusal(() => audiences.addAudience(ctx, { url: API, tokenTtl: 59 }))).toEqual({
      code: 'invalid_field',
      kind: 'invalid',
      field: 'token_ttl',
      message: 'token lifetime must be a whole number of seconds from 60 to 86400',
    });
    expect(await refusal(() => audiences.addAudience(ctx, { url: API, name: ' ' }))).toMatchObject({
      code: 'invalid_field',
      field: 'name',
    });
    expect(await refusal(() => audiences.addAudience(ctx, { url: API, signingAlg: 'HS256' }))).toMatchObject({
      code: 'invalid_field',
      field: 'signing_alg',
    });
    // A scope's refusal names its place in the list; a duplicate, the list.
    const scopes = [{ name: 'orders:read' }, { name: 'orders write' }];
    expect(await refusal(() => audiences.addAudience(ctx, { url: API, scopes }))).toEqual({
      code: 'invalid_field',
      kind: 'invalid',
      field: 'scopes/1/name',
      message:
        'scope "orders write" is not a scope token (RFC 6749 §3.3: printable ASCII but space, " and \\)',
    });
    expect(
      await refusal(() => audiences.addAudience(ctx, { url: API, scopes: [{ name: 'a' }, { name: 'a' }] })),
    ).toMatchObject({ code: 'invalid_field', field: 'scopes', message: 'scope a is listed twice' });
    expect(await audiences.listAudiences(ctx)).toEqual([]);
    await audiences.addAudience(ctx, { url: API, name: 'Orders' });
    expect(await refusal(() => audiences.addAudience(ctx, { url: API }))).toEqual({
      code: 'audience_exists',
      kind: 'conflict',
      field: undefined,
      message: `audience ${API} is already registered`,
    });
    expect(await refusal(() => audiences.getAudience(ctx, 'https://other.example'))).toMatchObject({
      code: 'audience_not_found',
      kind: 'not_found',
    });
  });

  it('clients: name, id, lifetime and quotas checked before anything is written', async () => {
    const cases: [Parameters<typeof clients.createClient>[1], string, string][] = [
      [{ name: '' }, 'name', 'the client name must not be empty'],
      [{ name: 'a', id: 'x' }, 'client_id', 'client id must be 3 to 128 characters of A-Z a-z 0-9 . _ ~ -'],
      [
        { name: 'a', tokenTtl: 86_401 },
        'token_ttl',
        'token lifetime must be a whole number of seconds from 60 to 86400',
      ],
      [
        { name: 'a', quotaPerMinute: 0 },
        'quota_per_minute',
        'a quota of 0 would refuse every token: use none to remove the limit, or disable the client (`tessera client disable`) to stop it',
      ],
      [
        { name: 'a', quotaPerDay: 1.5 },
        'quota_per_day',
        'a quota must be a whole number from 1 to 1000000000, or none',
      ],
      [
        { name: 'a', grants: ['not a url'] },
        'grants',
        'audience URL must not contain spaces or control characters',
      ],
    ];
    for (const [input, field, message] of cases) {
      expect(await refusal(() => clients.createClient(ctx, input)), field).toEqual({
        code: 'invalid_field',
        kind: 'invalid',
        field,
        message,
      });
    }
    expect(await clients.listClients(ctx)).toEqual([]);
  });

  it('clients: revoke-tokens sets revoked_before to that moment; disabling does too, enabling keeps it', async () => {
    let now = Date.parse('2030-01-02T03:04:05.678Z');
    ctx = { ...ctx, now: () => now };
    await clients.createClient(ctx, { name: 'svc', id: 'svc-1' });
    const revoked = await clients.revokeClientTokens(ctx, 'svc-1');
    expect(revoked.revokedBefore).toBe('2030-01-02T03:04:05.678Z');
    now += 60_000;
    await clients.setEnabled(ctx, 'svc-1', false);
    expect((await clients.getClient(ctx, 'svc-1')).revokedBefore).toBe('2030-01-02T03:05:05.678Z');
    now += 60_000;
    // Enabled again: its old tokens stay revoked; a change of anything else leaves revoked_before alone.
    await clients.setEnabled(ctx, 'svc-1', true);
    await clients.updateClient(ctx, 'svc-1', { name: 'renamed' });
    expect((await clients.getClient(ctx, 'svc-1')).revokedBefore).toBe('2030-01-02T03:05:05.678Z');
    // A client created disabled has no tokens to revoke.
    await clients.createClient(ctx, { name: 'off', id: 'off-1', enabled: false });
    expect((await clients.getClient(ctx, 'off-1')).revokedBefore).toBeNull();
    const events = await audit.queryAudit(ctx, { types: ['client.tokens_revoked'] });
    expect(events.map((e) => [e.actor, e.target, e.clientId, e.changes])).toEqual([
      ['cli:test', 'svc-1', 'svc-1', { revoked_before: { from: null, to: '2030-01-02T03:04:05.678Z' } }],
    ]);
    expect(await refusal(() => clients.revokeClientTokens(ctx, 'nobody'))).toMatchObject({
      code: 'client_not_found',
      message: 'client nobody does not exist',
    });
  });

  it('clients: created with a secret stored only as its digest; quotas set, kept and removed', async () => {
    await audiences.addAudience(ctx, { url: API });
    const { client, secret } = await clients.createClient(ctx, {
      name: 'svc',
      id: 'svc-1',
      quotaPerMinute: 10,
      grants: [API],
    });
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    expect(JSON.stringify(await ctx.store.findClient('svc-1'))).not.toContain(secret);
    expect(client).toMatchObject({ id: 'svc-1', audiences: [API], quotaPerMinute: 10, quotaPerDay: null });
    expect(await clients.setQuota(ctx, 'svc-1', { perDay: 1000 })).toMatchObject({
      quotaPerMinute: 10,
      quotaPerDay: 1000,
    });
    expect(await clients.setQuota(ctx, 'svc-1', { perMinute: null })).toMatchObject({
      quotaPerMinute: null,
      quotaPerDay: 1000,
    });
    // A change that changes nothing writes nothing: no event, no updated_at.
    const before = await clients.getClient(ctx, 'svc-1');
    expect(await clients.setQuota(ctx, 'svc-1', {})).toEqual(before);
    expect(await clients.setQuota(ctx, 'svc-1', { perDay: 1000 })).toEqual(before);
    await clients.setEnabled(ctx, 'svc-1', false);
    await clients.setEnabled(ctx, 'svc-1', false);
    const disabledAt = (await clients.getClient(ctx, 'svc-1')).revokedBefore;
    expect(disabledAt).toEqual(expect.any(String));
    const updates = await audit.queryAudit(ctx, { types: ['client.updated'] });
    expect(updates.map((e) => e.changes)).toEqual([
      // Disabling revokes the tokens the client has (INTERFACE.md), in the same change.
      { enabled: { from: true, to: false }, revoked_before: { from: null, to: disabledAt } },
      { quota_per_minute: { from: 10, to: null } },
      { quota_per_day: { from: null, to: 1000 } },
    ]);
    // Never a secret or its digest in the trail.
    const trail = JSON.stringify(await audit.queryAudit(ctx, {}));
    expect(trail).not.toContain(secret);
    expect(trail).not.toContain(digestSecret(secret));
    expect(await refusal(() => clients.setQuota(ctx, 'nobody', { perDay: 5 }))).toMatchObject({
      code: 'client_not_found',
    });
    expect(await refusal(() => clients.createClient(ctx, { name: 'b', id: 'svc-1' }))).toMatchObject({
      code: 'client_exists',
      kind: 'conflict',
    });
  });

  it('clients: dpop_bound_access_tokens false by default, set at creation or by a change, audited both ways', async () => {
    const plain = (await clients.createClient(ctx, { name: 'plain', id: 'plain' })).client;
    expect(plain.dpopBoundAccessTokens).toBe(false);
    const bound = (
      await clients.createClient(ctx, { name: 'bound', id: 'bound', dpopBoundAccessTokens: true })
    ).client;
    expect(bound.dpopBoundAccessTokens).toBe(true);
    expect(views.clientJson(bound)).toMatchObject({ client_id: 'bound', dpop_bound_access_tokens: true });
    const created = await audit.queryAudit(ctx, { types: ['client.created'] });
    expect(
      created.map((e) => [e.target, (e.changes as Record<string, unknown>).dpop_bound_access_tokens]),
    ).toEqual([
      ['bound', true],
      ['plain', false],
    ]);
    expect(await clients.updateClient(ctx, 'plain', { dpopBoundAccessTokens: true })).toMatchObject({
      dpopBoundAccessTokens: true,
    });
    // Again: nothing changes, nothing is recorded.
    await clients.updateClient(ctx, 'plain', { dpopBoundAccessTokens: true });
    expect(await clients.updateClient(ctx, 'bound', { dpopBoundAccessTokens: false })).toMatchObject({
      dpopBoundAccessTokens: false,
    });
    const updates = await audit.queryAudit(ctx, { types: ['client.updated'] });
    expect(updates.map((e) => [e.target, e.changes])).toEqual([
      ['bound', { dpop_bound_access_tokens: { from: true, to: false } }],
      ['plain', { dpop_bound_access_tokens: { from: false, to: true } }],
    ]);
    // Left out of a change, it stays.
    expect(await clients.updateClient(ctx, 'plain', { name: 'renamed' })).toMatchObject({
      dpopBoundAccessTokens: true,
    });
  });

  it('grants: each missing thing has its own code', async () => {
    await clients.createClient(ctx, { name: 'svc', id: 'svc-1' });
    expect(await refusal(() => grants.addGrant(ctx, 'svc-1', API))).toMatchObject({
      code: 'audience_not_found',
    });
    await audiences.addAudience(ctx, { url: API });
    expect(await refusal(() => grants.addGrant(ctx, 'nobody', API))).toMatchObject({
      code: 'client_not_found',
    });
    expect(await refusal(() => grants.removeGrant(ctx, 'svc-1', API))).toMatchObject({
      code: 'grant_not_found',
    });
    expect(await grants.addGrant(ctx, 'svc-1', API)).toBe(true);
    expect(await grants.addGrant(ctx, 'svc-1', API)).toBe(false);
  });

  it('keys: a first rotation on an empty store signs at once; the next is published ahead', async () => {
    const [first] = await keys.rotateKeys(ctx, { alg: 'ES256' });
    expect(first).toMatchObject({ alg: 'ES256', alreadyScheduled: false, retiring: [] });
    expect((await keys.listKeys(ctx)).map((k) => k.status)).toEqual(['active']);
    const [second] = await keys.rotateKeys(ctx, { alg: 'ES256' });
    expect(second).toMatchObject({ alreadyScheduled: false, retiring: [first!.kid] });
    expect(Date.parse(second!.activatesAt!) - Date.now()).toBeGreaterThan(
      ctx.config.keyPublishAhead * 1000 - 5000,
    );
    const [third] = await keys.rotateKeys(ctx, { alg: 'ES256' });
    expect(third).toEqual({ ...second, alreadyScheduled: true, retiring: [] });
    expect(await refusal(() => keys.retireKey(ctx, 'nope'))).toMatchObject({ code: 'key_not_found' });
  });

  it('audit: one answer holds at most 100 000 events', async () => {
    expect(await refusal(() => audit.queryAudit(ctx, {}, 100_001))).toMatchObject({
      code: 'invalid_field',
      field: 'limit',
    });
    expect(await audit.queryAudit(ctx, { outcome: 'issued', types: ['token.refused'] })).toEqual([]);
  });
});
