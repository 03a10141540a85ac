/**
 * The admin API (MANAGEMENT.md) from outside: a program with the issuer URL and an admin client's id and
 * secret gets a token at /oauth/token and calls /admin/v1 through a client driven by the OpenAPI document
 * (operations by operationId, paths from the document's templates). Every answer it gets, success or error, is
 * checked against the document's schema for that operation and status.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clients as clientOps } from '../../src/management/index.js';
import { ADMIN_SCOPES, adminAudienceUrl, ensureAdminAudience } from '../../src/management/builtin.js';
import { exportConfig } from '../../src/management/declarative/index.js';
import type { ManagementContext } from '../../src/management/index.js';
import { managementOf } from '../helpers/management.js';
import { tokenParams } from '../helpers/provision.js';
import { selfSigned } from '../helpers/pki.js';
import { postToken, startTestServer, type TestServer } from '../helpers/server.js';

type Doc = {
  openapi: string;
  servers: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
};
type Operation = {
  operationId: string;
  responses: Record<string, { content?: Record<string, { schema: object }> }>;
};

interface Answer {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON answers, checked by schema
}

let t: TestServer;
let doc: Doc;
let ctx: ManagementContext;
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
/** operationId → statuses answered and checked against the document. */
const seen = new Map<string, Set<number>>();

const API = 'https://api.example.com';

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t, 'test');
  doc = (await (await fetch(`${t.url}/admin/v1/openapi.json`)).json()) as Doc;
});
afterAll(async () => {
  await t?.close();
});

/** Creates an admin client (as `tessera client create --admin` does) and gets a token for it. */
async function adminToken(scopes: readonly string[] = ADMIN_SCOPES): Promise<{ id: string; token: string }> {
  await ensureAdminAudience(ctx);
  const url = adminAudienceUrl(t.config);
  const { client, secret } = await clientOps.createClient(ctx, {
    name: 'ops',
    grants: [url],
    scopes: { [url]: [...scopes] },
  });
  await t.sync();
  const answer = await postToken(t.url, tokenParams(client.id, secret, url));
  expect(answer.status).toBe(200);
  expect(answer.body.scope).toBe([...scopes].sort().join(' '));
  return { id: client.id, token: answer.body.access_token as string };
}

function operation(operationId: string): { method: string; path: string; op: Operation } {
  for (const [path, methods] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(methods))
      if (op.operationId === operationId) return { method: method.toUpperCase(), path, op };
  throw new Error(`the document has no operation ${operationId}`);
}

/** Calls an operation of the document; checks the answer against the document's schema for its status. */
async function call(
  token: string | undefined,
  operationId: string,
  input: {
    params?: Record<string, string>;
    query?: Record<string, string | number>;
    body?: unknown;
    headers?: Record<string, string>;
    raw?: string;
  } = {},
): Promise<Answer> {
  const { method, path, op } = operation(operationId);
  const url = new URL(
    doc.servers[0]!.url +
      path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(input.params![name]!)),
  );
  for (const [k, v] of Object.entries(input.query ?? {})) url.searchParams.set(k, String(v));
  const headers: Record<string, string> = { ...input.headers };
  if (token) headers.authorization = `Bearer ${token}`;
  const payload = input.raw ?? (input.body === undefined ? undefined : JSON.stringify(input.body));
  if (payload !== undefined) headers['content-type'] ??= 'application/json';
  const response = await fetch(url, { method, headers, body: payload });
  const text = await response.text();
  const answer: Answer = {
    status: response.status,
    headers: response.headers,
    body: text === '' ? undefined : JSON.parse(text),
  };
  const declared = op.responses[String(answer.status)];
  expect(
    declared,
    `${operationId} answered ${answer.status}, which the document does not declare`,
  ).toBeDefined();
  const type = response.headers.get('content-type')?.split(';')[0] ?? '';
  if (answer.status === 204) expect(text).toBe('');
  else {
    const schema = declared!.content?.[type]?.schema;
    expect(schema, `${operationId} ${answer.status}: no schema for ${type}`).toBeDefined();
    const validate = ajv.compile(schema!);
    expect(validate(answer.body), JSON.stringify(validate.errors)).toBe(true);
  }
  expect(response.headers.get('cache-control')).toBe('no-store');
  let statuses = seen.get(operationId);
  if (!statuses) seen.set(operationId, (statuses = new Set()));
  statuses.add(answer.status);
  return answer;
}

const problem = (status: number, code: string, detail: string, extra: object = {}) => ({
  type: `urn:tessera:problem:${code}`,
  title: expect.any(String) as unknown,
  status,
  detail,
  ...extra,
});

