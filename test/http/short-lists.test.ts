/**
 * MANAGEMENT.md, Lists: "Every list is paged so, the short ones too (a client's secrets, grants and federated
 * credentials): `next` is `null` on the last page", with `?limit=` and an opaque cursor `?after=` (a cursor the
 * server did not issue is a 400 problem+json). A client's grants are the reference; its secrets and federated
 * credentials must answer the same way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  audiences,
  clients,
  federation,
  secrets,
  type ManagementContext,
} from '../../src/management/index.js';
import { adminCall, adminToken } from '../helpers/admin.js';
import { managementOf } from '../helpers/management.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let t: TestServer;
let ctx: ManagementContext;
let admin: string;
let secretClient: string;
let fedClient: string;
let grantClient: string;

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t);
  await audiences.addAudience(ctx, { url: 'https://a.example.com' });
  await audiences.addAudience(ctx, { url: 'https://b.example.com' });
  admin = await adminToken(t, ctx);
  secretClient = (await clients.createClient(ctx, { name: 'secrets', id: 'lists-secrets' })).client.id;
  await secrets.addSecret(ctx, secretClient, {});
  fedClient = (
    await clients.createClient(ctx, { name: 'federated', id: 'lists-fed', authMethod: 'private_key_jwt' })
  ).client.id;
  for (const name of ['one', 'two'])
    await federation.addFederatedCredential(ctx, fedClient, {
      name,
      issuer: `https://${name}.issuer.example.com`,
      subject: 'worker',
    });
  grantClient = (
    await clients.createClient(ctx, {
      name: 'grants',
      id: 'lists-grants',
      grants: ['https://a.example.com', 'https://b.example.com'],
    })
  ).client.id;
  await t.sync();
});
afterAll(async () => {
  await t?.close();
});

/** Each list, by the path it is at once its client is made. */
const LISTS: [string, () => string][] = [
  ['grants', () => `/clients/${grantClient}/grants`],
  ['secrets', () => `/clients/${secretClient}/secrets`],
  ['federated credentials', () => `/clients/${fedClient}/federated-credentials`],
];

describe("a client's short lists are paged like every list", () => {
  for (const [name, pathOf] of LISTS) {
    it(`${name}: the whole list is one page with next null`, async () => {
      const path = pathOf();
      const r = await adminCall(t, { token: admin }, 'GET', path);
      expect(r.status).toBe(200);
      expect(r.body.items).toHaveLength(2);
      expect(r.body).toEqual({ items: r.body.items, next: null });
    });

    it(`${name}: ?limit=1 gives a page and a cursor; ?after= the rest; a forged cursor is a 400`, async () => {
      const path = pathOf();
      const whole = await adminCall(t, { token: admin }, 'GET', path);
      const first = await adminCall(t, { token: admin }, 'GET', `${path}?limit=1`);
      expect({ status: first.status, items: first.body.items }).toEqual({
        status: 200,
        items: [whole.body.items[0]],
      });
      expect(first.body.next).toEqual(expect.any(String));
      const second = await adminCall(
        t,
        { token: admin },
        'GET',
        `${path}?limit=1&after=${encodeURIComponent(first.body.next as string)}`,
      );
      expect({ status: second.status, body: second.body }).toEqual({
        status: 200,
        body: { items: [whole.body.items[1]], next: null },
      });
      const forged = await adminCall(t, { token: admin }, 'GET', `${path}?after=forged`);
      expect({ status: forged.status, type: forged.body?.type }).toEqual({
        status: 400,
        type: 'urn:tessera:problem:invalid_cursor',
      });
    });
  }
});
