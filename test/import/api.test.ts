/**
 * POST /admin/v1/imports (MANAGEMENT.md, "Moving in from another server"; docs/import.md): `tessera import` over
 * HTTP, against a real server. It answers the apply file and the report that the CLI's import gives, changes
 * nothing, answers no secret; a bad export is a 400 with every problem's JSON pointer in the body; it needs both
 * read scopes. Every answer is checked against the OpenAPI document's schema for its status, and the apply file it
 * answers is applied by POST /admin/v1/apply.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ADMIN_SCOPES } from '../../src/management/builtin.js';
import { exportConfig } from '../../src/management/declarative/index.js';
import type { ManagementContext } from '../../src/management/index.js';
import { importExport } from '../../src/management/import/index.js';
import { adminCall, adminClient, type AdminAnswer } from '../helpers/admin.js';
import { managementOf } from '../helpers/management.js';
import { ROOT } from '../helpers/process.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type Operation = {
  operationId: string;
  security: Record<string, string[]>[];
  responses: Record<string, { content?: Record<string, { schema: object }> }>;
};

const FIXTURES = path.join(ROOT, 'test/fixtures/import');
const text = (name: string): string => readFileSync(path.join(FIXTURES, name), 'utf8');
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
const SECRET = 'W5vKq2mZ8xT1rY7uN4bH6cJ9dL3fG0sA';

let t: TestServer;
let ctx: ManagementContext;
let operation: Operation;
let full: { token: string };
let clientsOnly: { token: string };

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t);
  const doc = (await (await fetch(`${t.url}/admin/v1/openapi.json`)).json()) as {
    paths: Record<string, Record<string, Operation>>;
  };
  operation = doc.paths['/imports']!.post!;
  full = await adminClient(t, ctx, ADMIN_SCOPES, 'ops-full');
  clientsOnly = await adminClient(t, ctx, ['clients:read', 'clients:write'], 'ops-clients');
});
afterAll(async () => {
  await t?.close();
});

/** POST /imports; the answer is checked against the document's schema for its status and type. */
async function post(as: { token: string }, body: unknown): Promise<AdminAnswer> {
  const answer = await adminCall(t, as, 'POST', '/imports', body);
  const declared = operation.responses[String(answer.status)];
  expect(
    declared,
    `POST /imports answered ${answer.status}, which the document does not declare`,
  ).toBeDefined();
  const type = answer.headers.get('content-type')?.split(';')[0] ?? '';
  const schema = declared!.content?.[type]?.schema;
  expect(schema, `POST /imports ${answer.status}: no schema for ${type}`).toBeDefined();
  const validate = ajv.compile(schema!);
  expect(validate(answer.body), JSON.stringify(validate.errors)).toBe(true);
  expect(answer.headers.get('cache-control')).toBe('no-store');
  return answer;
}

