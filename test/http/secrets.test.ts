/**
 * Several live secrets per client (INTERFACE.md, "Secrets, with overlap"): rotation with a grace period in
 * which both work, expiry at its time on the token path with no change event, revocation, at most five, the
 * last-used time written off the token path; and the CLI commands that do it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audiences, clients, secrets, type ManagementContext } from '../../src/management/index.js';
import { tokenParams } from '../helpers/provision.js';
import { workspace } from '../helpers/cli.js';
import { testClock } from '../helpers/clock.js';
import { managementOf } from '../helpers/management.js';
import { postToken, startTestServer, type TestServer } from '../helpers/server.js';

const API = 'https://api.example.com';

let t: TestServer;
let ctx: ManagementContext;
/** The server's clock: a grace period ends when the test moves it on, not after waiting for it. */
const clock = testClock();

beforeAll(async () => {
  t = await startTestServer({}, undefined, { clock });
  ctx = managementOf(t, 'test', clock.now);
  await audiences.addAudience(ctx, { url: API });
});
afterAll(async () => {
  await t?.close();
});

const tokenWith = (id: string, secret: string) => postToken(t.url, tokenParams(id, secret, API));

describe('secrets with overlap', () => {
  it('rotation with a grace: both work, then the old one stops at its time with no change event', async () => {
    const { client, secret: old } = await clients.createClient(ctx, { name: 'rot', grants: [API] });
    await t.sync();
    const rotated = await clients.rotateSecret(ctx, client.id, { graceSeconds: 2 });
    await t.sync();
    expect((await tokenWith(client.id, old)).status).toBe(200);
    expect((await tokenWith(client.id, rotated.secret)).status).toBe(200);
    const feed = await ctx.store.latestChange();
    const expiresAt = Date.parse(rotated.client.secrets.find((s) => s.id !== rotated.secretId)!.expiresAt!);
    clock.advance(Math.max(0, expiresAt - clock.now()) + 50);
    const refused = await tokenWith(client.id, old);
    expect(refused.status).toBe(401);
    expect(refused.body).toEqual({
      error: 'invalid_client',
      error_description: 'client authentication failed',
    });
    expect((await tokenWith(client.id, rotated.secret)).status).toBe(200);
    expect(await ctx.store.latestChange()).toBe(feed);
  });

  it('five live secrets: each one works (every slot is compared); a sixth is refused', async () => {
    const { client, secret } = await clients.createClient(ctx, { name: 'five', grants: [API] });
    const values = [secret];
    for (let i = 0; i < 4; i++) values.push((await secrets.addSecret(ctx, client.id)).value);
    await expect(secrets.addSecret(ctx, client.id)).rejects.toMatchObject({
      code: 'too_many_secrets',
      message: `client ${client.id} has 5 live secrets already: revoke one, or rotate with a grace period shorter than theirs`,
    });
    await t.sync();
    for (const value of values) expect((await tokenWith(client.id, value)).status).toBe(200);
    expect((await tokenWith(client.id, 'x'.repeat(43))).status).toBe(401);
    const [first] = await secrets.listSecrets(ctx, client.id);
    await secrets.revokeSecret(ctx, client.id, first!.id);
    await t.sync();
    expect((await tokenWith(client.id, values[0]!)).status).toBe(401);
    expect((await tokenWith(client.id, values[4]!)).status).toBe(200);
  });

  it('the last-used time is written off the token path, at most once a minute per secret', async () => {
    const { client, secret } = await clients.createClient(ctx, { name: 'used', grants: [API] });
    await t.sync();
    const before = clock.now();
    expect((await tokenWith(client.id, secret)).status).toBe(200);
    expect((await secrets.listSecrets(ctx, client.id))[0]!.lastUsedAt).toBeNull();
    await t.server.runtime.secretUsage.flush();
    const used = (await secrets.listSecrets(ctx, client.id))[0]!.lastUsedAt!;
    expect(Date.parse(used)).toBeGreaterThanOrEqual(before - 1);
    expect(Date.parse(used)).toBeLessThanOrEqual(clock.now());
    expect((await tokenWith(client.id, secret)).status).toBe(200);
    await t.server.runtime.secretUsage.flush();
    expect((await secrets.listSecrets(ctx, client.id))[0]!.lastUsedAt).toBe(used);
  });
});

describe('the CLI', () => {
  it('client secrets list|add|revoke and rotate-secret --grace', { timeout: 60_000 }, async () => {
    const ws = workspace();
    try {
      await ws.ok('audience', 'add', API);
      await ws.ok('client', 'create', '--name', 'svc', '--id', 'svc', '--grant', API);
      const listed = (await ws.ok('client', 'secrets', 'list', 'svc', '--json')).json as { id: string }[];
      expect(listed).toEqual([
        {
          id: expect.stringMatching(/^sec_/),
          created_at: expect.any(String),
          expires_at: null,
          last_used_at: null,
        },
      ]);
      const added = (await ws.ok('client', 'secrets', 'add', 'svc', '--expires', '90d', '--json')).json;
      expect(added).toEqual({
        id: expect.stringMatching(/^sec_/),
        created_at: expect.any(String),
        expires_at: expect.any(String),
        last_used_at: null,
        client_id: 'svc',
        client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      });
      expect(Date.parse(added.expires_at) - Date.parse(added.created_at)).toBe(90 * 86_400_000);
      const rotated = await ws.ok('client', 'rotate-secret', 'svc', '--grace', '1h');
      expect(rotated.stdout).toMatch(
        /^Secret rotated; the others work until \S+Z\. The new secret is shown this once: store it now\./,
      );
      const after = (await ws.ok('client', 'secrets', 'list', 'svc', '--json')).json as {
        id: string;
        expires_at: string | null;
      }[];
      expect(after).toHaveLength(3);
      expect(after.filter((s) => s.expires_at === null)).toHaveLength(1);
      expect((await ws.ok('client', 'secrets', 'revoke', 'svc', listed[0]!.id)).stdout).toBe(
        `Secret ${listed[0]!.id} of svc revoked.\n`,
      );
      const again = await ws.run('client', 'secrets', 'revoke', 'svc', listed[0]!.id, '--json');
      expect(again.code).toBe(1);
      expect(JSON.parse(again.stderr)).toEqual({
        error: 'secret_not_found',
        message: `client svc has no secret ${listed[0]!.id}`,
      });
      const bad = await ws.run('client', 'rotate-secret', 'svc', '--grace', 'soon', '--json');
      expect(bad.code).toBe(2);
    } finally {
      ws.remove();
    }
  });
});