describe('the OpenAPI document', () => {
  it('is served without a token and is a valid OpenAPI 3.1 document', async () => {
    const response = await fetch(`${t.url}/admin/v1/openapi.json`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([{ url: `${t.url}/admin/v1` }]);
    const result = await new Validator().validate(doc as unknown as Parameters<Validator['validate']>[0]);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('describes every route of MANAGEMENT.md that exists', () => {
    const routes = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(routes.sort()).toEqual(
      [
        'GET /audiences',
        'POST /audiences',
        'GET /audiences/{id}',
        'PATCH /audiences/{id}',
        'DELETE /audiences/{id}',
        'GET /audiences/{id}/grants',
        'GET /clients',
        'POST /clients',
        'GET /clients/{id}',
        'PATCH /clients/{id}',
        'DELETE /clients/{id}',
        'GET /clients/{id}/grants',
        'GET /clients/{id}/secrets',
        'POST /clients/{id}/secrets',
        'DELETE /clients/{id}/secrets/{secret_id}',
        'GET /clients/{id}/federated-credentials',
        'POST /clients/{id}/federated-credentials',
        'GET /clients/{id}/federated-credentials/{fid}',
        'PATCH /clients/{id}/federated-credentials/{fid}',
        'DELETE /clients/{id}/federated-credentials/{fid}',
        'PUT /clients/{id}/grants/{audience_id}',
        'DELETE /clients/{id}/grants/{audience_id}',
        'POST /clients/{id}/revoke-tokens',
        'GET /keys',
        'POST /keys/rotate',
        'POST /keys/{kid}/retire',
        'GET /audit-events',
        'GET /stats',
        'GET /operators',
        'POST /operators',
        'GET /operators/{id}',
        'PATCH /operators/{id}',
        'DELETE /operators/{id}',
        'POST /operators/{id}/reset',
        'POST /apply',
        'POST /imports',
      ].sort(),
    );
  });
});

describe('authentication (RFC 6750)', () => {
  it('no token, a malformed one, one for another audience: 401 invalid_token, nothing revealed', async () => {
    await t.addAudience(API);
    const other = await t.createClient([API]);
    const foreign = await postToken(t.url, tokenParams(other.id, other.secret, API));
    for (const [token, detail] of [
      [undefined, 'an access token is required (Authorization: Bearer or DPoP)'],
      ['not-a-jwt', 'the access token is not valid for this API'],
      [foreign.body.access_token as string, 'the access token is not valid for this API'],
    ] as const) {
      const r = await call(token, 'listClients');
      expect(r.status).toBe(401);
      // Both schemes the admin API takes (RFC 9449 §7.1), the error on the one used.
      expect(r.headers.get('www-authenticate')).toBe(
        `Bearer error="invalid_token", error_description="${detail}", DPoP algs="ES256 ES384 RS256 PS256 EdDSA Ed25519"`,
      );
      expect(r.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
      expect(r.body).toEqual(problem(401, 'invalid_token', detail));
    }
  });

  it('authentication comes before the body: without a token, a bad body is 401, not 400', async () => {
    const r = await call(undefined, 'createClient', { raw: '{"colour": 1' });
    expect(r.status).toBe(401);
    expect(r.body.type).toBe('urn:tessera:problem:invalid_token');
  });

  it('a scope missing: 403 insufficient_scope naming it', async () => {
    const { token } = await adminToken(['clients:read']);
    expect((await call(token, 'listClients')).status).toBe(200);
    const r = await call(token, 'createClient', { body: { name: 'x' } });
    expect(r.status).toBe(403);
    expect(r.headers.get('www-authenticate')).toBe(
      'Bearer error="insufficient_scope", scope="clients:write"',
    );
    expect(r.body).toEqual(problem(403, 'insufficient_scope', 'this call needs the scope clients:write'));
  });

  it('a disabled admin client is shut out within a second, before its token expires', async () => {
    const { id, token } = await adminToken();
    expect((await call(token, 'listKeys')).status).toBe(200);
    await clientOps.setEnabled(ctx, id, false);
    const start = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - start < 1000) status = (await call(token, 'listKeys')).status;
    expect(status).toBe(401);
    expect(Date.now() - start).toBeLessThan(1000);
  });
});

describe('audiences', () => {
  let token: string;
  beforeAll(async () => {
    ({ token } = await adminToken());
  });

  it('POST 201 with Location and ETag, GET, PATCH with If-Match, 412 on a stale one, DELETE 204', async () => {
    const created = await call(token, 'createAudience', {
      body: { identifier: 'https://orders.example.com', name: 'Orders', token_ttl: '15m' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^aud_[A-Za-z0-9_-]{16}$/),
      identifier: 'https://orders.example.com',
      name: 'Orders',
      token_ttl: 900,
      signing_alg: null,
      scopes: [],
      resource_server_client_ids: [],
      token_profile: 'rfc9068',
      created_at: expect.stringMatching(/Z$/),
      updated_at: created.body.created_at,
    });
    const id = created.body.id as string;
    expect(created.headers.get('location')).toBe(`${t.url}/admin/v1/audiences/${id}`);
    const etag = created.headers.get('etag')!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{27}"$/);

    const read = await call(token, 'getAudience', { params: { id } });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(created.body);
    expect(read.headers.get('etag')).toBe(etag);

    const patched = await call(token, 'updateAudience', {
      params: { id },
      body: { name: null, signing_alg: 'EdDSA' },
      headers: { 'content-type': 'application/merge-patch+json', 'if-match': etag },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: null, signing_alg: 'EdDSA', token_ttl: 900 });
    expect(patched.headers.get('etag')).not.toBe(etag);

    const stale = await call(token, 'updateAudience', {
      params: { id },
      body: { name: 'late' },
      headers: { 'if-match': etag },
    });
    expect(stale.status).toBe(412);
    expect(stale.body.type).toBe('urn:tessera:problem:precondition_failed');
    expect((await call(token, 'getAudience', { params: { id } })).body.name).toBeNull();
    expect(
      (await call(token, 'deleteAudience', { params: { id }, headers: { 'if-match': etag } })).status,
    ).toBe(412);

    expect((await call(token, 'deleteAudience', { params: { id } })).status).toBe(204);
    const gone = await call(token, 'getAudience', { params: { id } });
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual(problem(404, 'audience_not_found', `audience ${id} does not exist`));
  });

  it("GET /audiences/{id}/grants: the audience's grants by client id; 404 for no such audience", async () => {
    const created = await call(token, 'createAudience', {
      body: { identifier: 'https://granted.example.com', scopes: [{ name: 'a' }] },
    });
    const id = created.body.id as string;
    for (const client_id of ['granted-b', 'granted-a'])
      await call(token, 'createClient', { body: { client_id, name: client_id } });
    await call(token, 'putGrant', { params: { id: 'granted-b', audience_id: id }, body: { scopes: ['a'] } });
    await call(token, 'putGrant', {
      params: { id: 'granted-a', audience_id: id },
      body: { token_exchange: true },
    });
    const listed = await call(token, 'listAudienceGrants', { params: { id } });
    expect(listed.status).toBe(200);
    const grant = { audience_id: id, audience: 'https://granted.example.com', claims: null };
    expect(listed.body).toEqual({
      items: [
        { client_id: 'granted-a', ...grant, scopes: [], token_exchange: true },
        { client_id: 'granted-b', ...grant, scopes: ['a'], token_exchange: false },
      ],
      next: null,
    });
    // Who holds which grant is the clients' business: audiences:read alone does not show it.
    const { token: audiencesOnly } = await adminToken(['audiences:read']);
    expect((await call(audiencesOnly, 'getAudience', { params: { id } })).status).toBe(200);
    const refused = await call(audiencesOnly, 'listAudienceGrants', { params: { id } });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toBe(
      'Bearer error="insufficient_scope", scope="clients:read"',
    );
    expect(refused.body).toEqual(
      problem(403, 'insufficient_scope', 'this call needs the scope clients:read'),
    );
    const missing = await call(token, 'listAudienceGrants', { params: { id: 'aud_nothing' } });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual(problem(404, 'audience_not_found', 'audience aud_nothing does not exist'));
    for (const client_id of ['granted-a', 'granted-b'])
      expect((await call(token, 'deleteClient', { params: { id: client_id } })).status).toBe(204);
    expect((await call(token, 'deleteAudience', { params: { id } })).status).toBe(204);
  });

  it('409 on a duplicate identifier; 400 with pointers for bad fields and unknown ones', async () => {
    const body = { identifier: 'https://dup.example.com' };
    expect((await call(token, 'createAudience', { body })).status).toBe(201);
    const again = await call(token, 'createAudience', { body });
    expect(again.status).toBe(409);
    expect(again.body).toEqual(
      problem(409, 'audience_exists', 'audience https://dup.example.com is already registered'),
    );
    const bad = await call(token, 'createAudience', {
      body: { identifier: 'https://x.example.com', token_ttl: 'soon', colour: 'blue' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(
      expect.arrayContaining(['/colour', '/token_ttl']),
    );
    const rule = await call(token, 'createAudience', { body: { identifier: 'ftp://x.example.com' } });
    expect(rule.status).toBe(400);
    expect(rule.body).toEqual(
      problem(400, 'invalid_field', 'audience must be an http or https URL', {
        errors: [{ pointer: '/identifier', detail: 'audience must be an http or https URL' }],
      }),
    );
  });

  it('the built-in admin audience cannot be changed or deleted', async () => {
    const list = await call(token, 'listAudiences', { query: { limit: 500 } });
    const admin = list.body.items.find((a: { identifier: string }) => a.identifier === `${t.url}/admin/v1`);
    expect(admin.scopes.map((s: { name: string }) => s.name)).toEqual([...ADMIN_SCOPES].sort());
    const r = await call(token, 'deleteAudience', { params: { id: admin.id } });
    expect(r.status).toBe(409);
    expect(r.body.type).toBe('urn:tessera:problem:audience_builtin');
  });
});

describe('clients and grants', () => {
  let token: string;
  let adminId: string;
  beforeAll(async () => {
    ({ token, id: adminId } = await adminToken());
  });

  it('create (the secret once), grant with scopes, get a token with it, read the change audit', async () => {
    const audience = await call(token, 'createAudience', {
      body: { identifier: 'https://billing.example.com' },
    });
    const created = await call(token, 'createClient', {
      body: { name: 'billing', client_id: 'billing-svc', description: 'pays', quota_per_minute: 100 },
    });
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`${t.url}/admin/v1/clients/billing-svc`);
    expect(created.body).toMatchObject({
      client_id: 'billing-svc',
      name: 'billing',
      description: 'pays',
      enabled: true,
      token_endpoint_auth_method: 'client_secret_basic',
      quota_per_minute: 100,
      revoked_before: null,
      client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    const secret = created.body.client_secret as string;
    const read = await call(token, 'getClient', { params: { id: 'billing-svc' } });
    expect(read.body).not.toHaveProperty('client_secret');
    expect(read.headers.get('etag')).toBe(created.headers.get('etag'));

    const put = await call(token, 'putGrant', {
      params: { id: 'billing-svc', audience_id: audience.body.id },
    });
    expect(put.status).toBe(201);
    expect(put.body).toEqual({
      client_id: 'billing-svc',
      audience_id: audience.body.id,
      audience: 'https://billing.example.com',
      scopes: [],
      claims: null,
      token_exchange: false,
    });
    const same = await call(token, 'putGrant', {
      params: { id: 'billing-svc', audience_id: audience.body.id },
    });
    expect(same.status).toBe(200);
    const undefinedScope = await call(token, 'putGrant', {
      params: { id: 'billing-svc', audience_id: audience.body.id },
      body: { scopes: ['pay'] },
    });
    expect(undefinedScope.status).toBe(400);
    expect(undefinedScope.body.detail).toBe('audience https://billing.example.com defines no scope "pay"');
    expect((await call(token, 'listGrants', { params: { id: 'billing-svc' } })).body).toEqual({
      items: [put.body],
      next: null,
    });

    await t.sync();
    const issued = await postToken(t.url, tokenParams('billing-svc', secret, 'https://billing.example.com'));
    expect(issued.status).toBe(200);

    const events = await call(token, 'listAuditEvents', {
      query: { type: 'client.created', client_id: 'billing-svc' },
    });
    expect(events.body.items).toEqual([
      expect.objectContaining({
        type: 'client.created',
        actor: `client:${adminId}`,
        target: 'billing-svc',
        source: '127.0.0.1',
        changes: expect.objectContaining({ name: 'billing', description: 'pays' }),
      }),
    ]);
    expect(JSON.stringify(events.body)).not.toContain(secret);

    const patched = await call(token, 'updateClient', {
      params: { id: 'billing-svc' },
      body: { enabled: false },
    });
    expect(patched.body.enabled).toBe(false);
    // Disabling revokes the tokens it has (INTERFACE.md): revoked_before is the moment it was disabled.
    const disabledAt = patched.body.revoked_before as string;
    expect(Date.parse(disabledAt)).toBeGreaterThanOrEqual(
      Date.parse(patched.body.updated_at as string) - 1000,
    );
    const revoked = await call(token, 'revokeClientTokens', { params: { id: 'billing-svc' } });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toEqual({ revoked_before: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/) });
    expect(revoked.body.revoked_before >= disabledAt).toBe(true);
    expect((await call(token, 'getClient', { params: { id: 'billing-svc' } })).body.revoked_before).toBe(
      revoked.body.revoked_before,
    );
    const revocations = await call(token, 'listAuditEvents', {
      query: { type: 'client.tokens_revoked', client_id: 'billing-svc' },
    });
    expect(revocations.body.items).toEqual([
      expect.objectContaining({
        type: 'client.tokens_revoked',
        actor: `client:${adminId}`,
        target: 'billing-svc',
        source: '127.0.0.1',
        changes: { revoked_before: { from: disabledAt, to: revoked.body.revoked_before } },
      }),
    ]);
    const stale = await call(token, 'updateClient', {
      params: { id: 'billing-svc' },
      body: { enabled: true },
      headers: { 'if-match': read.headers.get('etag')! },
    });
    expect(stale.status).toBe(412);
    expect(stale.body.type).toBe('urn:tessera:problem:precondition_failed');
    expect(
      (await call(token, 'deleteGrant', { params: { id: 'billing-svc', audience_id: audience.body.id } }))
        .status,
    ).toBe(204);
    expect((await call(token, 'deleteClient', { params: { id: 'billing-svc' } })).status).toBe(204);
    expect((await call(token, 'getClient', { params: { id: 'billing-svc' } })).status).toBe(404);
    expect((await call(token, 'listGrants', { params: { id: 'billing-svc' } })).status).toBe(404);
    const noGrant = await call(token, 'deleteGrant', {
      params: { id: 'billing-svc', audience_id: audience.body.id },
    });
    expect(noGrant.status).toBe(404);
    expect((await call(token, 'deleteClient', { params: { id: 'billing-svc' } })).status).toBe(404);
    const gone = await call(token, 'revokeClientTokens', { params: { id: 'billing-svc' } });
    expect({ status: gone.status, body: gone.body }).toEqual({
      status: 404,
      body: problem(404, 'client_not_found', 'client billing-svc does not exist'),
    });
    expect((await call(token, 'createClient', { body: { name: 'dup', client_id: adminId } })).status).toBe(
      409,
    );
  });

  it('scopes of an audience, claims of a client and of a grant: set, read back, in the tokens; rules refused with 400', async () => {
    const audience = await call(token, 'createAudience', {
      body: {
        identifier: 'https://claims.example.com',
        scopes: [{ name: 'b:write' }, { name: 'a:read', description: 'read' }],
      },
    });
    expect(audience.body.scopes).toEqual([
      { name: 'a:read', description: 'read' },
      { name: 'b:write', description: null },
    ]);
    const made = await call(token, 'createClient', {
      body: { name: 'claimed', claims: { tenant_id: 'acme' } },
    });
    expect(made.body.claims).toEqual({ tenant_id: 'acme' });
    const put = await call(token, 'putGrant', {
      params: { id: made.body.client_id, audience_id: audience.body.id },
      body: { scopes: ['a:read', 'b:write'], claims: { plan: 'gold' } },
    });
    expect(put.body).toMatchObject({ scopes: ['a:read', 'b:write'], claims: { plan: 'gold' } });
    // Removing a scope from the audience takes it from the grant.
    const patched = await call(token, 'updateAudience', {
      params: { id: audience.body.id },
      body: { scopes: [{ name: 'a:read' }] },
    });
    expect(patched.body.scopes).toEqual([{ name: 'a:read', description: null }]);
    const listed = await call(token, 'listGrants', { params: { id: made.body.client_id } });
    expect(listed.body.items).toEqual([{ ...put.body, scopes: ['a:read'] }]);
    await t.sync();
    const issued = await postToken(
      t.url,
      tokenParams(made.body.client_id, made.body.client_secret, 'https://claims.example.com'),
    );
    expect(issued.body.scope).toBe('a:read');
    const { decodeJwt } = await import('jose');
    expect(decodeJwt(issued.body.access_token as string)).toMatchObject({ tenant_id: 'acme', plan: 'gold' });
    for (const [operationId, input, pointer, detail] of [
      [
        'updateClient',
        { params: { id: made.body.client_id }, body: { claims: { iss: 'x' } } },
        '/claims',
        'claim iss is registered: Tessera sets it, it cannot be a custom claim',
      ],
      [
        'updateClient',
        { params: { id: made.body.client_id }, body: { claims: { big: 'x'.repeat(5000) } } },
        '/claims',
        'claims are 5010 bytes as JSON; at most 4096',
      ],
      [
        'updateAudience',
        { params: { id: audience.body.id }, body: { scopes: [{ name: 'a b' }] } },
        '/scopes/0/name',
        'scope "a b" is not a scope token (RFC 6749 §3.3: printable ASCII but space, " and \\)',
      ],
    ] as const) {
      const refused = await call(token, operationId, input);
      expect(refused.status).toBe(400);
      expect(refused.body.errors).toEqual([{ pointer, detail }]);
    }
  });

  it('secrets: list (never the values), add with a grace (both work), revoke, at most five live', async () => {
    const made = await call(token, 'createClient', {
      body: { name: 'rotating', client_id: 'rotating', claims: null },
    });
    await call(token, 'putGrant', {
      params: {
        id: 'rotating',
        audience_id: (await call(token, 'listAudiences', { query: { limit: 500 } })).body.items[0].id,
      },
    });
    const first = made.body.client_secret as string;
    const listed = await call(token, 'listSecrets', { params: { id: 'rotating' } });
    expect(listed.body).toEqual({
      items: [
        {
          id: expect.stringMatching(/^sec_/),
          created_at: made.body.created_at,
          expires_at: null,
          last_used_at: null,
        },
      ],
      next: null,
    });
    expect(JSON.stringify(listed.body)).not.toContain(first);
    const added = await call(token, 'addSecret', { params: { id: 'rotating' }, body: { grace: '1h' } });
    expect(added.status).toBe(201);
    expect(added.body).toEqual({
      id: expect.stringMatching(/^sec_/),
      created_at: expect.any(String),
      expires_at: null,
      last_used_at: null,
      client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    const both = await call(token, 'listSecrets', { params: { id: 'rotating' } });
    expect(both.body.items).toHaveLength(2);
    expect(both.body.next).toBeNull();
    // Paged as every list is (MANAGEMENT.md, Lists): oldest first, a page at a time.
    const page1 = await call(token, 'listSecrets', { params: { id: 'rotating' }, query: { limit: 1 } });
    expect(page1.body.items).toEqual([both.body.items[0]]);
    expect(page1.body.next).toEqual(expect.any(String));
    const page2 = await call(token, 'listSecrets', {
      params: { id: 'rotating' },
      query: { limit: 1, after: page1.body.next },
    });
    expect(page2.body).toEqual({ items: [both.body.items[1]], next: null });
    expect(both.body.items.map((s: { id: string }) => s.id)).toEqual([
      listed.body.items[0].id,
      added.body.id,
    ]);
    const forged = await call(token, 'listSecrets', {
      params: { id: 'rotating' },
      query: { after: 'forged' },
    });
    expect(forged.status).toBe(400);
    expect(forged.body.type).toBe('urn:tessera:problem:invalid_cursor');
    const old = both.body.items.find((s: { id: string }) => s.id !== added.body.id);
    expect(Date.parse(old.expires_at) - Date.parse(added.body.created_at)).toBe(3600_000);
    await t.sync();
    const audience = (await call(token, 'listAudiences', { query: { limit: 500 } })).body.items[0].identifier;
    const tokenWith = (secret: string) =>
      postToken(t.url, {
        grant_type: 'client_credentials',
        client_id: 'rotating',
        client_secret: secret,
        audience,
      });
    expect((await tokenWith(first)).status).toBe(200);
    expect((await tokenWith(added.body.client_secret)).status).toBe(200);
    expect(
      (await call(token, 'revokeSecret', { params: { id: 'rotating', secret_id: old.id } })).status,
    ).toBe(204);
    await t.sync();
    expect((await tokenWith(first)).status).toBe(401);
    expect((await tokenWith(added.body.client_secret)).status).toBe(200);
    expect(
      (await call(token, 'revokeSecret', { params: { id: 'rotating', secret_id: old.id } })).status,
    ).toBe(404);
    // Four more without grace... a grace of 0 expires the others: add with a long grace to keep them all.
    for (let i = 0; i < 4; i++)
      expect(
        (await call(token, 'addSecret', { params: { id: 'rotating' }, body: { grace: '7d' } })).status,
      ).toBe(201);
    const sixth = await call(token, 'addSecret', { params: { id: 'rotating' }, body: { grace: '7d' } });
    expect(sixth.status).toBe(409);
    expect(sixth.body.type).toBe('urn:tessera:problem:too_many_secrets');
    expect((await call(token, 'listSecrets', { params: { id: 'nobody' } })).status).toBe(404);
    expect(
      (await call(token, 'addSecret', { params: { id: 'rotating' }, body: { grace: 'soon' } })).status,
    ).toBe(400);
  });

  it('pages through every client with the cursor; a cursor the server did not issue is 400', async () => {
    for (let i = 0; i < 7; i++) await call(token, 'createClient', { body: { name: `paged ${i}` } });
    const ids: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const query: Record<string, string | number> = { limit: 3 };
      if (after) query.after = after;
      const page = await call(token, 'listClients', { query });
      expect(page.body.items.length).toBeLessThanOrEqual(3);
      ids.push(...page.body.items.map((c: { client_id: string }) => c.client_id));
      after = page.body.next;
      pages++;
    } while (after);
    const all = (await clientOps.listClients(ctx)).map((c) => c.id).sort();
    expect(ids).toEqual(all);
    expect(pages).toBeGreaterThanOrEqual(3);

    const first = await call(token, 'listClients', { query: { limit: 1 } });
    const cursor = first.body.next as string;
    for (const bad of ['junk', `${cursor}x`, cursor.replace(/^./, 'A')])
      expect((await call(token, 'listClients', { query: { after: bad } })).status).toBe(400);
    // A cursor of another list is refused too.
    expect((await call(token, 'listAudiences', { query: { after: cursor } })).body.type).toBe(
      'urn:tessera:problem:invalid_cursor',
    );
    expect((await call(token, 'listClients', { query: { limit: 501 } })).status).toBe(400);
  });
});

describe('keys and the audit trail', () => {
  it('lists keys, rotates (with or without a body), retires; every change is in the audit', async () => {
    const { token } = await adminToken();
    const keys = await call(token, 'listKeys');
    expect(keys.body.items.map((k: { status: string }) => k.status)).toEqual(
      keys.body.items.map(() => 'active'),
    );
    const rotated = await call(token, 'rotateKeys', { body: { alg: 'ES256' } });
    expect(rotated.status).toBe(200);
    expect(rotated.body.items).toEqual([
      expect.objectContaining({ alg: 'ES256', already_scheduled: false, kid: expect.any(String) }),
    ]);
    const badAlg = await call(token, 'rotateKeys', { body: { alg: 'HS256' } });
    expect(badAlg.status).toBe(400);
    expect(badAlg.body.errors).toEqual([
      { pointer: '/alg', detail: 'must be one of "ES256", "RS256", "PS256", "EdDSA"' },
    ]);
    const again = await call(token, 'rotateKeys');
    expect(again.body.items.find((r: { alg: string }) => r.alg === 'ES256').already_scheduled).toBe(true);
    const next = rotated.body.items[0].kid as string;
    const retired = await call(token, 'retireKey', { params: { kid: next } });
    expect(retired.status).toBe(200);
    expect(retired.body.retired).toBe(next);
    expect((await call(token, 'retireKey', { params: { kid: 'nope' } })).status).toBe(404);
    expect(retired.status).toBe(200);
    const events = await call(token, 'listAuditEvents', { query: { type: 'key.rotated', limit: 500 } });
    expect(events.body.items.some((e: { target: string }) => e.target === next)).toBe(true);
    await t.server.runtime.audit.flush(); // token events reach the store through the spool
    const issued = await call(token, 'listAuditEvents', { query: { outcome: 'issued', limit: 2 } });
    expect(issued.body.items.map((e: { type: string }) => e.type)).toEqual(['token.issued', 'token.issued']);
    const older = await call(token, 'listAuditEvents', {
      query: { outcome: 'issued', limit: 2, after: issued.body.next as string },
    });
    expect(older.body.items[0].id).toBeLessThan(issued.body.items[1].id);
    expect((await call(token, 'listAuditEvents', { query: { since: 'yesterday' } })).status).toBe(400);
  });
});

describe('search, stats and operators', () => {
  let token: string;
  let adminId: string;
  beforeAll(async () => {
    ({ token, id: adminId } = await adminToken());
  });

  it('GET /clients?search= finds by client_id or name, any case, literally; its cursors are its own', async () => {
    for (const [client_id, name] of [
      ['search-alpha', 'Billing'],
      ['search-beta', 'billing reports'],
      ['other-gamma', 'BILLING_100%'],
      ['other-delta', 'Shipping'],
    ])
      expect((await call(token, 'createClient', { body: { client_id, name } })).status).toBe(201);
    const ids = async (search: string) =>
      (await call(token, 'listClients', { query: { search, limit: 500 } })).body.items.map(
        (c: { client_id: string }) => c.client_id,
      );
    expect(await ids('billing')).toEqual(['other-gamma', 'search-alpha', 'search-beta']);
    expect(await ids('SEARCH-')).toEqual(['search-alpha', 'search-beta']);
    // % and _ are characters, not patterns.
    expect(await ids('_100%')).toEqual(['other-gamma']);
    expect(await ids('%')).toEqual(['other-gamma']);
    expect(await ids('nothing like it')).toEqual([]);

    const first = await call(token, 'listClients', { query: { search: 'billing', limit: 1 } });
    expect(first.body.items.map((c: { client_id: string }) => c.client_id)).toEqual(['other-gamma']);
    const second = await call(token, 'listClients', {
      query: { search: 'billing', limit: 1, after: first.body.next as string },
    });
    expect(second.body.items.map((c: { client_id: string }) => c.client_id)).toEqual(['search-alpha']);
    const elsewhere = await call(token, 'listClients', { query: { after: first.body.next as string } });
    expect(elsewhere.status).toBe(400);
    expect(elsewhere.body.type).toBe('urn:tessera:problem:invalid_cursor');
    expect((await call(token, 'listClients', { query: { search: 'x'.repeat(201) } })).status).toBe(400);
  });

  it('GET /stats: counts, and tokens issued and refused per minute from the audit trail', async () => {
    await t.addAudience('https://stats.example.com');
    const client = await t.createClient(['https://stats.example.com']);
    const form = {
      grant_type: 'client_credentials',
      client_id: client.id,
      audience: 'https://stats.example.com',
    };
    for (let i = 0; i < 3; i++)
      expect((await postToken(t.url, { ...form, client_secret: client.secret })).status).toBe(200);
    for (let i = 0; i < 2; i++)
      expect((await postToken(t.url, { ...form, client_secret: 'wrong' })).status).toBe(401);
    await t.server.runtime.audit.flush();
    const before = Date.now();
    const stats = await call(token, 'getStats', { query: { minutes: 5 } });
    expect(stats.status).toBe(200);
    expect(stats.body.clients).toBe(await ctx.store.countClients());
    expect(stats.body.audiences).toBe((await ctx.store.listAudiences()).length);
    expect(stats.body.tokens).toHaveLength(5);
    const until = Date.parse(stats.body.until as string);
    expect(until % 60_000).toBe(0);
    expect(until).toBeGreaterThan(before - 60_000);
    expect(Date.parse(stats.body.from as string)).toBe(until - 5 * 60_000);
    const total = (key: 'issued' | 'refused') =>
      stats.body.tokens.reduce((n: number, m: Record<string, number>) => n + m[key]!, 0);
    // What this file's other tests issued and refused counts too: at least these five, exactly the trail's.
    const trail = await ctx.store.queryAuditEvents({
      since: stats.body.from as string,
      until: stats.body.until as string,
      limit: 100_000,
    });
    const count = (types: string[]) =>
      trail.filter((e) => types.includes(e.type)).reduce((n, e) => n + (e.count ?? 1), 0);
    expect(total('issued')).toBe(count(['token.issued']));
    expect(total('refused')).toBe(count(['token.refused', 'token.throttled']));
    expect(total('issued')).toBeGreaterThanOrEqual(3);
    expect(total('refused')).toBeGreaterThanOrEqual(2);
    for (const minutes of [0, 1441])
      expect((await call(token, 'getStats', { query: { minutes } })).status).toBe(400);
  });

  it('operators: create (the link once), read, change, reset, delete; each change audited', async () => {
    const before = Date.now();
    const created = await call(token, 'createOperator', {
      body: { email: ' Ann@Example.COM ', role: 'viewer' },
    });
    const after = Date.now();
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^op_[A-Za-z0-9_-]{16}$/),
      email: 'ann@example.com',
      role: 'viewer',
      enabled: true,
      enrolled: false,
      enrollment_expires_at: expect.stringMatching(/Z$/),
      last_login_at: null,
      created_at: expect.stringMatching(/Z$/),
      updated_at: created.body.created_at,
      enrollment_url: expect.stringMatching(new RegExp(`^${t.url}/console/enroll#token=[A-Za-z0-9_-]{43}$`)),
    });
    // Valid 24 hours from when it was made, during the request.
    const expires = Date.parse(created.body.enrollment_expires_at);
    expect(expires).toBeGreaterThanOrEqual(before + 86_400_000);
    expect(expires).toBeLessThanOrEqual(after + 86_400_000);
    const id = created.body.id as string;
    expect(created.headers.get('location')).toBe(`${t.url}/admin/v1/operators/${id}`);
    const again = await call(token, 'createOperator', { body: { email: 'ann@example.com', role: 'admin' } });
    expect(again.status).toBe(409);
    expect(again.body).toEqual(problem(409, 'operator_exists', 'operator ann@example.com already exists'));
    const bad = await call(token, 'createOperator', { body: { email: 'not an email', role: 'root' } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(['/role']);

    const read = await call(token, 'getOperator', { params: { id } });
    expect(read.status).toBe(200);
    const { enrollment_url: _link, ...view } = created.body;
    expect(read.body).toEqual(view);
    const list = await call(token, 'listOperators', { query: { limit: 500 } });
    expect(list.body.items.map((o: { email: string }) => o.email)).toContain('ann@example.com');
    expect(list.body.items[0]).not.toHaveProperty('enrollment_url');

    const etag = read.headers.get('etag')!;
    const changed = await call(token, 'updateOperator', {
      params: { id },
      body: { role: 'admin', enabled: false },
      headers: { 'if-match': etag },
    });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ role: 'admin', enabled: false });
    const stale = await call(token, 'updateOperator', {
      params: { id },
      body: { role: 'viewer' },
      headers: { 'if-match': etag },
    });
    expect(stale.status).toBe(412);

    const reset = await call(token, 'resetOperator', { params: { id } });
    expect(reset.status).toBe(200);
    expect(reset.body.enrollment_url).not.toBe(created.body.enrollment_url);
    expect(reset.body.enrollment_url).toMatch(/#token=[A-Za-z0-9_-]{43}$/);
    expect((await call(token, 'resetOperator', { params: { id: 'op_nobody' } })).status).toBe(404);

    expect((await call(token, 'deleteOperator', { params: { id } })).status).toBe(204);
    const gone = await call(token, 'getOperator', { params: { id } });
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual(problem(404, 'operator_not_found', `operator ${id} does not exist`));
    expect((await call(token, 'deleteOperator', { params: { id } })).status).toBe(404);

    const trail = await call(token, 'listAuditEvents', { query: { limit: 500 } });
    const mine = trail.body.items
      .filter((e: { target: string }) => e.target === id)
      .map((e: { type: string; actor: string; changes: unknown }) => [e.type, e.actor, e.changes]);
    expect(mine).toEqual([
      ['operator.deleted', `client:${adminId}`, { email: 'ann@example.com' }],
      ['operator.reset', `client:${adminId}`, { email: 'ann@example.com' }],
      [
        'operator.updated',
        `client:${adminId}`,
        { role: { from: 'viewer', to: 'admin' }, enabled: { from: true, to: false } },
      ],
      ['operator.created', `client:${adminId}`, { email: 'ann@example.com', role: 'viewer' }],
    ]);
  });

  it('the operators need operators:read and operators:write; the stats audit:read', async () => {
    const { token: reader } = await adminToken(['audit:read', 'clients:read']);
    const denied = await call(reader, 'listOperators');
    expect(denied.status).toBe(403);
    expect(denied.headers.get('www-authenticate')).toBe(
      'Bearer error="insufficient_scope", scope="operators:read"',
    );
    expect((await call(reader, 'getStats')).status).toBe(200);
  });
});

describe('hostile input', () => {
  it('a fuzz burst (bad JSON, wrong types, huge bodies, unknown fields, bad cursors and ids) gives no 5xx and changes nothing', async () => {
    const { token } = await adminToken();
    const before = JSON.stringify(await exportConfig(ctx));
    const keysBefore = JSON.stringify(await ctx.store.listSigningKeys());
    const paths = [
      '/audiences',
      '/audiences/%00',
      '/clients',
      '/clients/..%2f',
      '/clients/x/grants/y',
      '/keys/x/retire',
      '/audit-events',
      '/clients/a%20b',
    ];
    const bodies = fc.oneof(
      fc.constant('{'),
      fc.constant('null'),
      fc.constant('[]'),
      fc.constant('x'.repeat(300_000)),
      // Any JSON but a valid new client (`{"name": "..."}` alone would create one).
      fc.json().filter((j) => !j.includes('"name"')),
      fc
        .record({
          name: fc.anything(),
          identifier: fc.anything(),
          client_id: fc.anything(),
          extra: fc.anything(),
        })
        .map((v) => JSON.stringify(v)),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('POST', 'PATCH', 'PUT', 'DELETE', 'GET'),
        fc.constantFrom(...paths),
        bodies,
        fc.constantFrom('application/json', 'application/merge-patch+json', 'text/plain', ''),
        fc.constantFrom('', '?after=zz', '?limit=-1', '?limit=abc', '?type=nope', '?since=%ff'),
        fc.constantFrom('', '"x"', '*'),
        async (method, path, body, type, query, ifMatch) => {
          const headers: Record<string, string> = { authorization: `Bearer ${token}` };
          if (type) headers['content-type'] = type;
          if (ifMatch) headers['if-match'] = ifMatch;
          // Whatever the body, writes are refused: only creates could succeed, and the bodies are not valid ones
          // (fc.record's fields are anything, never all valid at once: name must be a string and identifier a URL).
          const response = await fetch(`${t.url}/admin/v1${path}${query}`, {
            method,
            headers,
            body: method === 'GET' ? undefined : body,
          });
          await response.text();
          expect(response.status).toBeLessThan(500);
        },
      ),
      { numRuns: 300 },
    );
    expect(JSON.stringify(await exportConfig(ctx))).toBe(before);
    expect(JSON.stringify(await ctx.store.listSigningKeys())).toBe(keysBefore);
  });
});

describe('failed admin authentications are throttled like failed token requests', () => {
  it('a blocked address gets 429 with Retry-After; a valid token of an enabled admin client still gets through', async () => {
    const small = await startTestServer({ TESSERA_ATTEMPTS_SOURCE_MAX: '3' });
    try {
      const sctx = managementOf(small, 'test');
      await ensureAdminAudience(sctx);
      const url = adminAudienceUrl(small.config);
      const { client, secret } = await clientOps.createClient(sctx, {
        name: 'ops',
        grants: [url],
        scopes: { [url]: ['keys:read'] },
      });
      await small.sync();
      const token = (await postToken(small.url, tokenParams(client.id, secret, url))).body
        .access_token as string;
      const get = (bearer: string) =>
        fetch(`${small.url}/admin/v1/keys`, { headers: { authorization: `Bearer ${bearer}` } });
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push((await get('forged')).status);
      expect(statuses).toEqual([401, 401, 401, 429, 429]);
      const blocked = await get('forged');
      expect(blocked.status).toBe(429);
      expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await blocked.json()).toEqual(
        problem(
          429,
          'too_many_attempts',
          'too many failed authentications from this address; try again later',
        ),
      );
      expect((await get(token)).status).toBe(200);
    } finally {
      await small.close();
    }
  });
});

describe('federated credentials (workload identity federation)', () => {
  let token: string;
  let adminId: string;
  const GITHUB = 'https://token.actions.githubusercontent.com';
  const GITLAB = 'https://gitlab.example.com';
  const deploy = {
    name: 'deploy',
    issuer: GITHUB,
    subject: 'repo:acme/billing:ref:refs/heads/main',
    claims: { repository: 'acme/billing' },
    max_lifetime: '15m',
  };
  const path = (id: string, fid?: string) =>
    `${t.url}/admin/v1/clients/${id}/federated-credentials${fid === undefined ? '' : `/${fid}`}`;
  beforeAll(async () => {
    ({ token, id: adminId } = await adminToken());
  });

  it('a client created with them: 201 with no secret and its credentials; listed, read with an ETag', async () => {
    const created = await call(token, 'createClient', {
      body: {
        name: 'billing ci',
        client_id: 'billing-ci',
        token_endpoint_auth_method: 'private_key_jwt',
        federated_credentials: [deploy],
      },
    });
    expect(created.status).toBe(201);
    const [credential] = created.body.federated_credentials as { id: string; created_at: string }[];
    expect(created.body).toEqual({
      client_id: 'billing-ci',
      name: 'billing ci',
      description: null,
      enabled: true,
      token_endpoint_auth_method: 'private_key_jwt',
      jwks: null,
      jwks_uri: null,
      dpop_bound_access_tokens: false,
      tls_client_auth_subject_dn: null,
      tls_client_auth_san_dns: null,
      tls_client_auth_san_uri: null,
      tls_client_auth_san_ip: null,
      tls_client_auth_san_email: null,
      tls_client_certificate_bound_access_tokens: false,
      token_ttl: null,
      quota_per_minute: null,
      quota_per_day: null,
      claims: null,
      audiences: [],
      created_at: expect.stringMatching(/Z$/),
      updated_at: created.body.created_at,
      secret_rotated_at: created.body.created_at,
      revoked_before: null,
      federated_credentials: [
        {
          id: expect.stringMatching(/^fed_[A-Za-z0-9_-]{16}$/),
          name: 'deploy',
          issuer: GITHUB,
          jwks: null,
          jwks_uri: null,
          subject: 'repo:acme/billing:ref:refs/heads/main',
          audience: t.config.issuer,
          claims: { repository: 'acme/billing' },
          max_lifetime: 900,
          once: false,
          created_at: expect.stringMatching(/Z$/),
          updated_at: credential!.created_at,
        },
      ],
    });
    // The ETag is the client's own, as GET /clients/{id} gives it (without the credentials).
    const read = await call(token, 'getClient', { params: { id: 'billing-ci' } });
    expect(read.body).not.toHaveProperty('federated_credentials');
    expect(created.headers.get('etag')).toBe(read.headers.get('etag'));

    const listed = await call(token, 'listFederatedCredentials', { params: { id: 'billing-ci' } });
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({ items: created.body.federated_credentials, next: null });
    const one = await call(token, 'getFederatedCredential', {
      params: { id: 'billing-ci', fid: credential!.id },
    });
    expect(one.status).toBe(200);
    expect(one.body).toEqual(created.body.federated_credentials[0]);
    expect(one.headers.get('etag')).toMatch(/^"[A-Za-z0-9_-]{27}"$/);

    // A client created with an empty list says so; one created without the field has none in its answer.
    const none = await call(token, 'createClient', {
      body: { name: 'later', token_endpoint_auth_method: 'private_key_jwt', federated_credentials: [] },
    });
    expect(none.body.federated_credentials).toEqual([]);
    expect(none.body).not.toHaveProperty('client_secret');
    const plain = await call(token, 'createClient', {
      body: { name: 'keyless', token_endpoint_auth_method: 'private_key_jwt' },
    });
    expect(plain.body).not.toHaveProperty('federated_credentials');
  });

  it('POST 201 with Location and ETag, PATCH as a merge patch with If-Match (412 when stale), DELETE 204; audited', async () => {
    await call(token, 'createClient', {
      body: { name: 'gitlab', client_id: 'gitlab-ci', token_endpoint_auth_method: 'private_key_jwt' },
    });
    const added = await call(token, 'addFederatedCredential', {
      params: { id: 'gitlab-ci' },
      body: {
        name: 'main',
        issuer: GITLAB,
        subject: 'project_path:acme/billing:ref_type:branch:ref:main',
        jwks_uri: 'https://gitlab.example.com/oauth/discovery/keys',
      },
    });
    expect(added.status).toBe(201);
    const fid = added.body.id as string;
    expect(added.headers.get('location')).toBe(path('gitlab-ci', fid));
    expect(added.body).toEqual({
      id: expect.stringMatching(/^fed_[A-Za-z0-9_-]{16}$/),
      name: 'main',
      issuer: GITLAB,
      jwks: null,
      jwks_uri: 'https://gitlab.example.com/oauth/discovery/keys',
      subject: 'project_path:acme/billing:ref_type:branch:ref:main',
      audience: t.config.issuer,
      claims: {},
      max_lifetime: 3600,
      once: false,
      created_at: expect.stringMatching(/Z$/),
      updated_at: added.body.created_at,
    });
    const etag = added.headers.get('etag')!;
    const read = await call(token, 'getFederatedCredential', { params: { id: 'gitlab-ci', fid } });
    expect(read.headers.get('etag')).toBe(etag);

    // A merge patch, as application/merge-patch+json: the fields given change, the others stay.
    const patched = await call(token, 'updateFederatedCredential', {
      params: { id: 'gitlab-ci', fid },
      body: {
        audience: 'https://tessera.example.com/gitlab',
        claims: { ref_protected: 'true' },
        max_lifetime: 600,
        once: true,
      },
      headers: { 'content-type': 'application/merge-patch+json', 'if-match': etag },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({
      ...added.body,
      audience: 'https://tessera.example.com/gitlab',
      claims: { ref_protected: 'true' },
      max_lifetime: 600,
      once: true,
      updated_at: expect.stringMatching(/Z$/),
    });
    expect(patched.headers.get('etag')).not.toBe(etag);

    // The version read before is stale: 412, and nothing changes.
    const stale = await call(token, 'updateFederatedCredential', {
      params: { id: 'gitlab-ci', fid },
      body: { subject: 'project_path:acme/billing:ref_type:branch:ref:dev' },
      headers: { 'if-match': etag },
    });
    expect(stale.status).toBe(412);
    expect(stale.body).toEqual(
      problem(
        412,
        'precondition_failed',
        `federated credential ${fid} has changed since it was read: If-Match does not match its ETag, nothing was changed`,
      ),
    );
    const staleDelete = await call(token, 'removeFederatedCredential', {
      params: { id: 'gitlab-ci', fid },
      headers: { 'if-match': etag },
    });
    expect(staleDelete.status).toBe(412);
    expect((await call(token, 'getFederatedCredential', { params: { id: 'gitlab-ci', fid } })).body).toEqual(
      patched.body,
    );

    // null resets audience, claims, max_lifetime and once; jwks_uri null: keys by discovery. As application/json.
    const reset = await call(token, 'updateFederatedCredential', {
      params: { id: 'gitlab-ci', fid },
      body: { audience: null, claims: null, max_lifetime: null, once: null, jwks_uri: null },
    });
    expect(reset.status).toBe(200);
    expect(reset.body).toEqual({ ...added.body, jwks_uri: null, updated_at: expect.stringMatching(/Z$/) });

    const removed = await call(token, 'removeFederatedCredential', {
      params: { id: 'gitlab-ci', fid },
      headers: { 'if-match': reset.headers.get('etag')! },
    });
    expect(removed.status).toBe(204);
    expect((await call(token, 'listFederatedCredentials', { params: { id: 'gitlab-ci' } })).body).toEqual({
      items: [],
      next: null,
    });

    const events = await call(token, 'listAuditEvents', { query: { client_id: 'gitlab-ci', limit: 10 } });
    expect(events.body.items.map((e: { type: string; actor: string }) => [e.type, e.actor])).toEqual([
      ['client.federated_credential_removed', `client:${adminId}`],
      ['client.federated_credential_updated', `client:${adminId}`],
      ['client.federated_credential_updated', `client:${adminId}`],
      ['client.federated_credential_added', `client:${adminId}`],
      ['client.created', `client:${adminId}`],
    ]);
  });

  it('invalid fields: 400 problem+json with the pointer of each (in POST /clients too)', async () => {
    await call(token, 'createClient', {
      body: { name: 'refusals', client_id: 'fed-refusals', token_endpoint_auth_method: 'private_key_jwt' },
    });
    const invalid = (
      errors: { pointer: string; detail: string }[],
      detail = 'the request body is not valid',
    ) => problem(400, 'invalid_field', detail, { errors });
    const cases: [string, { params: Record<string, string>; body: unknown }, object][] = [
      [
        'addFederatedCredential',
        { params: { id: 'fed-refusals' }, body: { ...deploy, issuer: 'ftp://issuer.example.com' } },
        invalid(
          [{ pointer: '/issuer', detail: 'issuer must be an http or https URL' }],
          'issuer must be an http or https URL',
        ),
      ],
      [
        'addFederatedCredential',
        { params: { id: 'fed-refusals' }, body: { ...deploy, claims: { sub: 'x' } } },
        invalid(
          [
            {
              pointer: '/claims',
              detail:
                'claims: sub is checked by its own field (iss, sub, aud, exp, nbf, iat, jti cannot be listed)',
            },
          ],
          'claims: sub is checked by its own field (iss, sub, aud, exp, nbf, iat, jti cannot be listed)',
        ),
      ],
      [
        'addFederatedCredential',
        { params: { id: 'fed-refusals' }, body: { ...deploy, max_lifetime: '30s' } },
        invalid(
          [
            {
              pointer: '/max_lifetime',
              detail: 'max_lifetime must be a whole number of seconds from 60 to 86400 (24 hours)',
            },
          ],
          'max_lifetime must be a whole number of seconds from 60 to 86400 (24 hours)',
        ),
      ],
      [
        'addFederatedCredential',
        {
          params: { id: 'fed-refusals' },
          body: { ...deploy, jwks: { keys: [{ kty: 'oct', k: 'c2VjcmV0' }] } },
        },
        invalid(
          [
            {
              pointer: '/jwks',
              detail: 'jwks key 1 has "k": register public keys only (a private or symmetric key is refused)',
            },
          ],
          'jwks key 1 has "k": register public keys only (a private or symmetric key is refused)',
        ),
      ],
      [
        'addFederatedCredential',
        { params: { id: 'fed-refusals' }, body: { name: 'x', issuer: GITHUB, colour: 'blue' } },
        invalid([
          { pointer: '/subject', detail: 'is required' },
          { pointer: '/colour', detail: 'is not a field of this resource' },
        ]),
      ],
      [
        'createClient',
        {
          params: {},
          body: {
            name: 'x',
            token_endpoint_auth_method: 'private_key_jwt',
            federated_credentials: [deploy, { ...deploy, name: 'second', max_lifetime: '2d' }],
          },
        },
        invalid(
          [
            {
              pointer: '/federated_credentials/1/max_lifetime',
              detail: 'max_lifetime must be a whole number of seconds from 60 to 86400 (24 hours)',
            },
          ],
          'max_lifetime must be a whole number of seconds from 60 to 86400 (24 hours)',
        ),
      ],
      [
        'createClient',
        { params: {}, body: { name: 'x', federated_credentials: [deploy] } },
        invalid(
          [
            {
              pointer: '/federated_credentials',
              detail: 'federated credentials are for a private_key_jwt client without jwks or jwks_uri',
            },
          ],
          'federated credentials are for a private_key_jwt client without jwks or jwks_uri',
        ),
      ],
      [
        'createClient',
        {
          params: {},
          body: {
            name: 'x',
            token_endpoint_auth_method: 'private_key_jwt',
            federated_credentials: [{ name: 'x', subject: 's' }],
          },
        },
        invalid([{ pointer: '/federated_credentials/0/issuer', detail: 'is required' }]),
      ],
    ];
    const before = JSON.stringify(await exportConfig(ctx));
    for (const [operationId, input, expected] of cases) {
      const refused = await call(token, operationId, input);
      expect(refused.status, JSON.stringify(input.body)).toBe(400);
      expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
      expect(refused.body, JSON.stringify(input.body)).toEqual(expected);
    }
    expect(JSON.stringify(await exportConfig(ctx))).toBe(before);
    const added = await call(token, 'addFederatedCredential', {
      params: { id: 'fed-refusals' },
      body: deploy,
    });
    const fid = added.body.id as string;
    for (const [body, errors] of [
      [{ issuer: null }, [{ pointer: '/issuer', detail: 'must be string' }]],
      [{ jwks_uri: 'not a url' }, [{ pointer: '/jwks_uri', detail: 'must match format "uri"' }]],
      [{ once: 'yes' }, [{ pointer: '/once', detail: 'must be boolean' }]],
    ] as const) {
      const refused = await call(token, 'updateFederatedCredential', {
        params: { id: 'fed-refusals', fid },
        body,
        headers: { 'content-type': 'application/merge-patch+json' },
      });
      expect(refused.status).toBe(400);
      expect(refused.body).toEqual(invalid([...errors]));
    }
    expect(
      (await call(token, 'getFederatedCredential', { params: { id: 'fed-refusals', fid } })).body,
    ).toEqual(added.body);
  });

  it('409 by code: a client with secrets or keys, one with credentials given a secret or keys, the 11th, a name taken', async () => {
    const secretClient = await call(token, 'createClient', {
      body: { name: 'secrets', client_id: 'fed-secrets' },
    });
    expect(secretClient.status).toBe(201);
    await call(token, 'createClient', {
      body: {
        name: 'keys',
        client_id: 'fed-keys',
        token_endpoint_auth_method: 'private_key_jwt',
        jwks_uri: 'https://keys.example.com/jwks.json',
      },
    });
    await call(token, 'createClient', {
      body: {
        name: 'fed',
        client_id: 'fed-many',
        token_endpoint_auth_method: 'private_key_jwt',
        federated_credentials: [deploy],
      },
    });
    const conflicts: [string, { params: Record<string, string>; body?: unknown }, string, string][] = [
      [
        'addFederatedCredential',
        { params: { id: 'fed-secrets' }, body: deploy },
        'client_uses_secrets',
        'client fed-secrets authenticates with a secret (client_secret_basic): a federated credential is for a private_key_jwt client without secrets or keys (change token_endpoint_auth_method first)',
      ],
      [
        'addFederatedCredential',
        { params: { id: 'fed-keys' }, body: deploy },
        'client_uses_keys',
        'client fed-keys authenticates with its own keys (jwks_uri): remove them before adding a federated credential',
      ],
      [
        'addSecret',
        { params: { id: 'fed-many' }, body: {} },
        'client_uses_federation',
        'client fed-many authenticates with federated credentials: it has no secrets (remove its federated credentials first)',
      ],
      [
        'updateClient',
        { params: { id: 'fed-many' }, body: { jwks_uri: 'https://keys.example.com/jwks.json' } },
        'client_uses_federation',
        'client fed-many authenticates with federated credentials: it cannot have jwks_uri (remove its federated credentials first)',
      ],
      [
        'updateClient',
        { params: { id: 'fed-many' }, body: { token_endpoint_auth_method: 'client_secret_basic' } },
        'client_uses_federation',
        'client fed-many authenticates with federated credentials: it cannot have the method client_secret_basic (remove its federated credentials first)',
      ],
      [
        'addFederatedCredential',
        { params: { id: 'fed-many' }, body: deploy },
        'federated_credential_exists',
        'client fed-many already has a federated credential named deploy',
      ],
      [
        'createClient',
        {
          params: {},
          body: {
            name: 'twice',
            token_endpoint_auth_method: 'private_key_jwt',
            federated_credentials: [deploy, deploy],
          },
        },
        'federated_credential_exists',
        'a federated credential named deploy is given twice',
      ],
    ];
    for (const [operationId, input, code, detail] of conflicts) {
      const refused = await call(token, operationId, input);
      expect(refused.status, code).toBe(409);
      expect(refused.body).toEqual(problem(409, code, detail));
    }
    for (let i = 1; i < 10; i++)
      expect(
        (
          await call(token, 'addFederatedCredential', {
            params: { id: 'fed-many' },
            body: { ...deploy, name: `job-${i}` },
          })
        ).status,
      ).toBe(201);
    const eleventh = await call(token, 'addFederatedCredential', {
      params: { id: 'fed-many' },
      body: { ...deploy, name: 'eleventh' },
    });
    expect(eleventh.status).toBe(409);
    expect(eleventh.body).toEqual(
      problem(
        409,
        'too_many_federated_credentials',
        'client fed-many has 10 federated credentials, the most it may have: remove one first',
      ),
    );
    const [first, second] = (await call(token, 'listFederatedCredentials', { params: { id: 'fed-many' } }))
      .body.items as { id: string }[];
    const renamed = await call(token, 'updateFederatedCredential', {
      params: { id: 'fed-many', fid: second!.id },
      body: { name: 'deploy' },
    });
    expect(renamed.status).toBe(409);
    expect(renamed.body.type).toBe('urn:tessera:problem:federated_credential_exists');
    expect(first).toBeDefined();
  });

  it('404 by code: an unknown client, an unknown credential (or another client’s)', async () => {
    const other = await call(token, 'createClient', {
      body: {
        name: 'other',
        token_endpoint_auth_method: 'private_key_jwt',
        federated_credentials: [deploy],
      },
    });
    const theirs = other.body.federated_credentials[0].id as string;
    await call(token, 'createClient', {
      body: { name: 'mine', client_id: 'fed-mine', token_endpoint_auth_method: 'private_key_jwt' },
    });
    const noClient = problem(404, 'client_not_found', 'client nobody does not exist');
    const noCredential = problem(
      404,
      'federated_credential_not_found',
      `client fed-mine has no federated credential ${theirs}`,
    );
    for (const [operationId, input, expected] of [
      ['listFederatedCredentials', { params: { id: 'nobody' } }, noClient],
      ['addFederatedCredential', { params: { id: 'nobody' }, body: deploy }, noClient],
      ['getFederatedCredential', { params: { id: 'nobody', fid: theirs } }, noClient],
      ['getFederatedCredential', { params: { id: 'fed-mine', fid: theirs } }, noCredential],
      [
        'updateFederatedCredential',
        { params: { id: 'fed-mine', fid: theirs }, body: { once: true } },
        noCredential,
      ],
      ['removeFederatedCredential', { params: { id: 'fed-mine', fid: theirs } }, noCredential],
    ] as const) {
      const answer = await call(token, operationId, input);
      expect(answer.status, operationId).toBe(404);
      expect(answer.body).toEqual(expected);
    }
  });

  it('read with clients:read; a change needs clients:write (403 insufficient_scope)', async () => {
    const { token: reader } = await adminToken(['clients:read']);
    const made = await call(token, 'createClient', {
      body: {
        name: 'read only',
        token_endpoint_auth_method: 'private_key_jwt',
        federated_credentials: [deploy],
      },
    });
    const id = made.body.client_id as string;
    const fid = made.body.federated_credentials[0].id as string;
    expect((await call(reader, 'listFederatedCredentials', { params: { id } })).status).toBe(200);
    expect((await call(reader, 'getFederatedCredential', { params: { id, fid } })).status).toBe(200);
    for (const [operationId, input] of [
      ['addFederatedCredential', { params: { id }, body: { ...deploy, name: 'more' } }],
      ['updateFederatedCredential', { params: { id, fid }, body: { once: true } }],
      ['removeFederatedCredential', { params: { id, fid } }],
    ] as const) {
      const refused = await call(reader, operationId, input);
      expect(refused.status).toBe(403);
      expect(refused.headers.get('www-authenticate')).toBe(
        'Bearer error="insufficient_scope", scope="clients:write"',
      );
      expect(refused.body).toEqual(
        problem(403, 'insufficient_scope', 'this call needs the scope clients:write'),
      );
    }
    expect((await call(token, 'listFederatedCredentials', { params: { id } })).body.items).toEqual(
      made.body.federated_credentials,
    );
  });
});

describe('apply and imports through the API (each answer against its schema)', () => {
  it('POST /apply: a dry run plans, an empty body is a 400; POST /imports maps an export, a bad source is a 400', async () => {
    const { token } = await adminToken();
    const planned = await call(token, 'applyConfig', { body: { file: {}, dry_run: true } });
    expect(planned.status).toBe(200);
    expect((await call(token, 'applyConfig', { body: {} })).status).toBe(400);
    const imported = await call(token, 'createImport', {
      body: {
        source: 'hydra',
        file: [
          {
            client_id: 'hydra-svc',
            grant_types: ['client_credentials'],
            audience: ['https://h.example.com'],
          },
        ],
      },
    });
    expect(imported.status).toBe(200);
    expect((await call(token, 'createImport', { body: { source: 'okta', file: {} } })).status).toBe(400);
  });
});

describe('the document and the answers', () => {
  it('every operation was called, and answered both a success and an error, each matching its schema', () => {
    const operations = Object.values(doc.paths).flatMap((methods) =>
      Object.values(methods).map((op) => op.operationId),
    );
    for (const id of operations) {
      const statuses = [...(seen.get(id) ?? [])];
      expect(
        statuses.some((s) => s < 300),
        `${id}: no success seen`,
      ).toBe(true);
      expect(
        statuses.some((s) => s >= 400),
        `${id}: no error seen`,
      ).toBe(true);
    }
  });
});

describe('private_key_jwt clients over the API', () => {
  let token: string;
  beforeAll(async () => {
    ({ token } = await adminToken());
  });

  const publicJwk = async (alg = 'ES256', kid = 'k1') => {
    const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
    return { jwk: { ...(await exportJWK(publicKey)), kid }, privateKey, alg };
  };

  it('created with inline keys: no client_secret in the answer; its assertion gets a token', async () => {
    const key = await publicJwk();
    const created = await call(token, 'createClient', {
      body: { name: 'keys', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [key.jwk] } },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      token_endpoint_auth_method: 'private_key_jwt',
      jwks: { keys: [key.jwk] },
      jwks_uri: null,
    });
    expect(created.body).not.toHaveProperty('client_secret');
    const id = created.body.client_id as string;
    const now = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({ iss: id, sub: id, aud: t.url, exp: now + 60, jti: randomUUID() })
      .setProtectedHeader({ alg: key.alg, kid: 'k1' })
      .sign(key.privateKey);
    await t.sync();
    const answer = await postToken(t.url, {
      grant_type: 'client_credentials',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: assertion,
      audience: `${t.url}/admin/v1`,
    });
    // Authenticated, and then refused only because the admin API is not granted to it.
    expect(answer.status).toBe(400);
    expect(answer.body.error).toBe('invalid_target');

    // A secret for it is refused: it has none.
    const secret = await call(token, 'addSecret', { params: { id }, body: {} });
    expect(secret.status).toBe(409);
    expect(secret.body).toEqual(
      problem(
        409,
        'client_uses_keys',
        `client ${id} authenticates with private_key_jwt: it has no secrets (change token_endpoint_auth_method first)`,
      ),
    );

    // Keys moved to a URL: the inline ones go; back to a secret method: both go.
    const moved = await call(token, 'updateClient', {
      params: { id },
      body: { jwks_uri: 'https://keys.example.com/jwks.json' },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    expect(moved.status).toBe(200);
    expect(moved.body).toMatchObject({ jwks: null, jwks_uri: 'https://keys.example.com/jwks.json' });
    const back = await call(token, 'updateClient', {
      params: { id },
      body: { token_endpoint_auth_method: 'client_secret_post' },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    expect(back.status).toBe(200);
    expect(back.body).toMatchObject({
      token_endpoint_auth_method: 'client_secret_post',
      jwks: null,
      jwks_uri: null,
    });
    expect((await call(token, 'addSecret', { params: { id }, body: {} })).status).toBe(201);
  });

  it('refused with the field named: a private key, both jwks and jwks_uri, keys without the method', async () => {
    const { privateKey } = await generateKeyPair('ES256', { extractable: true });
    const priv = { ...(await exportJWK(privateKey)), kid: 'p' };
    const pub = (await publicJwk()).jwk;
    for (const [body, pointer, detail] of [
      [
        { name: 'x', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [priv] } },
        '/jwks',
        'jwks key 1 has "d": register public keys only (a private or symmetric key is refused)',
      ],
      [
        {
          name: 'x',
          token_endpoint_auth_method: 'private_key_jwt',
          jwks: { keys: [pub] },
          jwks_uri: 'https://keys.example.com/jwks.json',
        },
        '/jwks_uri',
        'give jwks or jwks_uri, not both',
      ],
      [
        { name: 'x', jwks: { keys: [pub] } },
        '/jwks',
        'jwks and jwks_uri are for private_key_jwt; this client uses client_secret_basic',
      ],
    ] as const) {
      const r = await call(token, 'createClient', { body });
      expect(r.status).toBe(400);
      expect(r.body).toEqual(problem(400, 'invalid_field', detail, { errors: [{ pointer, detail }] }));
    }
  });

  /** The refusal of a jwks_uri on a host that is not a public address, as the URL parser writes the host. */
  const notPublic = (host: string) => {
    const detail = `jwks_uri's host ${host} is not a public address (loopback, private, link-local, unique-local or reserved)`;
    return problem(400, 'invalid_field', detail, { errors: [{ pointer: '/jwks_uri', detail }] });
  };

  it('a jwks_uri on a refused address in any spelling (IPv4 in IPv6 too) is refused when set; nothing changes', async () => {
    const before = JSON.stringify(await exportConfig(ctx));
    const refused = await call(token, 'createClient', {
      body: {
        name: 'ssrf',
        token_endpoint_auth_method: 'private_key_jwt',
        jwks_uri: 'http://[::7f00:1]/jwks',
      },
    });
    expect(refused.status).toBe(400);
    expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
    expect(refused.body).toEqual(notPublic('[::7f00:1]'));
    expect(JSON.stringify(await exportConfig(ctx))).toBe(before);

    // A client on a public URL: moving it to a refused address, spelled any way, changes nothing.
    const created = await call(token, 'createClient', {
      body: {
        name: 'keys at a URL',
        token_endpoint_auth_method: 'private_key_jwt',
        jwks_uri: 'https://keys.example.com/jwks.json',
      },
    });
    expect(created.status).toBe(201);
    const id = created.body.client_id as string;
    const stored = await call(token, 'getClient', { params: { id } });
    const unchanged = JSON.stringify(await exportConfig(ctx));
    for (const [uri, host] of [
      ['http://[::7f00:1]/jwks', '[::7f00:1]'],
      ['http://[::ffff:0:7f00:1]/jwks', '[::ffff:0:7f00:1]'],
      ['https://[::ffff:127.0.0.1]/jwks', '[::ffff:7f00:1]'],
      ['https://[2002:a9fe:a9fe::]/latest/meta-data', '[2002:a9fe:a9fe::]'],
      ['https://[::FFFF:0:A9FE:A9FE]/latest/meta-data', '[::ffff:0:a9fe:a9fe]'],
      ['http://2130706433/jwks', '127.0.0.1'],
    ] as const) {
      const patched = await call(token, 'updateClient', {
        params: { id },
        body: { jwks_uri: uri },
        headers: { 'content-type': 'application/merge-patch+json' },
      });
      expect(patched.status, uri).toBe(400);
      expect(patched.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
      expect(patched.body, uri).toEqual(notPublic(host));
    }
    expect(await call(token, 'getClient', { params: { id } })).toMatchObject({
      status: 200,
      body: stored.body,
    });
    expect(JSON.stringify(await exportConfig(ctx))).toBe(unchanged);
  });

  it('with TESSERA_JWKS_ALLOW_PRIVATE=true, the same jwks_uri is taken', async () => {
    const open = await startTestServer({ TESSERA_JWKS_ALLOW_PRIVATE: 'true' });
    try {
      const octx = managementOf(open, 'test');
      await ensureAdminAudience(octx);
      const url = adminAudienceUrl(open.config);
      const { client, secret } = await clientOps.createClient(octx, {
        name: 'ops',
        grants: [url],
        scopes: { [url]: ['clients:read', 'clients:write'] },
      });
      await open.sync();
      const bearer = (await postToken(open.url, tokenParams(client.id, secret, url))).body
        .access_token as string;
      const send = async (method: string, path: string, body: unknown, type = 'application/json') => {
        const response = await fetch(`${open.url}/admin/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${bearer}`, 'content-type': type },
          body: JSON.stringify(body),
        });
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      };
      const created = await send('POST', '/clients', {
        name: 'keys on this host',
        token_endpoint_auth_method: 'private_key_jwt',
        jwks_uri: 'http://[::7f00:1]/jwks',
      });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({
        token_endpoint_auth_method: 'private_key_jwt',
        jwks: null,
        jwks_uri: 'http://[::7f00:1]/jwks',
      });
      const moved = await send(
        'PATCH',
        `/clients/${encodeURIComponent(created.body.client_id as string)}`,
        { jwks_uri: 'http://[::ffff:0:7f00:1]:8080/jwks' },
        'application/merge-patch+json',
      );
      expect(moved.status).toBe(200);
      expect(moved.body).toMatchObject({ jwks_uri: 'http://[::ffff:0:7f00:1]:8080/jwks' });
    } finally {
      await open.close();
    }
  });
});

describe('dpop_bound_access_tokens over the API (RFC 9449 section 5.2)', () => {
  let token: string;
  beforeAll(async () => {
    ({ token } = await adminToken());
  });

  it('false unless given; POST and PATCH set it; the token endpoint then wants a proof; a wrong type is refused by pointer', async () => {
    const plain = await call(token, 'createClient', { body: { name: 'plain' } });
    expect(plain.status).toBe(201);
    expect(plain.body.dpop_bound_access_tokens).toBe(false);

    const created = await call(token, 'createClient', {
      body: { name: 'bound', dpop_bound_access_tokens: true },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'bound', dpop_bound_access_tokens: true });
    const id = created.body.client_id as string;
    const read = await call(token, 'getClient', { params: { id } });
    expect(read.body.dpop_bound_access_tokens).toBe(true);

    // Its secret alone gets no token: it must send a DPoP proof.
    const dpopApi = 'https://dpop-api.example.com';
    const audience = await call(token, 'createAudience', { body: { identifier: dpopApi } });
    expect(
      (await call(token, 'putGrant', { params: { id, audience_id: audience.body.id as string } })).status,
    ).toBe(201);
    await t.sync();
    const secret = created.body.client_secret as string;
    const refused = await postToken(t.url, tokenParams(id, secret, dpopApi));
    expect({ status: refused.status, body: refused.body }).toEqual({
      status: 400,
      body: {
        error: 'invalid_dpop_proof',
        error_description: 'a DPoP proof is required for this client (dpop_bound_access_tokens)',
      },
    });

    // A change of another field keeps it; a PATCH clears it.
    const renamed = await call(token, 'updateClient', {
      params: { id },
      body: { name: 'still bound' },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    expect(renamed.body).toMatchObject({ name: 'still bound', dpop_bound_access_tokens: true });
    const cleared = await call(token, 'updateClient', {
      params: { id },
      body: { dpop_bound_access_tokens: false },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    expect(cleared.status).toBe(200);
    expect(cleared.body.dpop_bound_access_tokens).toBe(false);
    await t.sync();
    const issued = await postToken(t.url, tokenParams(id, secret, dpopApi));
    expect(issued.status).toBe(200);
    expect(issued.body.token_type).toBe('Bearer');

    const wrong = await call(token, 'updateClient', {
      params: { id },
      body: { dpop_bound_access_tokens: 'yes' },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    expect(wrong.status).toBe(400);
    expect(wrong.body.errors).toEqual([{ pointer: '/dpop_bound_access_tokens', detail: 'must be boolean' }]);

    // Both changes audited with the field.
    const trail = await call(token, 'listAuditEvents', { query: { type: 'client.updated', limit: 10 } });
    expect(
      trail.body.items
        .filter((e: { target: string }) => e.target === id)
        .map((e: { changes: unknown }) => e.changes),
    ).toEqual([
      { dpop_bound_access_tokens: { from: true, to: false } },
      { name: { from: 'bound', to: 'still bound' } },
    ]);
  });
});

describe('RFC 8705 client registration over the API (tls_client_auth, self_signed_tls_client_auth)', () => {
  let token: string;
  beforeAll(async () => {
    ({ token } = await adminToken());
  });
  const NEEDS_ONE =
    'tls_client_auth needs one of tls_client_auth_subject_dn, tls_client_auth_san_dns, tls_client_auth_san_uri, tls_client_auth_san_ip, tls_client_auth_san_email';
  const SPIFFE = 'spiffe://prod.example.com/ns/billing/sa/worker';
  const patch = (id: string, body: unknown) =>
    call(token, 'updateClient', {
      params: { id },
      body,
      headers: { 'content-type': 'application/merge-patch+json' },
    });
  const refusedAt = (pointer: string, detail: string) =>
    problem(400, 'invalid_field', detail, { errors: [{ pointer, detail }] });

  it('the document: each field with its RFC 8705 description, the two methods in the enum', () => {
    const { op } = operation('getClient');
    const schema = op.responses['200']!.content!['application/json']!.schema as {
      properties: Record<
        string,
        { description?: string; anyOf?: { description?: string; enum?: string[] }[] }
      >;
    };
    const text = (name: string) => JSON.stringify(schema.properties[name]);
    for (const name of [
      'tls_client_auth_subject_dn',
      'tls_client_auth_san_dns',
      'tls_client_auth_san_uri',
      'tls_client_auth_san_ip',
      'tls_client_auth_san_email',
    ])
      expect(text(name)).toContain('RFC 8705 section 2.1.2');
    expect(schema.properties.tls_client_certificate_bound_access_tokens).toMatchObject({
      type: 'boolean',
      description: expect.stringContaining('RFC 8705 section 3.4'),
    });
    const methods = JSON.stringify(schema.properties.token_endpoint_auth_method);
    for (const method of ['tls_client_auth', 'self_signed_tls_client_auth'])
      expect(methods).toContain(`"${method}"`);
  });

  it('tls_client_auth: created with its one value and no secret; PATCH replaces it; a switch away clears it', async () => {
    const created = await call(token, 'createClient', {
      body: {
        name: 'worker',
        token_endpoint_auth_method: 'tls_client_auth',
        tls_client_auth_subject_dn: 'CN=worker,O=Example,C=US',
        tls_client_certificate_bound_access_tokens: true,
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      token_endpoint_auth_method: 'tls_client_auth',
      tls_client_auth_subject_dn: 'CN=worker,O=Example,C=US',
      tls_client_auth_san_dns: null,
      tls_client_auth_san_uri: null,
      tls_client_auth_san_ip: null,
      tls_client_auth_san_email: null,
      tls_client_certificate_bound_access_tokens: true,
      jwks: null,
      jwks_uri: null,
    });
    expect(created.body).not.toHaveProperty('client_secret');
    const id = created.body.client_id as string;
    expect((await call(token, 'getClient', { params: { id } })).body).toEqual(
      Object.fromEntries(
        Object.entries(created.body as object).filter(([k]) => k !== 'federated_credentials'),
      ),
    );
    // A secret for it is refused: it has none.
    expect((await call(token, 'addSecret', { params: { id }, body: {} })).body).toEqual(
      problem(
        409,
        'client_uses_keys',
        `client ${id} authenticates with tls_client_auth: it has no secrets (change token_endpoint_auth_method first)`,
      ),
    );
    const replaced = await patch(id, { tls_client_auth_san_uri: SPIFFE });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({
      tls_client_auth_subject_dn: null,
      tls_client_auth_san_uri: SPIFFE,
    });
    // A null of another kind changes nothing; of its own, it would leave none.
    expect((await patch(id, { tls_client_auth_san_ip: null })).body).toMatchObject({
      tls_client_auth_san_uri: SPIFFE,
    });
    expect((await patch(id, { tls_client_auth_san_uri: null })).body).toEqual(
      refusedAt('/token_endpoint_auth_method', NEEDS_ONE),
    );
    const unbound = await patch(id, { tls_client_certificate_bound_access_tokens: false });
    expect(unbound.body.tls_client_certificate_bound_access_tokens).toBe(false);
    const away = await patch(id, { token_endpoint_auth_method: 'client_secret_basic' });
    expect(away.status).toBe(200);
    expect(away.body).toMatchObject({
      token_endpoint_auth_method: 'client_secret_basic',
      tls_client_auth_san_uri: null,
    });
    const trail = await call(token, 'listAuditEvents', { query: { type: 'client.updated', limit: 10 } });
    expect(
      trail.body.items
        .filter((e: { target: string }) => e.target === id)
        .map((e: { changes: unknown }) => e.changes),
    ).toEqual([
      {
        token_endpoint_auth_method: { from: 'tls_client_auth', to: 'client_secret_basic' },
        tls_client_auth_san_uri: { from: SPIFFE, to: null },
      },
      { tls_client_certificate_bound_access_tokens: { from: true, to: false } },
      {
        tls_client_auth_subject_dn: { from: 'CN=worker,O=Example,C=US', to: null },
        tls_client_auth_san_uri: { from: null, to: SPIFFE },
      },
    ]);
  });

  it('every refusal is 400 problem+json with the pointer of the field at fault', async () => {
    const method = { name: 'bad', token_endpoint_auth_method: 'tls_client_auth' };
    for (const [body, pointer, detail] of [
      [method, '/token_endpoint_auth_method', NEEDS_ONE],
      [
        { ...method, tls_client_auth_san_dns: 'a.example.com', tls_client_auth_san_ip: '192.0.2.1' },
        '/tls_client_auth_san_ip',
        'a tls_client_auth client has one of tls_client_auth_subject_dn, tls_client_auth_san_dns, tls_client_auth_san_uri, tls_client_auth_san_ip, tls_client_auth_san_email: tls_client_auth_san_dns is given already',
      ],
      [
        { ...method, tls_client_auth_san_uri: '/ns/billing/sa/worker' },
        '/tls_client_auth_san_uri',
        'tls_client_auth_san_uri must be an absolute URI, with a scheme (spiffe://prod.example.com/ns/billing/sa/worker, https://...), without spaces',
      ],
      [
        { ...method, tls_client_auth_san_ip: '10.0.0.256' },
        '/tls_client_auth_san_ip',
        'tls_client_auth_san_ip must be an IPv4 or IPv6 address (192.0.2.10, 2001:db8::10)',
      ],
      [
        { name: 'bad', tls_client_auth_san_dns: 'a.example.com' },
        '/tls_client_auth_san_dns',
        'tls_client_auth_* fields are for tls_client_auth; this client uses client_secret_basic',
      ],
      [
        { name: 'bad', token_endpoint_auth_method: 'self_signed_tls_client_auth' },
        '/jwks',
        "self_signed_tls_client_auth needs jwks or jwks_uri: its certificates, each in its key's x5c",
      ],
    ] as const) {
      const r = await call(token, 'createClient', { body });
      expect(r.status).toBe(400);
      expect(r.body).toEqual(refusedAt(pointer, detail));
    }
    const dn = await call(token, 'createClient', {
      body: { ...method, tls_client_auth_subject_dn: 'CN=a,,O=b' },
    });
    expect(dn.status).toBe(400);
    expect(dn.body.errors).toEqual([
      {
        pointer: '/tls_client_auth_subject_dn',
        detail: expect.stringMatching(/^tls_client_auth_subject_dn is not an RFC 4514/),
      },
    ]);
    const wrongType = await call(token, 'createClient', {
      body: { name: 'bad', tls_client_certificate_bound_access_tokens: 'yes' },
    });
    expect(wrongType.body.errors).toEqual([
      { pointer: '/tls_client_certificate_bound_access_tokens', detail: 'must be boolean' },
    ]);
  });

  it('self_signed_tls_client_auth: its certificates in x5c; a key without one, or of another key, refused at /jwks/keys/<i>/x5c', async () => {
    const a = await selfSigned({ subject: 'CN=a' });
    const b = await selfSigned({ subject: 'CN=b' });
    const created = await call(token, 'createClient', {
      body: {
        name: 'ss',
        token_endpoint_auth_method: 'self_signed_tls_client_auth',
        jwks: { keys: [a.jwk] },
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      token_endpoint_auth_method: 'self_signed_tls_client_auth',
      jwks: { keys: [a.jwk] },
    });
    expect(created.body).not.toHaveProperty('client_secret');
    const id = created.body.client_id as string;
    const { x5c: _, ...bare } = b.jwk;
    expect((await patch(id, { jwks: { keys: [a.jwk, bare] } })).body).toEqual(
      refusedAt(
        '/jwks/keys/1/x5c',
        "jwks key 2 has no x5c: a self_signed_tls_client_auth client registers each certificate in its key's x5c (RFC 7517 section 4.7)",
      ),
    );
    expect((await patch(id, { jwks: { keys: [{ ...a.jwk, x5c: b.jwk.x5c }] } })).body).toEqual(
      refusedAt(
        '/jwks/keys/0/x5c',
        'jwks key 1: x5c[0] is the certificate of another key (its "x" is not the key\'s): the first certificate must hold the key the JWK describes (RFC 7517 section 4.7)',
      ),
    );
    const rotated = await patch(id, { jwks: { keys: [a.jwk, b.jwk] } });
    expect(rotated.status).toBe(200);
    expect(rotated.body.jwks).toEqual({ keys: [a.jwk, b.jwk] });
  });
});
