/**
 * Token exchange across instances (INTERFACE.md, "Token exchange": never a token for a disabled original client):
 * two `tessera serve` processes on one PostgreSQL database. A caller disabled through the admin API of one
 * instance is refused an exchange at the other within a second, and so is a token exchanged for it before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { adminAudienceUrl, ensureAdminAudience } from '../../src/management/builtin.js';
import { EVERY_SCOPE } from '../../src/management/context.js';
import { audiences, clients, type ManagementContext } from '../../src/management/index.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres.js';
import { sharedDatabaseEnv, startInstances } from '../helpers/instances.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import type { Serve } from '../helpers/process.js';
import { exchangeParams, tokenParams } from '../helpers/provision.js';
import { postToken } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const ISSUER = 'https://auth.tessera.test';
const FRONT = 'https://front.example.com';
const MIDDLE = 'https://middle.example.com';
const BACK = 'https://back.example.com';

interface Caller {
  id: string;
  secret: string;
}

describe('token exchange on two instances on one PostgreSQL', () => {
  let db: TestDatabase;
  let store: PostgresStore;
  let ctx: ManagementContext;
  let instances: Serve[] = [];
  let bravo: Caller;
  let charlie: Caller;
  let ops: Caller;

  const create = async (input: Parameters<typeof clients.createClient>[1]): Promise<Caller> => {
    const { client, secret } = await clients.createClient(ctx, input);
    return { id: client.id, secret: secret! };
  };
  /** A client credentials token of `as` from `instance`, once that instance knows the client. */
  const tokenAt = async (instance: Serve, as: Caller, audience: string): Promise<string> => {
    let token = '';
    await waitFor(
      async () => {
        const answer = await postToken(instance.url, tokenParams(as.id, as.secret, audience));
        token = answer.body.access_token as string;
        return answer.status === 200;
      },
      2000,
      50,
    );
    return token;
  };
  const exchange = (instance: Serve, actor: Caller, subject: string, audience: string) =>
    postToken(instance.url, exchangeParams(actor, subject, audience));
  const REFUSED = {
    error: 'invalid_request',
    error_description: 'subject_token is not an active access token of this server',
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    const env = sharedDatabaseEnv(db.url, ISSUER);
    instances = await startInstances(env, 2);
    store = openPostgresStore(db.url, { max: 2 });
    ctx = { store, config: loadConfig(env), actor: 'cli:test', holds: EVERY_SCOPE };
    await ensureAdminAudience(ctx);
    for (const url of [FRONT, MIDDLE, BACK]) await audiences.addAudience(ctx, { url });
    bravo = await create({ name: 'bravo', grants: [MIDDLE], grantTokenExchange: [MIDDLE] });
    charlie = await create({ name: 'charlie', grants: [BACK], grantTokenExchange: [BACK] });
    ops = await create({ name: 'ops', adminScopes: ['clients:read', 'clients:write'] });
    await audiences.updateAudience(ctx, FRONT, { resourceServerClientIds: [bravo.id] });
    await audiences.updateAudience(ctx, MIDDLE, { resourceServerClientIds: [charlie.id] });
  }, 60_000);

  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop('SIGKILL')));
    await store?.close();
    await db?.drop();
  });

  it('a caller disabled at instance A is refused an exchange at instance B within a second', async () => {
    const [a, b] = instances as [Serve, Serve];
    const caller = await create({ name: 'caller', grants: [FRONT] });
    const fromCaller = await tokenAt(a, caller, FRONT);
    // B knows every part (the clients, the grants, the resource servers) before the clock starts.
    let held = '';
    await waitFor(
      async () => {
        const answer = await exchange(b, bravo, fromCaller, MIDDLE);
        held = answer.body.access_token as string;
        return answer.status === 200;
      },
      2000,
      50,
    );
    await waitFor(async () => (await exchange(b, charlie, held, BACK)).status === 200, 2000, 50);

    const admin = await tokenAt(a, ops, adminAudienceUrl(ctx.config));
    const disabled = await fetch(`${a.url}/admin/v1/clients/${caller.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ enabled: false }),
    });
    expect(disabled.status).toBe(200);
    const started = Date.now();
    const ms = await waitFor(
      async () => (await exchange(b, bravo, fromCaller, MIDDLE)).status === 400,
      2000,
      20,
    );
    console.log(`caller disabled at A → exchange refused at B after ${ms} ms`);
    expect(ms).toBeLessThan(1000);
    const refused = await exchange(b, bravo, fromCaller, MIDDLE);
    expect([refused.status, refused.body]).toEqual([400, REFUSED]);
    // The token bravo got for the caller before: refused as a subject token too, at both instances.
    for (const instance of instances) {
      const again = await exchange(instance, charlie, held, BACK);
      expect([again.status, again.body]).toEqual([400, REFUSED]);
    }
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
