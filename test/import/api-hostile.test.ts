/**
 * POST /admin/v1/imports against hostile exports (the security review of the import): any caller with
 * `clients:read audiences:read` (a console viewer) can call it, so each export here is answered with a report line
 * or a 400/413 problem naming its place, never a 500, a change of the server's objects (Object.prototype), or a
 * key copied into the answer. The mapping's own refusals are in hostile.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_SCOPES } from '../../src/management/builtin.js';
import type { ManagementContext } from '../../src/management/index.js';
import { adminCall, adminClient, type AdminAnswer } from '../helpers/admin.js';
import { managementOf } from '../helpers/management.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let t: TestServer;
let ctx: ManagementContext;
let viewer: { token: string };
let full: { token: string };

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t);
  viewer = await adminClient(t, ctx, ['clients:read', 'audiences:read'], 'console-viewer');
  full = await adminClient(t, ctx, ADMIN_SCOPES, 'ops-full');
});
afterAll(async () => {
  await t?.close();
});

const post = (body: unknown): Promise<AdminAnswer> => adminCall(t, viewer, 'POST', '/imports', body);

const claimMapper = (name: string, value: string, type = 'String') => ({
  name,
  protocolMapper: 'oidc-hardcoded-claim-mapper',
  config: { 'claim.name': name, 'claim.value': value, 'jsonType.label': type, 'access.token.claim': 'true' },
});

const realmOf = (mappers: unknown[], fields: Record<string, unknown> = {}) => ({
  clients: [{ clientId: 'job', serviceAccountsEnabled: true, protocolMappers: mappers, ...fields }],
});

const problemOf = (answer: AdminAnswer) => [answer.status, answer.headers.get('content-type'), answer.body];

describe('POST /admin/v1/imports, hostile exports', () => {
  it('leaves out a claim named x.__proto__.prune: Object.prototype untouched, a later apply prunes nothing', async () => {
    await t.addAudience('https://kept.example');
    const answer = await post({
      source: 'keycloak',
      file: realmOf([claimMapper('x.__proto__.prune', 'true', 'boolean'), claimMapper('__proto__', 'x')]),
    });
    expect(answer.status).toBe(200);
    expect(({} as Record<string, unknown>).prune).toBeUndefined();
    expect(answer.body.report.slice(1, 3)).toEqual([
      {
        place: '/clients/0/protocolMappers/0/config/claim.name',
        outcome: 'left_out',
        detail: 'client job: claim member "__proto__" is not allowed',
      },
      {
        place: '/clients/0/protocolMappers/1/config/claim.name',
        outcome: 'left_out',
        detail: 'client job: claim "__proto__" is not allowed',
      },
    ]);
    // An ordinary apply, with no prune in its body, keeps what the file lacks.
    const applied = await adminCall(t, full, 'POST', '/apply', { file: answer.body.apply_file });
    expect(applied.status).toBe(200);
    expect(applied.body.summary).toEqual({ create: 1, update: 0, delete: 0 });
  });

  it('answers a 400 problem, not a 500, for {"toString": 1, "valueOf": 1} where a string is meant', async () => {
    const hostile = { toString: 1, valueOf: 1 };
    const answer = await post({
      source: 'keycloak',
      file: realmOf([{ name: hostile, protocolMapper: hostile }], { clientAuthenticatorType: hostile }),
    });
    expect(problemOf(answer)).toEqual([
      400,
      'application/problem+json; charset=utf-8',
      {
        type: 'urn:tessera:problem:invalid_file',
        title: 'Bad Request',
        status: 400,
        detail: 'the export has 3 problems; nothing was mapped',
        errors: [
          {
            pointer: '/file/clients/0/clientAuthenticatorType',
            detail: 'clientAuthenticatorType must be a string, not an object',
          },
          {
            pointer: '/file/clients/0/protocolMappers/0/name',
            detail: 'name must be a string, not an object',
          },
          {
            pointer: '/file/clients/0/protocolMappers/0/protocolMapper',
            detail: 'protocolMapper must be a string, not an object',
          },
        ],
      },
    ]);
  });

  it('refuses a 100 000-level claim.value and a 100 000-digit Hydra lifespan at once, with their places', async () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    const started = performance.now();
    const [claim, lifespan] = await Promise.all([
      post({ source: 'keycloak', file: realmOf([claimMapper('deep', deep, 'JSON')]) }),
      post({
        source: 'hydra',
        file: [
          {
            client_id: 'job',
            grant_types: ['client_credentials'],
            client_credentials_grant_access_token_lifespan: '9'.repeat(100_000),
          },
        ],
      }),
    ]);
    expect(performance.now() - started).toBeLessThan(5000);
    expect([claim.status, claim.body.errors]).toEqual([
      400,
      [
        {
          pointer: '/file/clients/0/protocolMappers/0/config/claim.value',
          detail: `claim deep of client job: its JSON value nests deeper than 32 levels (at ${'/0'.repeat(32)})`,
        },
      ],
    ]);
    expect([lifespan.status, lifespan.body.errors]).toEqual([
      400,
      [
        {
          pointer: '/file/0/client_credentials_grant_access_token_lifespan',
          detail: 'is 100000 characters long; a Go duration is read up to 64',
        },
      ],
    ]);
  });

  it('reads keywords and audiences as the body gives them: constructor is a name like any other', async () => {
    const tenant = {
      resourceServers: [{ identifier: 'constructor', name: '##toString##', scopes: [{ value: 'read' }] }],
    };
    const missing = await post({ source: 'auth0', file: tenant });
    expect([missing.status, missing.body.errors]).toEqual([
      400,
      [
        {
          pointer: '/file/resourceServers/0/name',
          detail: 'placeholder ##toString## has no value: give it one (--keyword toString=VALUE)',
        },
      ],
    ]);
    const given = await post({
      source: 'auth0',
      file: tenant,
      keywords: { toString: 'Orders' },
      audiences: { constructor: 'https://orders.example' },
    });
    expect([given.status, given.body.apply_file.audiences]).toEqual([
      200,
      [
        {
          identifier: 'https://orders.example',
          name: 'Orders',
          scopes: [{ name: 'read' }],
          token_profile: 'auth0',
        },
      ],
    ]);
  });

  it('refuses a jwks holding a private key at its place, and answers none of it', async () => {
    const d = 'nJ3kQx8VwY2pZr5tLm0aSe7uFh4gDc1bXo6iKq9yWv3sTn8rMj2lPz5xHa0eGf7u';
    const key = {
      kty: 'EC',
      crv: 'P-256',
      x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
      y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
      d,
    };
    const answers = await Promise.all([
      post({
        source: 'hydra',
        file: [
          {
            client_id: 'job',
            grant_types: ['client_credentials'],
            token_endpoint_auth_method: 'private_key_jwt',
            jwks: { keys: [key] },
          },
        ],
      }),
      post({
        source: 'keycloak',
        file: realmOf([], {
          clientAuthenticatorType: 'client-jwt',
          attributes: { 'use.jwks.string': 'true', 'jwks.string': JSON.stringify({ keys: [key] }) },
        }),
      }),
    ]);
    expect(answers.map((a) => [a.status, a.body.errors])).toEqual([
      [
        400,
        [
          {
            pointer: '/file/0/jwks/keys/0',
            detail:
              'client job\'s jwks key 1 has "d": it is a private or symmetric key; an export\'s jwks holds public keys only',
          },
        ],
      ],
      [
        400,
        [
          {
            pointer: '/file/clients/0/attributes/jwks.string',
            detail:
              'client job\'s jwks.string key 1 has "d": it is a private or symmetric key; an export\'s jwks holds public keys only',
          },
        ],
      ],
    ]);
    for (const answer of answers) expect(JSON.stringify(answer.body)).not.toContain(d);
  });

  it('reads the export as text up to 2 MiB (413 past it, naming the limit); as JSON, up to the body limit', async () => {
    const clients = Array.from({ length: 60_000 }, (_, i) => ({ client_id: `c-${i}`, grant_types: [] }));
    const text = JSON.stringify(clients);
    expect(Buffer.byteLength(text)).toBeGreaterThan(2 * 1024 * 1024);
    const asText = await post({ source: 'hydra', file: text });
    expect(problemOf(asText)).toEqual([
      413,
      'application/problem+json; charset=utf-8',
      {
        type: 'urn:tessera:problem:body_too_large',
        title: 'Content Too Large',
        status: 413,
        detail: `the export as text (file, a string) is ${Buffer.byteLength(text)} bytes; as text it is read up to 2097152 bytes (2 MiB): give a bigger one as JSON`,
        errors: [
          { pointer: '/file', detail: `is ${Buffer.byteLength(text)} bytes of text; at most 2097152` },
        ],
      },
    ]);
    const asJson = await post({ source: 'hydra', file: clients });
    expect([asJson.status, asJson.body.report.length]).toEqual([200, 60_000]);
    // A YAML text with an error, just below the limit: a 400 with its place.
    const yaml = `clients:\n  - name: [a\n${'#'.repeat(2 * 1024 * 1024 - 30)}\n`;
    const refused = await post({ source: 'auth0', file: yaml });
    expect([refused.status, refused.body.errors[0].pointer]).toEqual([400, '/file']);
  });
});
