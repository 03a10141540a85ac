/**
 * MANAGEMENT.md: names and descriptions refuse control characters and the bidirectional overrides (U+202A to
 * U+202E, U+2066 to U+2069), which make a name show in another order than it is written. One rule, in the
 * management layer, for every face: here the admin API on a real server (each refusal a 400 problem+json at
 * the field's pointer, nothing changed), and the CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audiences, clients, type ManagementContext } from '../../src/management/index.js';
import { adminToken, send, type SentAnswer as AdminAnswer } from '../helpers/admin.js';
import { jsonError, workspace } from '../helpers/cli.js';
import { managementOf } from '../helpers/management.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const NO_BIDI = 'must not contain bidirectional overrides (U+202A to U+202E, U+2066 to U+2069)';
/** Every one of them: LRE, RLE, PDF, LRO, RLO; LRI, RLI, FSI, PDI. */
const OVERRIDES = [0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069].map((c) =>
  String.fromCharCode(c),
);

let t: TestServer;
let ctx: ManagementContext;
let token: string;

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t, 'test');
  token = await adminToken(t, ctx);
});
afterAll(async () => {
  await t?.close();
});

const admin = (method: string, path: string, body: unknown) =>
  send(t, method, `/admin/v1${path}`, JSON.stringify(body), { authorization: `Bearer ${token}` });

function expectRefused(answer: AdminAnswer, pointer: string, detail: string): void {
  expect(answer).toEqual({
    status: 400,
    type: 'application/problem+json; charset=utf-8',
    cacheControl: 'no-store',
    body: {
      type: 'urn:tessera:problem:invalid_field',
      title: 'Bad Request',
      status: 400,
      detail,
      errors: [{ pointer, detail }],
    },
  });
}

describe('the admin API', () => {
  it('a client name with U+202E (the probe): 400 at /name, no client made; each override alike', async () => {
    const before = (await ctx.store.listClients()).length;
    expectRefused(
      await admin('POST', '/clients', { name: 'invoice\u202egnp.exe' }),
      '/name',
      `the client name ${NO_BIDI}`,
    );
    for (const c of OVERRIDES)
      expectRefused(
        await admin('POST', '/clients', { name: `a${c}b` }),
        '/name',
        `the client name ${NO_BIDI}`,
      );
    expect((await ctx.store.listClients()).length).toBe(before);
  });

  it('PATCH of a name or a description with one: 400 at its pointer, nothing changed', async () => {
    const { client } = await clients.createClient(ctx, { name: 'svc', description: 'first', grants: [] });
    expectRefused(
      await admin('PATCH', `/clients/${client.id}`, { description: 'pay \u2067here\u2069' }),
      '/description',
      `description ${NO_BIDI}`,
    );
    expectRefused(
      await admin('PATCH', `/clients/${client.id}`, { name: '\u202dsvc' }),
      '/name',
      `the client name ${NO_BIDI}`,
    );
    const stored = await ctx.store.findClient(client.id);
    expect({ name: stored?.name, description: stored?.description }).toEqual({
      name: 'svc',
      description: 'first',
    });
  });

  it('descriptions keep their line breaks and tabs; other control characters, C1 included, are refused', async () => {
    const { client } = await clients.createClient(ctx, { name: 'lines', grants: [] });
    const text = 'line one\nline two\r\n\tindented';
    const ok = await admin('PATCH', `/clients/${client.id}`, { description: text });
    expect(ok.status).toBe(200);
    expect((ok.body as { description: string }).description).toBe(text);
    for (const c of ['\u0000', '\u001b', '\u007f', '\u0085', '\u009b'])
      expectRefused(
        await admin('PATCH', `/clients/${client.id}`, { description: `a${c}b` }),
        '/description',
        'description must not contain control characters',
      );
    expectRefused(
      await admin('POST', '/clients', { name: 'a\u009bb' }),
      '/name',
      'the client name must not contain control characters',
    );
  });

  it("an audience's name and a scope's description: 400 at /name and /scopes, nothing made", async () => {
    expectRefused(
      await admin('POST', '/audiences', { identifier: 'https://a.example.com', name: 'Orders \u202eIPA' }),
      '/name',
      `the audience name ${NO_BIDI}`,
    );
    expectRefused(
      await admin('POST', '/audiences', {
        identifier: 'https://b.example.com',
        scopes: [{ name: 'orders:read', description: 'read \u2066orders' }],
      }),
      '/scopes',
      `the description of scope orders:read ${NO_BIDI}`,
    );
    expect((await ctx.store.listAudiences()).map((a) => a.url)).not.toContain('https://a.example.com');
    expect((await ctx.store.listAudiences()).map((a) => a.url)).not.toContain('https://b.example.com');
    // PATCH of an existing audience alike.
    const made = await audiences.addAudience(ctx, { url: 'https://c.example.com', name: 'C' });
    expectRefused(
      await admin('PATCH', `/audiences/${made.id}`, { name: 'C\u202b' }),
      '/name',
      `the audience name ${NO_BIDI}`,
    );
    expect((await ctx.store.findAudienceById(made.id))?.name).toBe('C');
  });
});

describe('the CLI', { timeout: 60_000 }, () => {
  const ws = workspace('tessera-names-test-');
  afterAll(() => ws.remove());

  it('client create --name with U+202E: exit 2 and the rule, nothing made', async () => {
    const name = 'invoice\u202egnp.exe';
    const r = await ws.run('client', 'create', '--name', name, '--json');
    expect(r.code).toBe(2);
    expect(jsonError(r)).toEqual({
      error: 'usage',
      message: `option '--name <name>' argument '${name}' is invalid. the name ${NO_BIDI}`,
    });
    expect((await ws.ok('client', 'list', '--json')).json).toEqual([]);
  });
});
