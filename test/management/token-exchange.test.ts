/**
 * The management rules of token exchange (INTERFACE.md, "Token exchange"; MANAGEMENT.md's fields): a grant's
 * token_exchange and an audience's resource_server_client_ids, their checks, their audit, the admin audience that
 * has neither, and a deleted client leaving every audience's list. On a real SQLite store.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManagementError } from '../../src/management/errors.js';
import { adminAudienceUrl, ensureAdminAudience } from '../../src/management/builtin.js';
import {
  audiences,
  audit,
  clients,
  grants,
  views,
  type ManagementContext,
} from '../../src/management/index.js';
import type { Store } from '../../src/store/types.js';
import { rejection } from '../helpers/assert.js';
import { managementContext } from '../helpers/management.js';

const ISSUER = 'https://tessera.example.com';
const ORDERS = 'https://orders.example.com';
const BILLING = 'https://billing.example.com';

let store: Store;
let ctx: ManagementContext;
beforeEach(async () => {
  ({ store, ctx } = await managementContext({ TESSERA_ISSUER: ISSUER }));
  await audiences.addAudience(ctx, { url: ORDERS, scopes: [{ name: 'orders:read' }] });
  await audiences.addAudience(ctx, { url: BILLING });
  for (const id of ['orders-api', 'billing-api', 'gateway'])
    await clients.createClient(ctx, { id, name: id });
});
afterEach(async () => {
  await store.close();
});

async function refusal(promise: Promise<unknown>): Promise<[string, string, string | undefined]> {
  const error = await rejection(promise, ManagementError);
  return [error.code, error.message, error.field];
}

const eventsOf = async (...types: Parameters<typeof audit.queryAudit>[1]['types'] & object) =>
  (await audit.queryAudit(ctx, { types })).map((e) => [e.type, e.target, e.audience, e.changes]);

describe("a grant's token_exchange", () => {
  it('is false unless set; a PUT sets it, one without it leaves it (undefined) and false clears it; audited', async () => {
    const made = await grants.setGrant(ctx, 'orders-api', BILLING, {});
    expect(made.grant.tokenExchange).toBe(false);
    const orders = await audiences.getAudience(ctx, ORDERS);
    const set = await grants.putGrant(ctx, 'orders-api', orders, {
      scopes: ['orders:read'],
      tokenExchange: true,
    });
    expect(set).toEqual({
      grant: { audience: ORDERS, scopes: ['orders:read'], claims: null, tokenExchange: true },
      created: true,
    });
    expect(views.grantJson('orders-api', orders, set.grant)).toEqual({
      client_id: 'orders-api',
      audience_id: orders.id,
      audience: ORDERS,
      scopes: ['orders:read'],
      claims: null,
      token_exchange: true,
    });
    // Scopes only: token_exchange stays as it is.
    await grants.putGrant(ctx, 'orders-api', orders, { scopes: [] });
    expect((await clients.getClient(ctx, 'orders-api')).grants).toEqual([
      { audience: BILLING, scopes: [], claims: null, tokenExchange: false },
      { audience: ORDERS, scopes: [], claims: null, tokenExchange: true },
    ]);
    await grants.putGrant(ctx, 'orders-api', orders, { tokenExchange: false });
    // The same again writes nothing.
    await grants.putGrant(ctx, 'orders-api', orders, { tokenExchange: false });
    expect(await eventsOf('grant.created', 'grant.updated')).toEqual([
      ['grant.updated', 'orders-api', ORDERS, { token_exchange: { from: true, to: false } }],
      ['grant.updated', 'orders-api', ORDERS, { scopes: { from: ['orders:read'], to: [] } }],
      ['grant.created', 'orders-api', ORDERS, { scopes: ['orders:read'], token_exchange: true }],
      ['grant.created', 'orders-api', BILLING, { scopes: [] }],
    ]);
  });

  it('a new client is created with the grants it names allowing exchange, and the event says so', async () => {
    const { client } = await clients.createClient(ctx, {
      id: 'worker',
      name: 'worker',
      grants: [ORDERS, BILLING],
      grantTokenExchange: [ORDERS],
    });
    expect(client.grants).toEqual([
      { audience: BILLING, scopes: [], claims: null, tokenExchange: false },
      { audience: ORDERS, scopes: [], claims: null, tokenExchange: true },
    ]);
    const [created] = await audit.queryAudit(ctx, { types: ['client.created'], clientId: 'worker' });
    expect(created!.changes!.grants).toEqual([
      { audience: BILLING, scopes: [] },
      { audience: ORDERS, scopes: [], token_exchange: true },
    ]);
    expect(
      await refusal(
        clients.createClient(ctx, {
          id: 'worker-2',
          name: 'w2',
          grants: [BILLING],
          grantTokenExchange: [ORDERS],
        }),
      ),
    ).toEqual([
      'invalid_field',
      `token_exchange is given for ${ORDERS}, which is not granted`,
      'token_exchange',
    ]);
  });

  it('is refused on a grant of the admin audience, whatever the face: exchanged tokens never reach the admin API', async () => {
    const admin = await ensureAdminAudience(ctx);
    const message = `a grant of ${adminAudienceUrl(ctx.config)} (Tessera's admin API) cannot allow token exchange: exchanged tokens never reach the admin API`;
    expect(
      await refusal(grants.putGrant(ctx, 'gateway', admin, { scopes: ['keys:read'], tokenExchange: true })),
    ).toEqual(['invalid_field', message, 'token_exchange']);
    expect(
      await refusal(
        clients.createClient(ctx, {
          id: 'ops',
          name: 'ops',
          adminScopes: ['keys:read'],
          grantTokenExchange: [admin.url],
        }),
      ),
    ).toEqual(['invalid_field', message, 'token_exchange']);
    expect(await clients.getClient(ctx, 'gateway')).toMatchObject({ grants: [] });
    // false is what it is: allowed.
    await grants.putGrant(ctx, 'gateway', admin, { scopes: ['keys:read'], tokenExchange: false });
  });

  it('follows the authorization rule of grants: a change of an admin client needs every scope it holds', async () => {
    const { client } = await clients.createClient(ctx, {
      id: 'ops',
      name: 'ops',
      adminScopes: ['keys:write'],
    });
    const weak: ManagementContext = { ...ctx, actor: 'client:weak', holds: new Set(['clients:write']) };
    const orders = await audiences.getAudience(ctx, ORDERS);
    const error = await rejection(
      grants.putGrant(weak, client.id, orders, { tokenExchange: true }),
      ManagementError,
    );
    expect([error.code, error.scopes]).toEqual(['insufficient_scope', ['keys:write']]);
    expect((await clients.getClient(ctx, 'ops')).grants.map((g) => g.audience)).toEqual([
      adminAudienceUrl(ctx.config),
    ]);
  });
});

describe("an audience's resource_server_client_ids", () => {
  it('are set at creation and by a change (each once, sorted), shown, and audited', async () => {
    const added = await audiences.addAudience(ctx, {
      url: 'https://inventory.example.com',
      resourceServerClientIds: ['orders-api', 'billing-api', 'orders-api'],
    });
    expect(views.audienceJson(added)).toMatchObject({
      resource_server_client_ids: ['billing-api', 'orders-api'],
    });
    const updated = await audiences.updateAudience(ctx, ORDERS, { resourceServerClientIds: ['orders-api'] });
    expect(views.audienceJson(updated).resource_server_client_ids).toEqual(['orders-api']);
    // The same list again writes nothing; [] clears it.
    await audiences.updateAudience(ctx, ORDERS, { resourceServerClientIds: ['orders-api'] });
    await audiences.updateAudience(ctx, ORDERS, { resourceServerClientIds: [] });
    expect((await audiences.getAudience(ctx, ORDERS)).resourceServerClientIds).toEqual([]);
    expect(views.audienceJson(await audiences.getAudience(ctx, BILLING)).resource_server_client_ids).toEqual(
      [],
    );
    expect(await eventsOf('audience.created', 'audience.updated')).toEqual([
      [
        'audience.updated',
        updated.id,
        ORDERS,
        { resource_server_client_ids: { from: ['orders-api'], to: [] } },
      ],
      [
        'audience.updated',
        updated.id,
        ORDERS,
        { resource_server_client_ids: { from: [], to: ['orders-api'] } },
      ],
      [
        'audience.created',
        added.id,
        'https://inventory.example.com',
        {
          name: null,
          token_ttl: null,
          signing_alg: null,
          scopes: [],
          resource_server_client_ids: ['billing-api', 'orders-api'],
        },
      ],
      [
        'audience.created',
        expect.any(String),
        BILLING,
        { name: null, token_ttl: null, signing_alg: null, scopes: [] },
      ],
      [
        'audience.created',
        expect.any(String),
        ORDERS,
        {
          name: null,
          token_ttl: null,
          signing_alg: null,
          scopes: [{ name: 'orders:read', description: null }],
        },
      ],
    ]);
  });

  it('refuses a client that does not exist, naming its place, and a malformed id; nothing changes', async () => {
    expect(
      await refusal(
        audiences.updateAudience(ctx, ORDERS, { resourceServerClientIds: ['orders-api', 'nobody'] }),
      ),
    ).toEqual([
      'invalid_field',
      "client nobody does not exist: an audience's resource servers are existing clients",
      'resource_server_client_ids/1',
    ]);
    expect(
      await refusal(
        audiences.addAudience(ctx, { url: 'https://new.example.com', resourceServerClientIds: ['nobody'] }),
      ),
    ).toEqual([
      'invalid_field',
      "client nobody does not exist: an audience's resource servers are existing clients",
      'resource_server_client_ids/0',
    ]);
    expect(
      await refusal(
        audiences.updateAudience(ctx, ORDERS, { resourceServerClientIds: ['ok-id', 'no spaces'] }),
      ),
    ).toEqual([
      'invalid_field',
      'client id must be 3 to 128 characters of A-Z a-z 0-9 . _ ~ -',
      'resource_server_client_ids/1',
    ]);
    expect((await audiences.getAudience(ctx, ORDERS)).resourceServerClientIds).toEqual([]);
    expect(await store.findAudience('https://new.example.com')).toBeUndefined();
  });

  it('names at most 100 clients', async () => {
    const ids = Array.from({ length: 101 }, (_, i) => `rs-${String(i).padStart(3, '0')}`);
    expect(await refusal(audiences.updateAudience(ctx, ORDERS, { resourceServerClientIds: ids }))).toEqual([
      'invalid_field',
      'an audience names at most 100 resource servers',
      'resource_server_client_ids',
    ]);
    for (const id of ids.slice(0, 100)) await clients.createClient(ctx, { id, name: id });
    const set = await audiences.updateAudience(ctx, ORDERS, { resourceServerClientIds: ids.slice(0, 100) });
    expect(set.resourceServerClientIds).toHaveLength(100);
  });

  it("cannot be set on the admin audience: it is Tessera's own", async () => {
    await ensureAdminAudience(ctx);
    const url = adminAudienceUrl(ctx.config);
    expect(
      await refusal(audiences.updateAudience(ctx, url, { resourceServerClientIds: ['gateway'] })),
    ).toEqual([
      'audience_builtin',
      `audience ${url} is Tessera's admin API: it cannot be changed or deleted`,
      undefined,
    ]);
    expect((await audiences.getAudience(ctx, url)).resourceServerClientIds).toEqual([]);
  });

  it('a deleted client leaves every audience that names it, in its transaction, and its event says which', async () => {
    await audiences.updateAudience(ctx, ORDERS, { resourceServerClientIds: ['orders-api', 'gateway'] });
    await audiences.updateAudience(ctx, BILLING, { resourceServerClientIds: ['gateway'] });
    await clients.deleteClient(ctx, 'gateway');
    expect((await audiences.getAudience(ctx, ORDERS)).resourceServerClientIds).toEqual(['orders-api']);
    expect((await audiences.getAudience(ctx, BILLING)).resourceServerClientIds).toEqual([]);
    await clients.deleteClient(ctx, 'billing-api');
    expect(await eventsOf('client.deleted')).toEqual([
      ['client.deleted', 'billing-api', null, null],
      ['client.deleted', 'gateway', null, { resource_server_of: { from: [BILLING, ORDERS], to: [] } }],
    ]);
  });
});
