/**
 * POST /admin/v1/apply (MANAGEMENT.md, "Declarative configuration" and the console's import page): `tessera apply
 * --json` over HTTP, against a real server. A dry run plans and changes nothing; an apply changes the store in one
 * transaction and shows the new clients' secrets once; a file with errors is refused whole with every error's JSON
 * pointer; client_secret_file is refused (it names a file of the server's machine); and no caller gives what it
 * does not hold: a file that would grant admin scopes the caller lacks, change a client more powerful than it, or
 * prune one, is a 403 naming the scopes missing, and nothing changes. Every answer is checked against the OpenAPI
 * document's schema for its status.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_SCOPES, adminAudienceUrl } from '../../src/management/builtin.js';
import { exportConfig } from '../../src/management/declarative/index.js';
import type { ManagementContext } from '../../src/management/index.js';
import {
  adminCall,
  adminClient,
  operatorSession,
  type AdminAnswer,
  type AdminCredentials,
} from '../helpers/admin.js';
import { managementOf } from '../helpers/management.js';
import { tokenParams } from '../helpers/provision.js';
import { postToken, startTestServer, type TestServer } from '../helpers/server.js';

type Operation = { responses: Record<string, { content?: Record<string, { schema: object }> }> };

const API = 'https://orders.example.com';
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);

let t: TestServer;
let ctx: ManagementContext;
let operation: Operation;
/** Every admin scope: the caller that may apply anything. */
let full: { token: string };
/** The scopes an apply needs, and no admin scope beyond them. */
let limited: { id: string; token: string };
let ADMIN: string;

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t);
  ADMIN = adminAudienceUrl(t.config);
  const doc = (await (await fetch(`${t.url}/admin/v1/openapi.json`)).json()) as {
    paths: Record<string, Record<string, Operation>>;
  };
  operation = doc.paths['/apply']!.post!;
  full = await adminClient(t, ctx, ADMIN_SCOPES, 'ops-full');
  limited = await adminClient(
    t,
    ctx,
    ['audiences:read', 'audiences:write', 'clients:read', 'clients:write'],
    'ops-limited',
  );
});
afterAll(async () => {
  await t?.close();
});

/** POST /apply as `as`; the answer is checked against the document's schema for its status and type. */
async function apply(as: AdminCredentials | { token: string }, body: unknown): Promise<AdminAnswer> {
  const answer = await adminCall(t, as, 'POST', '/apply', body);
  const declared = operation.responses[String(answer.status)];
  expect(
    declared,
    `POST /apply answered ${answer.status}, which the document does not declare`,
  ).toBeDefined();
  const type = answer.headers.get('content-type')?.split(';')[0] ?? '';
  const schema = declared!.content?.[type]?.schema;
  expect(schema, `POST /apply ${answer.status}: no schema for ${type}`).toBeDefined();
  const validate = ajv.compile(schema!);
  expect(validate(answer.body), JSON.stringify(validate.errors)).toBe(true);
  expect(answer.headers.get('cache-control')).toBe('no-store');
  return answer;
}

const problem = (status: number, code: string, detail: string, extra: object = {}) => ({
  type: `urn:tessera:problem:${code}`,
  title: status === 400 ? 'Bad Request' : status === 403 ? 'Forbidden' : expect.any(String),
  status,
  detail,
  ...extra,
});

const challenge = (scopes: string) => `Bearer error="insufficient_scope", scope="${scopes}"`;

/** The store as a file: what must be the same before and after a refused apply. */
const snapshot = () => exportConfig(ctx);

const ordersFile = () => ({
  audiences: [
    {
      identifier: API,
      name: 'Orders API',
      scopes: [{ name: 'orders:read' }, { name: 'orders:write', description: 'change orders' }],
    },
  ],
  clients: [{ client_id: 'billing', name: 'Billing', grants: [{ audience: API, scopes: ['orders:read'] }] }],
});