describe('POST /admin/v1/imports', () => {
  it('is in the OpenAPI document, needing both read scopes', () => {
    expect(operation.operationId).toBe('createImport');
    expect(operation.security).toEqual([
      { bearer: ['clients:read', 'audiences:read'] },
      { dpop: ['clients:read', 'audiences:read'] },
      { session: [] },
    ]);
    expect(Object.keys(operation.responses).sort()).toEqual([
      '200',
      '400',
      '401',
      '403',
      '413',
      '415',
      '429',
      '503',
    ]);
  });

  it('maps a Keycloak realm as the CLI does, answers no secret, changes nothing; its file applies', async () => {
    const before = await exportConfig(ctx);
    const realm = JSON.parse(text('keycloak/realm-export.json')) as unknown;
    const answer = await post(full, {
      source: 'keycloak',
      file: realm,
      audiences: { ledger: 'https://ledger.acme.example' },
    });
    expect(answer.status).toBe(200);
    const mapped = importExport(
      'keycloak',
      { text: text('keycloak/realm-export.json'), name: 'x' },
      { audiences: { ledger: 'https://ledger.acme.example' } },
    );
    expect(answer.body).toEqual({ apply_file: parse(text('keycloak/tessera.yaml')), report: mapped.report });
    expect(answer.body.report[6]).toEqual({
      place: '/clients/5/secret',
      outcome: 'changed',
      detail:
        "client orders-worker's secret is in the export but not carried (--secrets FILE carries it): apply makes a new one",
    });
    expect(JSON.stringify(answer.body)).not.toContain(SECRET);
    expect(await exportConfig(ctx)).toEqual(before);

    const applied = await adminCall(t, full, 'POST', '/apply', { file: answer.body.apply_file });
    expect(applied.status).toBe(200);
    expect(applied.body.summary).toEqual({ create: 12, update: 0, delete: 0 });
  });

  it('maps an Auth0 tenant.yaml given as JSON with its keywords, and the YAML text itself with places line:column', async () => {
    const tenant = parse(text('auth0/tenant.yaml')) as unknown;
    const keywords = { ENV: 'prod', AUTH0_DOMAIN: 'acme.eu.auth0.com' };
    const audiences = { reports: 'https://reports.acme.example' };
    const asJson = await post(full, { source: 'auth0', file: tenant, keywords, audiences });
    expect(asJson.status).toBe(200);
    expect(asJson.body.apply_file).toEqual(parse(text('auth0/tessera.yaml')));
    expect(asJson.body.report.slice(0, 2)).toEqual([
      {
        place: '/resourceServers/0',
        outcome: 'mapped',
        detail:
          'API "Orders API" → audience https://prod.api.acme.example/orders (2 scopes, token_profile auth0)',
      },
      {
        place: '/resourceServers/1/token_lifetime',
        outcome: 'changed',
        detail: "token_lifetime 30 s is 60 s: Tessera's token lifetimes are whole seconds from 60 to 86400",
      },
    ]);
    const asText = await post(full, {
      source: 'auth0',
      file: text('auth0/tenant.yaml'),
      keywords,
      audiences,
    });
    expect(asText.status).toBe(200);
    expect(asText.body.apply_file).toEqual(asJson.body.apply_file);
    expect(asText.body.report.slice(0, 2).map((l: { place: string }) => l.place)).toEqual(['7:5', '24:21']);
  });

  it('maps Hydra clients: a page, a list, one client', async () => {
    const page = JSON.parse(text('hydra/clients.json')) as { items: unknown[] };
    const answers = await Promise.all(
      [page, page.items, page.items[0]].map((file) => post(full, { source: 'hydra', file })),
    );
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(answers[0]!.body.apply_file).toEqual(parse(text('hydra/tessera.yaml')));
    expect(answers[1]!.body.apply_file).toEqual(answers[0]!.body.apply_file);
    expect(answers[2]!.body.apply_file.clients.map((c: { client_id: string }) => c.client_id)).toEqual([
      '3b0b6d6e-6f3a-4c8e-9a51-2f0d1c7e8a01',
    ]);
    expect(answers[2]!.body.report[0].place).toBe('/client_credentials_grant_access_token_lifespan');
  });

  it('refuses a bad export with every problem at its pointer in the body, and a bad body as any route does', async () => {
    const tenant = parse(text('auth0/tenant.yaml')) as unknown;
    let answer = await post(full, { source: 'auth0', file: tenant, keywords: { ENV: 'prod' } });
    expect([answer.status, answer.body]).toEqual([
      400,
      {
        type: 'urn:tessera:problem:invalid_file',
        title: 'Bad Request',
        status: 400,
        detail: 'the export has 1 problem; nothing was mapped',
        errors: [
          {
            pointer: '/file/clientGrants/1/audience',
            detail: 'placeholder ##AUTH0_DOMAIN## has no value: give it one (--keyword AUTH0_DOMAIN=VALUE)',
          },
        ],
      },
    ]);
    answer = await post(full, { source: 'keycloak', file: { clients: [{ clientId: 3 }, 'x'] } });
    expect(answer.body.errors).toEqual([
      { pointer: '/file/clients/0/clientId', detail: 'clientId must be a string, not a number' },
      { pointer: '/file/clients/1', detail: 'a client must be an object, not a string' },
    ]);
    answer = await post(full, { source: 'auth0', file: 'clients:\n  - name: [a\n' });
    expect([answer.status, answer.body.errors]).toEqual([
      400,
      [
        {
          pointer: '/file',
          detail: '3:1: Flow sequence in block collection must be sufficiently indented and end with a ]',
        },
      ],
    ]);
    answer = await post(full, { source: 'okta', file: {} });
    expect([answer.status, answer.body.errors]).toEqual([
      400,
      [{ pointer: '/source', detail: 'must be one of "auth0", "keycloak", "hydra"' }],
    ]);
  });

  it('needs audiences:read as well as clients:read', async () => {
    const answer = await post(clientsOnly, { source: 'hydra', file: [] });
    expect(answer.status).toBe(403);
    expect(answer.headers.get('www-authenticate')).toBe(
      'Bearer error="insufficient_scope", scope="audiences:read"',
    );
    expect(answer.body.detail).toBe(
      'an import needs the scopes clients:read audiences:read; this caller lacks audiences:read',
    );
  });
});
