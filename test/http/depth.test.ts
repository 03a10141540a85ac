/**
 * MANAGEMENT.md, "No caller gives what it does not hold": every JSON body (custom claims included) nests at most
 * 32 levels, the body itself being level 1. The first object or array at level 33 makes it a 400 problem+json
 * naming that value's pointer, before validation or the handler (at the token endpoint, 400 invalid_request);
 * never a 500, however deep. A real server on a real socket; every answer asserted whole.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audiences, clients, type ManagementContext } from '../../src/management/index.js';
import { adminToken, send as sendTo, type SentAnswer as Answer } from '../helpers/admin.js';
import { managementOf } from '../helpers/management.js';
import { postToken, startTestServer, type TestServer } from '../helpers/server.js';

const API = 'https://api.example.com';
const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

/** `{"a":{"a":...{}}}` of `levels` objects, as text (JSON.stringify itself overflows on the deepest). */
const objects = (levels: number, key = 'a'): string =>
  `{"${key}":`.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1);
/** `[[...[]]]` of `levels` arrays, as text. */
const arrays = (levels: number): string => '['.repeat(levels) + ']'.repeat(levels);

/** The one answer to a body whose first value past 32 levels is at `pointer`. */
const tooDeep = (pointer: string) => ({
  type: 'urn:tessera:problem:invalid_body',
  title: 'Bad Request',
  status: 400,
  detail: 'the request body nests deeper than 32 levels',
  errors: [
    {
      pointer,
      detail: 'is an object or array at level 33; a body nests at most 32 levels, itself being level 1',
    },
  ],
});

let t: TestServer;
let ctx: ManagementContext;
let token: string;
let audienceId: string;

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t, 'test');
  token = await adminToken(t, ctx);
  audienceId = (await audiences.addAudience(ctx, { url: API })).id;
});
afterAll(async () => {
  await t?.close();
});

const send = (method: string, path: string, body: string, headers: Record<string, string> = {}) =>
  sendTo(t, method, path, body, headers);

const admin = (method: string, path: string, body: string, type = 'application/json') =>
  send(method, `/admin/v1${path}`, body, { authorization: `Bearer ${token}`, 'content-type': type });

function expectTooDeep(answer: Answer, pointer: string): void {
  expect(answer).toEqual({
    status: 400,
    type: 'application/problem+json; charset=utf-8',
    cacheControl: 'no-store',
    body: tooDeep(pointer),
  });
}

/** A body of `name` and claims `{"a":...}` reaching level `levels` of the body (claims are at level 2). */
const clientBody = (name: string, levels: number) => `{"name":"${name}","claims":${objects(levels - 1)}}`;

