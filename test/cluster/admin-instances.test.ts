import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVERY_SCOPE } from '../../src/management/context.js';
import { loadConfig } from '../../src/config/index.js';
import { ADMIN_SCOPES, adminAudienceUrl, ensureAdminAudience } from '../../src/management/builtin.js';
import { audiences, clients, grants, secrets, type ManagementContext } from '../../src/management/index.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres.js';
import { sharedDatabaseEnv, startInstances } from '../helpers/instances.js';
import { tokenParams } from '../helpers/provision.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import type { Serve } from '../helpers/process.js';
import { postToken } from '../helpers/server.js';
import { sleep, waitFor } from '../helpers/wait.js';

/**
 * Two Tessera processes on one fresh PostgreSQL database, with one issuer and one master key: an admin
 * client's token from one is accepted by the admin API of both, and once the client is disabled (by a
 * management call on the shared database, as another instance or the CLI would make it) every instance
 * refuses its next admin call within one second, long before the token expires; enabled again, its new tokens
 * are let in everywhere within one second, and its old one stays refused (disabling revoked it).
 */

const ISSUER = 'https://auth.tessera.test';
const ADMIN = `${ISSUER}/admin/v1`;
const DISABLED = 'the client of this token is disabled or deleted';

describe('an admin client disabled, on two instances on one PostgreSQL', () => {
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let store: PostgresStore;
  let ctx: ManagementContext;
  let instances: Serve[] = [];

  const listKeys = (instance: Serve, token: string) =>
    fetch(`${instance.url}/admin/v1/keys`, { headers: { authorization: `Bearer ${token}` } });
  /** Time until `check` holds on each instance (polled every 20 ms, from one moment), per instance. */
  const eachInstance = (check: (instance: Serve) => Promise<boolean>, timeoutMs = 1000) =>
    Promise.all(instances.map((i) => waitFor(() => check(i), timeoutMs, 20)));

  beforeAll(async () => {
    db = await createTestDatabase();
    env = sharedDatabaseEnv(db.url, ISSUER);
    // Both start at once on the empty database, with the same issuer and master key (one env).
    instances = await startInstances(env, 2);
    // Management calls of this process, on the same database the instances share.
    store = openPostgresStore(db.url, { max: 2 });
    ctx = { store, config: loadConfig(env), actor: 'test', holds: EVERY_SCOPE };
  }, 60_000);

  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop('SIGKILL')));
    await store?.close();
    await db?.drop();
  });

  it('is refused by every instance within one second of being disabled, and let back in once enabled', async () => {
    const [a] = instances as [Serve, Serve];
    expect(adminAudienceUrl(ctx.config)).toBe(ADMIN);
    // The instances made the admin audience at start; this finds it as it is.
    await ensureAdminAudience(ctx);
    const { client, secret } = await clients.createClient(ctx, {
      name: 'ops',
      grants: [ADMIN],
      scopes: { [ADMIN]: [...ADMIN_SCOPES] },
    });
    const answer = await postToken(a.url, tokenParams(client.id, secret, ADMIN));
    expect(answer.status).toBe(200);
    expect(answer.body.scope).toBe([...ADMIN_SCOPES].sort().join(' '));
    const token = answer.body.access_token as string;
    // B knows the new client once it has answered for it (an id it lacked had it read the feed); its admin API
    // asks only what it knows.
    expect((await postToken(instances[1]!.url, tokenParams(client.id, secret, ADMIN))).status).toBe(200);

    // The token from A is accepted by the admin API of both instances.
    for (const instance of instances) {
      const response = await listKeys(instance, token);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(response.headers.get('cache-control')).toBe('no-store');
      const body = (await response.json()) as { items: { alg: string; status: string }[]; next: null };
      expect(body.items.map((k) => `${k.alg} ${k.status}`).sort()).toEqual([
        'ES256 active',
        'EdDSA active',
        'PS256 active',
        'RS256 active',
      ]);
      expect(body.next).toBeNull();
    }

    // Disabled: every instance refuses the next call within one second.
    await clients.setEnabled(ctx, client.id, false);
    const refused = new Map<Serve, Response>();
    const toRefuse = await eachInstance(async (i) => {
      const response = await listKeys(i, token);
      if (response.status === 200) {
        await response.body?.cancel();
        return false;
      }
      refused.set(i, response);
      return true;
    });
    console.log(`disabled → 401 after ${toRefuse.join(' ms, ')} ms (instances A, B)`);
    for (const ms of toRefuse) expect(ms).toBeLessThan(1000);
    for (const instance of instances) {
      const response = refused.get(instance)!;
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe(
        `Bearer error="invalid_token", error_description="${DISABLED}", DPoP algs="ES256 ES384 RS256 PS256 EdDSA Ed25519"`,
      );
      expect(response.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(await response.json()).toEqual({
        type: 'urn:tessera:problem:invalid_token',
        title: 'Unauthorized',
        status: 401,
        detail: DISABLED,
      });
    }

    // Enabled again: its old token stays refused (disabling revoked it: INTERFACE.md, re-enabling never revives
    // old tokens), and a new token is accepted by every instance within one second.
    // A token issued in the second it was disabled is revoked too (to the second): the new one comes later.
    const disabledAt = Date.parse((await clients.getClient(ctx, client.id)).revokedBefore!);
    await sleep(Math.max(0, Math.floor(disabledAt / 1000) * 1000 + 1000 - Date.now()));
    await clients.setEnabled(ctx, client.id, true);
    let fresh: Awaited<ReturnType<typeof postToken>> | undefined;
    await waitFor(
      async () => {
        fresh = await postToken(a.url, tokenParams(client.id, secret, ADMIN));
        return fresh.status === 200;
      },
      1000,
      100,
    );
    const toAccept = await eachInstance(async (i) => {
      const response = await listKeys(i, fresh!.body.access_token as string);
      await response.body?.cancel();
      if (response.status === 200) return true;
      expect(response.status).toBe(401);
      return false;
    });
    console.log(`enabled → a new token 200 after ${toAccept.join(' ms, ')} ms (instances A, B)`);
    for (const ms of toAccept) expect(ms).toBeLessThan(1000);
    for (const instance of instances) {
      const response = await listKeys(instance, token);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe(
        'Bearer error="invalid_token", error_description="the access token has been revoked", DPoP algs="ES256 ES384 RS256 PS256 EdDSA Ed25519"',
      );
      expect(await response.json()).toMatchObject({ detail: 'the access token has been revoked' });
    }
  });

  it("a scope taken from an admin client's grant, then the grant itself, stops working on every instance within one second", async () => {
    await ensureAdminAudience(ctx);
    const { client, secret } = await clients.createClient(ctx, {
      name: 'ops',
      grants: [ADMIN],
      scopes: { [ADMIN]: ['keys:read', 'audit:read'] },
    });
    const answer = await postToken(instances[0]!.url, tokenParams(client.id, secret, ADMIN));
    expect(answer.status).toBe(200);
    expect((await postToken(instances[1]!.url, tokenParams(client.id, secret, ADMIN))).status).toBe(200);
    const token = answer.body.access_token as string;
    const status = async (instance: Serve, path: string) => {
      const response = await fetch(`${instance.url}/admin/v1${path}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      await response.body?.cancel();
      return { status: response.status, challenge: response.headers.get('www-authenticate') };
    };
    for (const instance of instances) expect((await status(instance, '/keys')).status).toBe(200);

    // keys:read taken from the grant (the token still says it has it): refused everywhere within a second.
    const started = Date.now();
    await grants.setGrantScopes(ctx, client.id, ADMIN, ['audit:read']);
    const toRefuse = await eachInstance(async (i) => (await status(i, '/keys')).status === 403);
    console.log(`scope removed → 403 after ${toRefuse.join(' ms, ')} ms (instances A, B)`);
    expect(Date.now() - started).toBeLessThan(1000);
    for (const instance of instances) {
      expect(await status(instance, '/keys')).toEqual({
        status: 403,
        challenge: 'Bearer error="insufficient_scope", scope="keys:read"',
      });
      // The scope it still has works.
      expect((await status(instance, '/audit-events')).status).toBe(200);
    }

    // The grant deleted: the token holds nothing any more.
    await grants.removeGrant(ctx, client.id, ADMIN);
    const toNothing = await eachInstance(async (i) => (await status(i, '/audit-events')).status === 403);
    console.log(`grant deleted → 403 after ${toNothing.join(' ms, ')} ms (instances A, B)`);
    for (const ms of toNothing) expect(ms).toBeLessThan(1000);
    for (const instance of instances)
      expect(await status(instance, '/audit-events')).toEqual({
        status: 403,
        challenge: 'Bearer error="insufficient_scope", scope="audit:read"',
      });
  });

  it('a scope removed from an audience on one side is refused by every instance within one second', async () => {
    const API = 'https://orders.tessera.test';
    await audiences.addAudience(ctx, {
      url: API,
      scopes: [{ name: 'orders:read' }, { name: 'orders:write' }],
    });
    const { client, secret } = await clients.createClient(ctx, {
      name: 'svc',
      grants: [API],
      scopes: { [API]: ['orders:read', 'orders:write'] },
    });
    const ask = (instance: Serve, scope?: string) =>
      postToken(instance.url, {
        grant_type: 'client_credentials',
        client_id: client.id,
        client_secret: secret,
        audience: API,
        ...(scope === undefined ? {} : { scope }),
      });
    // Both instances know the grant and its scopes (a first request loads the client into each cache).
    for (const instance of instances) {
      await waitFor(async () => (await ask(instance, 'orders:read')).status === 200, 1000, 20);
    }
    await audiences.removeScopes(ctx, API, ['orders:read']);
    const toRefuse = await eachInstance(async (i) => (await ask(i, 'orders:read')).status === 400);
    console.log(`scope removed → invalid_scope after ${toRefuse.join(' ms, ')} ms (instances A, B)`);
    for (const ms of toRefuse) expect(ms).toBeLessThan(1000);
    for (const instance of instances) {
      expect((await ask(instance, 'orders:read')).body).toEqual({
        error: 'invalid_scope',
        error_description: 'scope orders:read is not granted to this client for this audience',
      });
      expect((await ask(instance)).body.scope).toBe('orders:write');
    }
  });

  it('a revoked secret is refused by every instance within one second; the new one keeps working', async () => {
    const API = 'https://secrets.tessera.test';
    await audiences.addAudience(ctx, { url: API });
    const { client, secret: old } = await clients.createClient(ctx, { name: 'rotating', grants: [API] });
    const rotated = await clients.rotateSecret(ctx, client.id, { graceSeconds: 3600 });
    const ask = (instance: Serve, secret: string) =>
      postToken(instance.url, tokenParams(client.id, secret, API));
    for (const instance of instances) {
      await waitFor(async () => (await ask(instance, rotated.secret)).status === 200, 1000, 20);
      expect((await ask(instance, old)).status).toBe(200);
    }
    const oldId = rotated.client.secrets.find((s) => s.id !== rotated.secretId)!.id;
    await secrets.revokeSecret(ctx, client.id, oldId);
    const toRefuse = await eachInstance(async (i) => (await ask(i, old)).status === 401);
    console.log(`secret revoked → 401 after ${toRefuse.join(' ms, ')} ms (instances A, B)`);
    for (const ms of toRefuse) expect(ms).toBeLessThan(1000);
    for (const instance of instances) {
      expect((await ask(instance, old)).body).toEqual({
        error: 'invalid_client',
        error_description: 'client authentication failed',
      });
      expect((await ask(instance, rotated.secret)).status).toBe(200);
    }
  });
});