const ORDERS_LINES = [
  `+ audience ${API} (name "Orders API", scopes orders:read orders:write)`,
  '+ client billing (name "Billing", enabled true)',
  `+ grant billing → ${API} (scopes "orders:read")`,
];

const ORDERS_CHANGES = [
  {
    action: 'create',
    type: 'audience',
    identifier: API,
    values: {
      name: 'Orders API',
      scopes: [{ name: 'orders:read' }, { name: 'orders:write', description: 'change orders' }],
    },
  },
  { action: 'create', type: 'client', client_id: 'billing', values: { name: 'Billing', enabled: true } },
  { action: 'create', type: 'grant', client_id: 'billing', audience: API, scopes: ['orders:read'] },
];

describe('POST /admin/v1/apply', () => {
  it('is in the OpenAPI document with its body, its answer and its errors', () => {
    expect(Object.keys(operation.responses).sort()).toEqual(
      ['200', '400', '401', '403', '404', '409', '412', '413', '415', '429', '503'].sort(),
    );
    const op = operation as Operation & {
      operationId: string;
      requestBody: { content: Record<string, { schema: { required: string[] } }> };
    };
    expect(op.operationId).toBe('applyConfig');
    expect(op.requestBody.content['application/json']!.schema.required).toEqual(['file']);
  });

  it('a dry run: the plan, its lines, nothing changed; the apply: the same plan, applied, the secret once; again: no changes', async () => {
    const before = await snapshot();
    const dry = await apply(full, { file: ordersFile(), dry_run: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toEqual({
      dry_run: true,
      prune: false,
      applied: false,
      summary: { create: 3, update: 0, delete: 0 },
      changes: ORDERS_CHANGES,
      kept: { audiences: 0, clients: 2, grants: 0 },
      lines: ORDERS_LINES,
      secrets: [],
    });
    expect(await snapshot()).toEqual(before);

    const applied = await apply(full, { file: ordersFile() });
    expect(applied.status).toBe(200);
    expect(applied.body).toEqual({
      ...dry.body,
      dry_run: false,
      applied: true,
      secrets: [{ client_id: 'billing', client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) }],
    });
    // The secret shown works at the token endpoint.
    await t.sync();
    const token = await postToken(
      t.url,
      tokenParams('billing', applied.body.secrets[0].client_secret as string, API),
    );
    expect(token.status).toBe(200);
    expect(token.body.scope).toBe('orders:read');
    // Audited as the admin client that applied it.
    const events = await adminCall(t, full, 'GET', '/audit-events?client_id=billing&type=client.created');
    expect(events.body.items.map((e: { actor: string; type: string }) => [e.type, e.actor])).toEqual([
      ['client.created', 'client:ops-full'],
    ]);

    const again = await apply(full, { file: ordersFile() });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({
      dry_run: false,
      prune: false,
      applied: false,
      summary: { create: 0, update: 0, delete: 0 },
      changes: [],
      kept: { audiences: 0, clients: 2, grants: 0 },
      lines: [],
      secrets: [],
    });
  });

  it('an update and, with prune, a deletion, field by field', async () => {
    const file = await snapshot();
    const orders = file.audiences!.find((a) => a.identifier === API)!;
    orders.token_ttl = 600;
    file.clients = file.clients!.filter((c) => c.client_id !== 'billing');
    const dry = await apply(full, { file, dry_run: true, prune: true });
    expect(dry.status).toBe(200);
    expect(dry.body.lines).toEqual([
      `~ audience ${API}: token_ttl null → 600`,
      '- client billing (with its grants)',
    ]);
    expect(dry.body.summary).toEqual({ create: 0, update: 1, delete: 1 });
    expect(dry.body.kept).toEqual({ audiences: 0, clients: 0, grants: 0 });
    // Without prune, billing is kept and said so.
    const kept = await apply(full, { file, dry_run: true });
    expect(kept.body.lines).toEqual([`~ audience ${API}: token_ttl null → 600`]);
    expect(kept.body.kept).toEqual({ audiences: 0, clients: 1, grants: 0 });
  });

  it('a file with errors: 400 with every error at its JSON pointer in the body, nothing changed', async () => {
    const before = await snapshot();
    const file = {
      audiences: [{ identifier: 'https://new.example.com', scopes: [{ name: 'a b' }] }],
      clients: [
        { client_id: 'ok-client', name: 'OK', grants: [{ audience: 'https://nowhere.example.com' }] },
        { client_id: 'other', name: 'Other', colour: 'blue', grants: [{ audience: API, scopes: ['nope'] }] },
        { client_id: 'tagged', name: 'Tagged', claims: { iss: 'me' } },
      ],
      extra: true,
    };
    const refused = await apply(full, { file });
    expect(refused.status).toBe(400);
    expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
    expect(refused.body).toEqual(
      problem(400, 'invalid_file', 'the file has 6 errors; nothing was changed', {
        errors: [
          // The file's shape first, then its rules and cross-references, each in the file's order.
          { pointer: '/file/extra', detail: 'unknown field "extra"' },
          { pointer: '/file/clients/1/colour', detail: 'unknown field "colour"' },
          {
            pointer: '/file/audiences/0/scopes/0/name',
            detail: 'scope "a b" is not a scope token (RFC 6749 §3.3: printable ASCII but space, " and \\)',
          },
          {
            pointer: '/file/clients/0/grants/0/audience',
            detail: 'audience https://nowhere.example.com is neither in the file nor registered',
          },
          {
            pointer: '/file/clients/1/grants/0/scopes/0',
            detail: `audience ${API} defines no scope "nope"`,
          },
          { pointer: '/file/clients/2/claims', detail: expect.stringContaining('iss') },
        ],
      }),
    );
    expect(await snapshot()).toEqual(before);
  });

  it('client_secret_file is refused at its place: the API reads no file of the server', async () => {
    const file = {
      clients: [{ client_id: 'from-file', name: 'From a file', client_secret_file: '/etc/hostname' }],
    };
    for (const dry_run of [true, false]) {
      const refused = await apply(full, { file, dry_run });
      expect(refused.status).toBe(400);
      expect(refused.body).toEqual(
        problem(400, 'invalid_file', 'the file has 1 error; nothing was changed', {
          errors: [
            {
              pointer: '/file/clients/0/client_secret_file',
              detail: 'client_secret_file is read only from a file on this machine',
            },
          ],
        }),
      );
    }
    expect((await snapshot()).clients!.some((c) => c.client_id === 'from-file')).toBe(false);
  });

  it('a bad body: 400 at its field (no file, a dry_run that is not a boolean, another field, not JSON)', async () => {
    const cases: [unknown, { pointer: string; detail: string }[]][] = [
      [{}, [{ pointer: '/file', detail: 'is required' }]],
      [{ file: [] }, [{ pointer: '/file', detail: 'must be object' }]],
      [{ file: {}, dry_run: 'yes' }, [{ pointer: '/dry_run', detail: 'must be boolean' }]],
      [{ file: {}, force: true }, [{ pointer: '/force', detail: 'is not a field of this resource' }]],
    ];
    for (const [body, errors] of cases) {
      const refused = await apply(full, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body).toEqual(
        problem(400, 'invalid_field', 'the request body is not valid', { errors }),
      );
    }
    const notJson = await apply(full, '{"file": ');
    expect(notJson.status).toBe(400);
    expect(notJson.body).toEqual(problem(400, 'invalid_body', 'the request body is not valid JSON'));
  });

  it("a whole export fits: a body past the admin API's 256 KiB is taken, up to 16 MiB (then 413)", async () => {
    const clients = Array.from({ length: 4000 }, (_, i) => ({
      client_id: `bulk-${String(i).padStart(5, '0')}`,
      name: `bulk client ${i}`,
      description: 'a client of a big export, with a description long enough to take room',
    }));
    const body = { file: { clients }, dry_run: true };
    expect(JSON.stringify(body).length).toBeGreaterThan(256 * 1024);
    const dry = await apply(full, body);
    expect(dry.status).toBe(200);
    expect(dry.body.summary).toEqual({ create: 4000, update: 0, delete: 0 });
    expect(dry.body.lines[0]).toBe(
      '+ client bulk-00000 (name "bulk client 0", description "a client of a big export, with a description long enough to take room", enabled true)',
    );
    // Forty times as many: some 21 MB.
    const tooBig = await apply(full, {
      file: { clients: Array.from({ length: 40 }, () => clients).flat() },
      dry_run: true,
    });
    expect(tooBig.status).toBe(413);
    expect(tooBig.body).toEqual(problem(413, 'body_too_large', 'the request body is too large'));
  });
});

describe('the scopes of the call', () => {
  it('an apply needs audiences:write and clients:write, a dry run audiences:read and clients:read', async () => {
    const writer = await adminClient(t, ctx, ['clients:read', 'clients:write'], 'ops-clients-only');
    const reader = await adminClient(t, ctx, ['audiences:read', 'clients:read'], 'ops-reader');
    const clientsReader = await adminClient(t, ctx, ['clients:read'], 'ops-clients-reader');
    const none = await adminClient(t, ctx, ['keys:read'], 'ops-keys');
    const before = await snapshot();
    const file = { audiences: [{ identifier: 'https://scoped.example.com' }] };

    const cases: [{ token: string }, boolean, string][] = [
      [writer, false, 'audiences:write'],
      [reader, false, 'audiences:write clients:write'],
      [clientsReader, true, 'audiences:read'],
    ];
    for (const [as, dryRun, missing] of cases) {
      const refused = await apply(as, { file, dry_run: dryRun });
      expect(refused.status).toBe(403);
      expect(refused.headers.get('www-authenticate')).toBe(challenge(missing));
      expect(refused.body).toEqual(
        problem(
          403,
          'insufficient_scope',
          dryRun
            ? `a dry run needs the scopes audiences:read clients:read; this caller lacks ${missing}`
            : `an apply needs the scopes audiences:write clients:write; this caller lacks ${missing}`,
        ),
      );
    }
    // Decided before the body is validated: a refused call is a 403 even when its body is also invalid.
    const invalid = await apply(reader, { file: { bogus: 1 }, prune: 'yes' });
    expect(invalid.status).toBe(403);
    expect(invalid.headers.get('www-authenticate')).toBe(challenge('audiences:write clients:write'));
    // Without even clients:read the call is refused before its body is read.
    const shut = await apply(none, { file, dry_run: true });
    expect(shut.status).toBe(403);
    expect(shut.headers.get('www-authenticate')).toBe(challenge('clients:read'));
    expect(shut.body).toEqual(problem(403, 'insufficient_scope', 'this call needs the scope clients:read'));

    // A reader's dry run is a plan.
    const dry = await apply(reader, { file, dry_run: true });
    expect(dry.status).toBe(200);
    expect(dry.body.lines).toEqual(['+ audience https://scoped.example.com']);
    expect(await snapshot()).toEqual(before);
  });

  it("a console operator: a viewer's dry run is a plan, its apply a 403; an admin's apply is applied", async () => {
    const viewer = await operatorSession(t, ctx, 'viewer@example.com', 'viewer');
    const admin = await operatorSession(t, ctx, 'admin@example.com', 'admin');
    const file = { audiences: [{ identifier: 'https://console.example.com', name: 'From the console' }] };
    const dry = await apply(viewer, { file, dry_run: true });
    expect(dry.status).toBe(200);
    expect(dry.body.lines).toEqual(['+ audience https://console.example.com (name "From the console")']);
    const refused = await apply(viewer, { file });
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual(
      problem(
        403,
        'insufficient_scope',
        'an apply needs the scopes audiences:write clients:write; this caller lacks audiences:write clients:write',
      ),
    );
    const applied = await apply(admin, { file });
    expect(applied.status).toBe(200);
    expect(applied.body.applied).toBe(true);
    const events = await adminCall(t, full, 'GET', '/audit-events?type=audience.created');
    expect(
      events.body.items
        .filter((e: { target: string }) => e.target !== null)
        .map((e: { actor: string }) => e.actor),
    ).toContain('operator:admin@example.com');
    // The session's anti-CSRF token is needed, as for every change.
    const noCsrf = await adminCall(
      t,
      undefined,
      'POST',
      '/apply',
      { file, dry_run: true },
      {
        cookie: admin.cookie,
        origin: admin.origin,
      },
    );
    expect(noCsrf.status).toBe(403);
  });
});

describe('no caller gives what it does not hold (an apply through the API)', () => {
  /** Applies `file` as the limited caller; it must be refused naming `missing`, and nothing may change. */
  async function refusedWhole(file: object, missing: string, detail: string, prune = false): Promise<void> {
    const before = await snapshot();
    const refused = await apply(limited, { file, prune });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toBe(challenge(missing));
    expect(refused.body).toEqual(problem(403, 'insufficient_scope', detail));
    expect(await snapshot()).toEqual(before);
  }

  it('a new client granted admin scopes the caller lacks: 403, and the rest of the file is not applied either', async () => {
    await refusedWhole(
      {
        audiences: [{ identifier: 'https://also-new.example.com' }],
        clients: [
          { client_id: 'plain-new', name: 'Plain' },
          {
            client_id: 'rotator',
            name: 'Rotator',
            grants: [{ audience: ADMIN, scopes: ['clients:read', 'keys:write'] }],
          },
        ],
      },
      'keys:write',
      `a grant of ${ADMIN} needs every admin scope it holds or would hold, and this caller lacks keys:write`,
    );
  });

  it('an admin grant given to an existing client, or widened: 403', async () => {
    const file = await snapshot();
    file
      .clients!.find((c) => c.client_id === 'billing')!
      .grants!.push({ audience: ADMIN, scopes: ['audit:read'] });
    await refusedWhole(
      file,
      'audit:read',
      `a grant of ${ADMIN} needs every admin scope it holds or would hold, and this caller lacks audit:read`,
    );
  });

  it('a change of a client more powerful than the caller (its name), or its deletion by prune: 403', async () => {
    const renamed = await snapshot();
    renamed.clients!.find((c) => c.client_id === 'ops-full')!.name = 'taken over';
    const lacks = 'audit:read keys:read keys:write operators:read operators:write tokens:introspect';
    await refusedWhole(
      renamed,
      lacks,
      `a change of client ops-full needs every admin scope it holds or would hold, and this caller lacks ${lacks}`,
    );
    const pruned = await snapshot();
    pruned.clients = pruned.clients!.filter((c) => c.client_id !== 'ops-full');
    await refusedWhole(
      pruned,
      lacks,
      `a change of client ops-full needs every admin scope it holds or would hold, and this caller lacks ${lacks}`,
      true,
    );
  });

  it('the export applied unchanged changes nothing and is allowed; admin scopes the caller holds may be given', async () => {
    const same = await apply(limited, { file: await snapshot(), prune: true });
    expect(same.status).toBe(200);
    expect(same.body).toMatchObject({ applied: false, changes: [], lines: [], secrets: [] });

    const given = await apply(limited, {
      file: {
        clients: [
          { client_id: 'auditor', name: 'Auditor', grants: [{ audience: ADMIN, scopes: ['clients:read'] }] },
        ],
      },
    });
    expect(given.status).toBe(200);
    expect(given.body.lines).toEqual([
      '+ client auditor (name "Auditor", enabled true)',
      `+ grant auditor → ${ADMIN} (scopes "clients:read")`,
    ]);
    expect(given.body.secrets).toEqual([
      { client_id: 'auditor', client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) },
    ]);
  });
});
