/**
 * Token exchange's fields over the admin API (MANAGEMENT.md): a grant's `token_exchange` (PUT, GET) and an
 * audience's `resource_server_client_ids` (POST, PATCH, GET), in the OpenAPI document and in real answers, each
 * answer checked against the document's schema for its operation and status; the refusals (an unknown client,
 * the admin audience) and the audit trail's changes, exactly.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAudienceUrl } from '../../src/management/builtin.js';
import { clients, type ManagementContext } from '../../src/management/index.js';
import { adminCall, adminClient, adminToken, type AdminAnswer } from '../helpers/admin.js';
import { managementOf } from '../helpers/management.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type Schema = { type?: string; properties?: Record<string, Schema>; [key: string]: unknown };
type Operation = {
  operationId: string;
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
};
type Doc = { paths: Record<string, Record<string, Operation>> };

let t: TestServer;
let ctx: ManagementContext;
let doc: Doc;
let token: string;
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t);
  doc = (await (await fetch(`${t.url}/admin/v1/openapi.json`)).json()) as Doc;
  token = await adminToken(t, ctx);
  for (const id of ['orders-api', 'billing-api', 'gateway'])
    await clients.createClient(ctx, { id, name: id });
});
afterAll(async () => {
  await t?.close();
});

function operation(operationId: string): Operation {
  for (const methods of Object.values(doc.paths))
    for (const op of Object.values(methods)) if (op.operationId === operationId) return op;
  throw new Error(`the document has no operation ${operationId}`);
}

/** An admin API call, its answer checked against the document's schema for the operation and status. */
async function call(
  operationId: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<AdminAnswer> {
  const answer = await adminCall(t, { token }, method, path, body, headers);
  const declared = operation(operationId).responses[String(answer.status)];
  expect(
    declared,
    `${operationId} answered ${answer.status}, which the document does not declare`,
  ).toBeDefined();
  if (answer.status !== 204) {
    const type = answer.headers.get('content-type')?.split(';')[0] ?? '';
    const validate = ajv.compile(declared!.content![type]!.schema);
    expect(validate(answer.body), JSON.stringify(validate.errors)).toBe(true);
  }
  return answer;
}

const changesOf = async (type: string, target: string) =>
  (await call('listAuditEvents', 'GET', `/audit-events?type=${type}&limit=50`)).body.items
    .filter((e: { target: string }) => e.target === target)
    .map((e: { actor: string; changes: unknown }) => [e.actor, e.changes]);

const merge = { 'content-type': 'application/merge-patch+json' };

describe('the OpenAPI document', () => {
  it('has resource_server_client_ids on the audience and its POST and PATCH, token_exchange on the grant and its PUT', () => {
    const body = (id: string) => operation(id).requestBody!.content['application/json']!.schema.properties!;
    const answer = (id: string, status: string) =>
      operation(id).responses[status]!.content!['application/json']!.schema.properties!;
    for (const [id, status] of [
      ['getAudience', '200'],
      ['createAudience', '201'],
      ['updateAudience', '200'],
    ] as const)
      expect(answer(id, status).resource_server_client_ids).toMatchObject({
        type: 'array',
        items: { type: 'string' },
      });
    for (const id of ['createAudience', 'updateAudience'])
      expect(body(id).resource_server_client_ids).toMatchObject({
        type: 'array',
        maxItems: 100,
        items: { type: 'string' },
      });
    expect(answer('putGrant', '200').token_exchange).toMatchObject({ type: 'boolean' });
    expect(answer('putGrant', '201').token_exchange).toMatchObject({ type: 'boolean' });
    expect(body('putGrant').token_exchange).toMatchObject({ type: 'boolean' });
    const list = operation('listGrants').responses['200']!.content!['application/json']!.schema;
    expect(JSON.stringify(list)).toContain('"token_exchange"');
  });
});

describe("an audience's resource_server_client_ids", () => {
  it('POST sets them (each once, sorted), GET shows them, PATCH replaces and clears them; audited', async () => {
    const created = await call('createAudience', 'POST', '/audiences', {
      identifier: 'https://orders.example.com',
      resource_server_client_ids: ['orders-api', 'gateway', 'orders-api'],
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect(created.body).toEqual({
      id,
      identifier: 'https://orders.example.com',
      name: null,
      token_ttl: null,
      signing_alg: null,
      scopes: [],
      resource_server_client_ids: ['gateway', 'orders-api'],
      token_profile: 'rfc9068',
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect((await call('getAudience', 'GET', `/audiences/${id}`)).body).toEqual(created.body);

    const plain = await call('createAudience', 'POST', '/audiences', {
      identifier: 'https://plain.example.com',
    });
    expect(plain.body.resource_server_client_ids).toEqual([]);

    const patched = await call('updateAudience', 'PATCH', `/audiences/${id}`, {
      resource_server_client_ids: ['billing-api'],
    });
    expect(patched.status).toBe(200);
    expect(patched.body.resource_server_client_ids).toEqual(['billing-api']);
    // A PATCH that leaves them out keeps them.
    const renamed = await call('updateAudience', 'PATCH', `/audiences/${id}`, { name: 'Orders' }, merge);
    expect(renamed.body).toMatchObject({ name: 'Orders', resource_server_client_ids: ['billing-api'] });
    const cleared = await call('updateAudience', 'PATCH', `/audiences/${id}`, {
      resource_server_client_ids: [],
    });
    expect(cleared.body.resource_server_client_ids).toEqual([]);

    expect(await changesOf('audience.updated', id)).toEqual([
      [expect.stringMatching(/^client:/), { resource_server_client_ids: { from: ['billing-api'], to: [] } }],
      [expect.stringMatching(/^client:/), { name: { from: null, to: 'Orders' } }],
      [
        expect.stringMatching(/^client:/),
        { resource_server_client_ids: { from: ['gateway', 'orders-api'], to: ['billing-api'] } },
      ],
    ]);
    expect((await changesOf('audience.created', id))[0][1]).toEqual({
      name: null,
      token_ttl: null,
      signing_alg: null,
      scopes: [],
      resource_server_client_ids: ['gateway', 'orders-api'],
    });
  });

  it('400 for a client that does not exist (its place named), a malformed id, or more than 100; nothing changes', async () => {
    const created = await call('createAudience', 'POST', '/audiences', {
      identifier: 'https://refusals.example.com',
      resource_server_client_ids: ['gateway'],
    });
    const id = created.body.id as string;
    const unknown = await call('updateAudience', 'PATCH', `/audiences/${id}`, {
      resource_server_client_ids: ['gateway', 'nobody'],
    });
    expect(unknown.status).toBe(400);
    expect(unknown.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
    const detail = "client nobody does not exist: an audience's resource servers are existing clients";
    expect(unknown.body).toEqual({
      type: 'urn:tessera:problem:invalid_field',
      title: expect.any(String),
      status: 400,
      detail,
      errors: [{ pointer: '/resource_server_client_ids/1', detail }],
    });
    const onCreate = await call('createAudience', 'POST', '/audiences', {
      identifier: 'https://never.example.com',
      resource_server_client_ids: ['nobody'],
    });
    expect(onCreate.status).toBe(400);
    expect(onCreate.body.errors).toEqual([{ pointer: '/resource_server_client_ids/0', detail }]);

    const malformed = await call('updateAudience', 'PATCH', `/audiences/${id}`, {
      resource_server_client_ids: ['no spaces allowed'],
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body.errors).toEqual([
      {
        pointer: '/resource_server_client_ids/0',
        detail: 'client id must be 3 to 128 characters of A-Z a-z 0-9 . _ ~ -',
      },
    ]);
    const tooMany = await call('updateAudience', 'PATCH', `/audiences/${id}`, {
      resource_server_client_ids: Array.from({ length: 101 }, (_, i) => `client-${i}`),
    });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.errors).toEqual([
      { pointer: '/resource_server_client_ids', detail: 'must NOT have more than 100 items' },
    ]);
    const notAList = await call('updateAudience', 'PATCH', `/audiences/${id}`, {
      resource_server_client_ids: 'gateway',
    });
    expect(notAList.status).toBe(400);
    expect(notAList.body.errors).toEqual([
      { pointer: '/resource_server_client_ids', detail: 'must be array' },
    ]);

    expect((await call('getAudience', 'GET', `/audiences/${id}`)).body.resource_server_client_ids).toEqual([
      'gateway',
    ]);
    expect(
      (await call('listAudiences', 'GET', '/audiences?limit=500')).body.items.map(
        (a: { identifier: string }) => a.identifier,
      ),
    ).not.toContain('https://never.example.com');
  });

  it("the admin audience's cannot be set: 409 audience_builtin", async () => {
    const list = await call('listAudiences', 'GET', '/audiences?limit=500');
    const admin = list.body.items.find(
      (a: { identifier: string }) => a.identifier === adminAudienceUrl(t.config),
    );
    expect(admin.resource_server_client_ids).toEqual([]);
    const refused = await call('updateAudience', 'PATCH', `/audiences/${admin.id}`, {
      resource_server_client_ids: ['gateway'],
    });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({
      type: 'urn:tessera:problem:audience_builtin',
      title: expect.any(String),
      status: 409,
      detail: `audience ${adminAudienceUrl(t.config)} is Tessera's admin API: it cannot be changed or deleted`,
    });
  });

  it('a deleted client leaves every audience that names it; its deletion event says which', async () => {
    await clients.createClient(ctx, { id: 'short-lived', name: 'short-lived' });
    const a = await call('createAudience', 'POST', '/audiences', {
      identifier: 'https://a.example.com',
      resource_server_client_ids: ['short-lived', 'gateway'],
    });
    expect((await call('deleteClient', 'DELETE', '/clients/short-lived')).status).toBe(204);
    expect(
      (await call('getAudience', 'GET', `/audiences/${a.body.id}`)).body.resource_server_client_ids,
    ).toEqual(['gateway']);
    expect(await changesOf('client.deleted', 'short-lived')).toEqual([
      [
        expect.stringMatching(/^client:/),
        { resource_server_of: { from: ['https://a.example.com'], to: [] } },
      ],
    ]);
  });
});

describe("a grant's token_exchange", () => {
  it('PUT sets it (201, then 200), a PUT without it is false, GET and the list show it; audited', async () => {
    const audience = await call('createAudience', 'POST', '/audiences', {
      identifier: 'https://inventory.example.com',
      scopes: [{ name: 'stock:read' }],
    });
    const audienceId = audience.body.id as string;
    const path = `/clients/gateway/grants/${audienceId}`;
    const created = await call('putGrant', 'PUT', path, { scopes: ['stock:read'], token_exchange: true });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      client_id: 'gateway',
      audience_id: audienceId,
      audience: 'https://inventory.example.com',
      scopes: ['stock:read'],
      claims: null,
      token_exchange: true,
    });
    const listed = await call('listGrants', 'GET', '/clients/gateway/grants');
    expect(listed.body.items).toContainEqual(created.body);

    // PUT sets the whole grant: left out, it is false.
    const replaced = await call('putGrant', 'PUT', path, { scopes: ['stock:read'] });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toEqual({ ...created.body, token_exchange: false });

    const wrong = await call('putGrant', 'PUT', path, { token_exchange: 'yes' });
    expect(wrong.status).toBe(400);
    expect(wrong.body.errors).toEqual([{ pointer: '/token_exchange', detail: 'must be boolean' }]);

    const events = (
      await call('listAuditEvents', 'GET', '/audit-events?client_id=gateway&limit=50')
    ).body.items
      .filter(
        (e: { type: string; audience: string }) =>
          e.type.startsWith('grant.') && e.audience === 'https://inventory.example.com',
      )
      .map((e: { type: string; changes: unknown }) => [e.type, e.changes]);
    expect(events).toEqual([
      ['grant.updated', { token_exchange: { from: true, to: false } }],
      ['grant.created', { scopes: ['stock:read'], token_exchange: true }],
    ]);
  });

  it('is refused on a grant of the admin audience: 400 naming /token_exchange; nothing changes', async () => {
    const list = await call('listAudiences', 'GET', '/audiences?limit=500');
    const admin = list.body.items.find(
      (a: { identifier: string }) => a.identifier === adminAudienceUrl(t.config),
    );
    const refused = await call('putGrant', 'PUT', `/clients/gateway/grants/${admin.id}`, {
      scopes: ['keys:read'],
      token_exchange: true,
    });
    const detail = `a grant of ${adminAudienceUrl(t.config)} (Tessera's admin API) cannot allow token exchange: exchanged tokens never reach the admin API`;
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({
      type: 'urn:tessera:problem:invalid_field',
      title: expect.any(String),
      status: 400,
      detail,
      errors: [{ pointer: '/token_exchange', detail }],
    });
    expect(
      (await call('listGrants', 'GET', '/clients/gateway/grants')).body.items.map(
        (g: { audience: string }) => g.audience,
      ),
    ).not.toContain(adminAudienceUrl(t.config));
  });

  it('a grant change of an admin client needs its scopes: 403 for a caller without them, even with token_exchange alone', async () => {
    await adminClient(t, ctx, ['keys:write'], 'keys-admin');
    const weak = await adminClient(t, ctx, ['clients:write', 'audiences:write']);
    const audience = await call('createAudience', 'POST', '/audiences', {
      identifier: 'https://x.example.com',
    });
    const refused = await adminCall(
      t,
      { token: weak.token },
      'PUT',
      `/clients/keys-admin/grants/${audience.body.id}`,
      { token_exchange: true },
    );
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toBe(
      'Bearer error="insufficient_scope", scope="keys:write"',
    );
  });
});
