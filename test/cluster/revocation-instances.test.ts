/**
 * Revocation across instances (INTERFACE.md, "Revocation and introspection"): two `tessera serve` processes on one
 * PostgreSQL database, without and with Redis. A token revoked at one, a client disabled, a client's tokens
 * revoked through the admin API of one: inactive at the other's introspection within a second. A restarted
 * instance still knows the denylist (it is in the store, loaded at start).
 */
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { adminAudienceUrl, ensureAdminAudience } from '../../src/management/builtin.js';
import { EVERY_SCOPE } from '../../src/management/context.js';
import { audiences, clients, type ManagementContext } from '../../src/management/index.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres.js';
import { sharedDatabaseEnv, startInstances } from '../helpers/instances.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { startServe, type Serve } from '../helpers/process.js';
import { tokenParams } from '../helpers/provision.js';
import { dropPrefix, REDIS_URL, testPrefix } from '../helpers/redis.js';
import { basic, postToken } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const ISSUER = 'https://auth.tessera.test';
const API = 'https://api.example.com';

interface Caller {
  id: string;
  secret: string;
}

describe.each([
  ['without Redis', false],
  ['with Redis', true],
] as const)('revocation on two instances on one PostgreSQL, %s', (_name, redis) => {
  let db: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let store: PostgresStore;
  let ctx: ManagementContext;
  let instances: Serve[] = [];
  const prefix = testPrefix();
  let app: Caller;
  let rs: Caller;
  let ops: Caller;

  const create = async (input: Parameters<typeof clients.createClient>[1]): Promise<Caller> => {
    const { client, secret } = await clients.createClient(ctx, input);
    return { id: client.id, secret: secret! };
  };
  const form = (instance: Serve, path: string, as: Caller, params: Record<string, string>) =>
    fetch(`${instance.url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic(as.id, as.secret),
      },
      body: new URLSearchParams(params).toString(),
    });
  const active = async (instance: Serve, token: string): Promise<boolean> => {
    const response = await form(instance, '/oauth/introspect', rs, { token });
    expect(response.status).toBe(200);
    return ((await response.json()) as { active: boolean }).active;
  };
  /** A token of `as` from `instance`, once that instance knows the client (it learns of it within a second). */
  const tokenAt = async (instance: Serve, as: Caller, audience = API): Promise<string> => {
    let token = '';
    await waitFor(
      async () => {
        const answer = await postToken(instance.url, tokenParams(as.id, as.secret, audience));
        token = answer.body.access_token as string;
        return answer.status === 200;
      },
      2000,
      100,
    );
    return token;
  };
  /** Milliseconds until `token` is inactive at `instance`'s introspection (polled every 20 ms). */
  const untilInactive = (instance: Serve, token: string) =>
    waitFor(async () => !(await active(instance, token)), 2000, 20);

  beforeAll(async () => {
    db = await createTestDatabase();
    env = sharedDatabaseEnv(
      db.url,
      ISSUER,
      redis ? { TESSERA_REDIS_URL: REDIS_URL, TESSERA_REDIS_PREFIX: prefix } : {},
    );
    instances = await startInstances(env, 2);
    store = openPostgresStore(db.url, { max: 2 });
    ctx = { store, config: loadConfig(env), actor: 'cli:test', holds: EVERY_SCOPE };
    await ensureAdminAudience(ctx);
    await audiences.addAudience(ctx, { url: API });
    app = await create({ name: 'app', grants: [API] });
    rs = await create({ name: 'resource server', adminScopes: ['tokens:introspect'] });
    ops = await create({ name: 'ops', adminScopes: ['clients:read', 'clients:write'] });
    // Both instances know the resource server before the clocks start.
    for (const instance of instances)
      await waitFor(
        async () => (await form(instance, '/oauth/introspect', rs, { token: 'x' })).status === 200,
        2000,
      );
  }, 60_000);

  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop('SIGKILL')));
    await store?.close();
    await db?.drop();
    if (redis) await dropPrefix(prefix);
  });

  it('a token revoked at one instance is inactive at the other within a second', async () => {
    const [a, b] = instances as [Serve, Serve];
    const token = await tokenAt(a, app);
    const kept = await tokenAt(a, app);
    expect(await active(b, token)).toBe(true);
    const revoked = await form(a, '/oauth/revoke', app, { token });
    expect(revoked.status).toBe(200);
    const ms = await untilInactive(b, token);
    console.log(`revoked at A → inactive at B after ${ms} ms`);
    expect(ms).toBeLessThan(1000);
    expect(await active(a, token)).toBe(false);
    expect(await active(b, kept)).toBe(true);
  });

  it('a disabled client’s tokens are inactive at every instance within a second', async () => {
    const svc = await create({ name: 'svc', grants: [API] });
    // A token from each instance: each knows the new client then (an id it lacked had it read the feed), and
    // introspection asks only what the instance knows.
    const [token] = await Promise.all(instances.map((instance) => tokenAt(instance, svc)));
    for (const instance of instances) expect(await active(instance, token!)).toBe(true);
    await clients.setEnabled(ctx, svc.id, false);
    const times = await Promise.all(instances.map((i) => untilInactive(i, token!)));
    console.log(`disabled → inactive after ${times.join(' ms, ')} ms (instances A, B)`);
    for (const ms of times) expect(ms).toBeLessThan(1000);
  });

  it("revoke-tokens through one instance's admin API: inactive at the other within a second", async () => {
    const [a, b] = instances as [Serve, Serve];
    const token = await tokenAt(b, app);
    expect(await active(b, token)).toBe(true);
    const admin = await tokenAt(a, ops, adminAudienceUrl(ctx.config));
    const answer = await fetch(`${a.url}/admin/v1/clients/${app.id}/revoke-tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(answer.status).toBe(200);
    const { revoked_before } = (await answer.json()) as { revoked_before: string };
    expect(decodeJwt(token).iat! * 1000).toBeLessThanOrEqual(Date.parse(revoked_before));
    const ms = await untilInactive(b, token);
    console.log(`revoke-tokens at A → inactive at B after ${ms} ms`);
    expect(ms).toBeLessThan(1000);
    expect(await active(a, token)).toBe(false);
  });

  it("a client deleted through one instance and made again at once under its id: the old tokens stay inactive everywhere, the new one's grants are its own", async () => {
    const [a, b] = instances as [Serve, Serve];
    const OTHER = 'https://other.example.com';
    await audiences.addAudience(ctx, { url: OTHER });
    const old = await create({ name: 'old', id: 'reborn', grants: [API] });
    const [token] = await Promise.all(instances.map((instance) => tokenAt(instance, old)));
    for (const instance of instances) expect(await active(instance, token!)).toBe(true);
    const admin = await tokenAt(a, ops, adminAudienceUrl(ctx.config));
    const deleted = await fetch(`${a.url}/admin/v1/clients/reborn`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(deleted.status).toBe(204);
    // Within the same second, another writer (the CLI, apply) gives the id to a client of another audience.
    const reborn = await create({ name: 'new', id: 'reborn', grants: [OTHER] });
    // Watched for 1.5 s on both instances (the old revival came within 2 s): never active again.
    const until = Date.now() + 1500;
    while (Date.now() < until) {
      for (const instance of instances) {
        const answer = await form(instance, '/oauth/introspect', rs, { token: token! });
        expect(await answer.json()).toEqual({ active: false });
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // The new client gets tokens of its own audience only, active everywhere; never the old one's.
    const mine = await tokenAt(b, reborn, OTHER);
    for (const instance of instances) expect(await active(instance, mine)).toBe(true);
    const refused = await postToken(b.url, tokenParams(reborn.id, reborn.secret, API));
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe('invalid_target');
    expect(await active(a, token!)).toBe(false);
  });

  it('an instance started again still knows the denylist', async () => {
    const [a, b] = instances as [Serve, Serve];
    // A second after the revoke-tokens above: these tokens are not affected by it.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const token = await tokenAt(a, app);
    const kept = await tokenAt(a, app);
    expect((await form(a, '/oauth/revoke', app, { token })).status).toBe(200);
    await untilInactive(b, token);
    await b.stop();
    const restarted = await startServe({ ...env, TESSERA_PORT: String(b.port) });
    instances[1] = restarted;
    expect(await active(restarted, token)).toBe(false);
    expect(await active(restarted, kept)).toBe(true);
  });
});