describe('the admin API: at most 32 levels', () => {
  it('POST /clients: claims reaching level 32 are accepted; level 33 is refused at its pointer, nothing made', async () => {
    const made = await admin('POST', '/clients', clientBody('deep-32', 32));
    expect(made.status).toBe(201);
    const id = (made.body as { client_id: string }).client_id;
    // Stored as sent, 30 levels below the claims object, and read back whole.
    const got = await fetch(`${t.url}/admin/v1/clients/${id}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(got.status).toBe(200);
    expect(((await got.json()) as { claims: unknown }).claims).toEqual(JSON.parse(objects(31)));

    const before = (await ctx.store.listClients()).length;
    expectTooDeep(await admin('POST', '/clients', clientBody('deep-33', 33)), '/claims' + '/a'.repeat(31));
    expect((await ctx.store.listClients()).length).toBe(before);
  });

  it('through arrays: the pointer names each index', async () => {
    const body = `{"name":"arrays","claims":{"x":${arrays(31)}}}`;
    expectTooDeep(await admin('POST', '/clients', body), '/claims/x' + '/0'.repeat(30));
    const fits = `{"name":"arrays","claims":{"x":${arrays(30)}}}`;
    expect((await admin('POST', '/clients', fits)).status).toBe(201);
  });

  it('the first value too deep in document order; names escaped as RFC 6901 says', async () => {
    // A shallow member first, then one too deep under a name with "/" and "~", then another too deep.
    const body = `{"name":"order","claims":{"ok":{"b":[1,2]},"a/b~c":${objects(31, 'k')},"z":${arrays(40)}}}`;
    expectTooDeep(await admin('POST', '/clients', body), '/claims/a~1b~0c' + '/k'.repeat(30));
  });

  it('refused before validation: a body too deep and invalid otherwise is refused for its depth', async () => {
    const body = `{"name":"","colour":"blue","claims":${objects(40)}}`;
    expectTooDeep(await admin('POST', '/clients', body), '/claims' + '/a'.repeat(31));
  });

  it('5,000 levels: 400, never 500, on POST and PATCH /clients and PUT of a grant; the server answers after', async () => {
    const existing = await clients.createClient(ctx, { name: 'target', grants: [] });
    const id = existing.client.id;
    const deepObjects = '/claims' + '/a'.repeat(31);
    expectTooDeep(await admin('POST', '/clients', clientBody('five-thousand', 5000)), deepObjects);
    expectTooDeep(await admin('PATCH', `/clients/${id}`, `{"claims":${objects(5000)}}`), deepObjects);
    expectTooDeep(
      await admin(
        'PATCH',
        `/clients/${id}`,
        `{"claims":{"x":${arrays(5000)}}}`,
        'application/merge-patch+json',
      ),
      '/claims/x' + '/0'.repeat(30),
    );
    expectTooDeep(
      await admin('PUT', `/clients/${id}/grants/${audienceId}`, `{"scopes":[],"claims":${objects(5000)}}`),
      deepObjects,
    );
    // A body that is nothing but depth: the pointer of the array at level 33.
    expectTooDeep(await admin('POST', '/clients', arrays(100_000)), '/0'.repeat(32));
    // Nothing changed, and the server still answers: the grant is made with claims at level 32.
    expect((await ctx.store.findClient(id))?.claims).toBeNull();
    expect((await ctx.store.findClient(id))?.grants).toEqual([]);
    const put = await admin(
      'PUT',
      `/clients/${id}/grants/${audienceId}`,
      `{"scopes":[],"claims":${objects(31)}}`,
    );
    expect(put.status).toBe(201);
    expect((put.body as { claims: unknown }).claims).toEqual(JSON.parse(objects(31)));
  });

  it('an audience body too deep is refused alike', async () => {
    const body = `{"identifier":"https://deep.example.com","scopes":[{"name":"a","description":${arrays(40)}}]}`;
    expectTooDeep(await admin('POST', '/audiences', body), '/scopes/0/description' + '/0'.repeat(29));
  });
});

describe("the console's session API: at most 32 levels", () => {
  it('a login body too deep is 400 at its pointer (before the Origin, the schema or a password check)', async () => {
    const login = (levels: number) => `{"email":${arrays(levels - 1)},"password":"x"}`;
    const answer = await send('POST', '/console/api/session', login(33));
    expect(answer).toEqual({
      status: 400,
      type: 'application/problem+json; charset=utf-8',
      cacheControl: 'no-store',
      body: tooDeep('/email' + '/0'.repeat(31)),
    });
    // 32 levels pass to the schema, which refuses a list for an email.
    const fits = await send('POST', '/console/api/session', login(32));
    expect(fits.status).toBe(400);
    expect(fits.body).toMatchObject({ type: 'urn:tessera:problem:invalid_field' });
    // 5,000 levels (within the console's 16 KiB): 400, not 500.
    expectTooDeep(await send('POST', '/console/api/session', login(5000)), '/email' + '/0'.repeat(31));
    const enrollment = await send('POST', '/console/api/enrollment', `{"token":${arrays(5000)}}`);
    expectTooDeep(enrollment, '/token' + '/0'.repeat(31));
  });
});

describe('the token endpoint: at most 32 levels', () => {
  let form: Record<string, string>;
  beforeAll(async () => {
    const { client, secret } = await clients.createClient(ctx, { name: 'svc', grants: [API] });
    await t.sync();
    form = { grant_type: 'client_credentials', client_id: client.id, client_secret: secret, audience: API };
  });

  /** The form as a JSON body with one more member, `extra` (an unknown parameter, which is otherwise ignored). */
  const withExtra = (extra: string) => JSON.stringify(form).replace(/}$/, `,"extra":${extra}}`);
  const post = (body: string) => postToken(t.url, body, { headers: { 'content-type': 'application/json' } });
  const REFUSED = {
    error: 'invalid_request',
    error_description: 'the JSON body nests deeper than 32 levels',
  };

  function expectRefused(answer: Awaited<ReturnType<typeof postToken>>): void {
    expect({ status: answer.status, body: answer.body }).toEqual({ status: 400, body: REFUSED });
    expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
    for (const [name, value] of Object.entries(NO_STORE)) expect(answer.headers.get(name)).toBe(value);
  }

  it('32 levels get a token; 33 levels are 400 invalid_request, even in an unknown parameter', async () => {
    expect((await post(withExtra(arrays(31)))).status).toBe(200);
    expectRefused(await post(withExtra(arrays(32))));
    expectRefused(await post(withExtra(objects(32))));
  });

  it('as deep as 8 KiB allows (4,000 levels): 400, not 500; then a token as usual', async () => {
    const body = withExtra(arrays(4000));
    expect(Buffer.byteLength(body)).toBeLessThanOrEqual(8192);
    expectRefused(await post(body));
    expectRefused(await post(arrays(4096)));
    const after = await postToken(t.url, form);
    expect(after.status).toBe(200);
    expect(after.body.token_type).toBe('Bearer');
  });
});
