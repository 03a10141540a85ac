/**
 * No caller gives what it does not hold (MANAGEMENT.md): every case of the rule through the admin API, with a
 * token and with a console session, with its exact answer; and that nothing changes when a change is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_SCOPES,
  adminAudienceUrl,
  ensureAdminAudience,
  ROLE_SCOPES,
} from '../../src/management/builtin.js';
import {
  audiences,
  clients,
  grants,
  operators,
  secrets,
  type ManagementContext,
} from '../../src/management/index.js';
import { exportConfig } from '../../src/management/declarative/index.js';
import {
  adminCall,
  adminClient,
  operatorSession,
  type AdminAnswer,
  type AdminCredentials,
} from '../helpers/admin.js';
import { managementOf } from '../helpers/management.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { pollUntil } from '../helpers/wait.js';
import { sqlitePath } from '../../src/config/index.js';
import { openSqliteStore } from '../../src/store/sqlite.js';

const API = 'https://api.example.com';
const W = ['clients:read', 'clients:write'];
const WK = [...W, 'keys:read', 'keys:write'];
const O = ['operators:read', 'operators:write'];
const OV = [...O, ...ROLE_SCOPES.viewer];
const ALL = [...ADMIN_SCOPES];
const minus = (all: readonly string[], held: readonly string[]) =>
  all.filter((s) => !held.includes(s)).sort();

let t: TestServer;
let ctx: ManagementContext;
let adminUrl: string;
let adminId: string;
let apiId: string;
let serial = 0;

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t);
  adminUrl = adminAudienceUrl(t.config);
  adminId = (await ensureAdminAudience(ctx)).id;
  apiId = (await audiences.addAudience(ctx, { url: API, scopes: [{ name: 'orders:read' }] })).id;
});
afterAll(async () => {
  await t?.close();
});

const GITHUB_DEPLOY = {
  name: 'deploy',
  issuer: 'https://token.actions.githubusercontent.com',
  subject: 'repo:acme/ops:ref:refs/heads/main',
};

/**
 * A target client: with an admin grant of these scopes (null: no admin grant), granted the API too; with a
 * secret, or (`federated`) with a federated credential instead. `secretId` is the id of its secret or credential.
 */
async function target(
  adminScopes: readonly string[] | null,
  federated = false,
): Promise<{ id: string; secretId: string }> {
  const id = `target-${++serial}`;
  const { client } = await clients.createClient(ctx, {
    id,
    name: 'target',
    grants: adminScopes === null ? [API] : [API, adminUrl],
    ...(adminScopes === null ? {} : { scopes: { [adminUrl]: [...adminScopes] } }),
    ...(federated ? { authMethod: 'private_key_jwt', federatedCredentials: [GITHUB_DEPLOY] } : {}),
  });
  await t.sync();
  return { id, secretId: federated ? client.federatedCredentials[0]!.id : client.secrets[0]!.id };
}

/** The exact refusal of the rule: 403, the scopes missing in the challenge and the detail. */
function expectRefused(answer: AdminAnswer, what: string, missing: readonly string[]): void {
  expect({ status: answer.status, body: answer.body }).toEqual({
    status: 403,
    body: {
      type: 'urn:tessera:problem:insufficient_scope',
      title: 'Forbidden',
      status: 403,
      detail: `${what} needs every admin scope it holds or would hold, and this caller lacks ${missing.join(' ')}`,
    },
  });
  expect(answer.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
  expect(answer.headers.get('cache-control')).toBe('no-store');
  expect(answer.headers.get('www-authenticate')).toBe(
    `Bearer error="insufficient_scope", scope="${missing.join(' ')}"`,
  );
}

/**
 * Everything a refused change could have touched: clients, grants, secrets, federated credentials, operators, the
 * change events.
 */
async function snapshot() {
  const { store } = t.server.runtime;
  return {
    config: await exportConfig(ctx),
    secrets: (await store.listClients()).map((c) => [
      c.id,
      c.enabled,
      c.revokedBefore,
      c.secrets.map((s) => s.id),
      c.federatedCredentials,
    ]),
    operators: await store.listOperators(),
    // The change events only: tokens' events and the refusals (admin.forbidden, summed per address and minute)
    // come through the audit spool, written a moment later, so a refusal of an earlier case may land meanwhile.
    changes: (await store.queryAuditEvents({ limit: 1000 })).filter(
      (e) => !e.type.startsWith('token.') && !e.type.startsWith('admin.'),
    ).length,
  };
}

interface Case {
  name: string;
  /** The admin scopes of the caller (an admin client). */
  caller: readonly string[];
  /** The target's admin scopes (null: none), made fresh for the case. */
  target: readonly string[] | null;
  /** The target has a federated credential instead of a secret (its id is the request's `secretId`). */
  federated?: boolean;
  /** The request: method, path and body, given the target's id and one of its secrets' ids. */
  request: (id: string, secretId: string) => [string, string, unknown?];
  /** Allowed: the status; refused: the scopes missing and the subject of the refusal. */
  expect: number | { missing: readonly string[]; what: (id: string) => string };
}

const client = (id: string) => `a change of client ${id}`;
const adminGrant = () => `a grant of ${adminUrl}`;
const JWKS = {
  keys: [
    {
      kty: 'EC',
      crv: 'P-256',
      x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
      y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
    },
  ],
};

/** What POST /apply needs (audiences:write clients:write), and the clients:write of every case. */
const AW = [...W, 'audiences:read', 'audiences:write'];
/** An apply file (POST /apply's body) of one client, `id`, renamed and with these grants. */
const applying = (id: string, grants: unknown[] = []): [string, string, unknown] => [
  'POST',
  '/apply',
  { file: { clients: [{ client_id: id, name: 'renamed by a file', grants }] } },
];

const CLIENT_CASES: Case[] = [
  // An apply file through the API goes through the same operations, so the same rule (and all or nothing).
  {
    name: 'POST /apply: a file granting a client an admin scope the caller lacks',
    caller: AW,
    target: null,
    request: (id) => applying(id, [{ audience: adminUrl, scopes: ['clients:read', 'keys:write'] }]),
    expect: { missing: ['keys:write'], what: adminGrant },
  },
  {
    name: 'POST /apply: a file changing a client that holds admin scopes the caller lacks',
    caller: AW,
    target: ALL,
    request: (id) => applying(id, [{ audience: adminUrl, scopes: ALL }]),
    expect: { missing: minus(ALL, AW), what: client },
  },
  {
    name: 'POST /apply: a file granting admin scopes the caller holds',
    caller: AW,
    target: null,
    request: (id) => applying(id, [{ audience: adminUrl, scopes: ['clients:read'] }]),
    expect: 200,
  },
  // Granting the admin audience: every scope the grant would hold.
  {
    name: 'clients:write grants a client every admin scope',
    caller: W,
    target: null,
    request: (id) => ['PUT', `/clients/${id}/grants/${adminId}`, { scopes: ALL }],
    expect: { missing: minus(ALL, W), what: adminGrant },
  },
  {
    name: 'clients:write grants a client one admin scope it lacks among some it holds',
    caller: W,
    target: null,
    request: (id) => ['PUT', `/clients/${id}/grants/${adminId}`, { scopes: ['clients:read', 'keys:write'] }],
    expect: { missing: ['keys:write'], what: adminGrant },
  },
  {
    name: 'a refused grant with an invalid body too is a 403, not a 400',
    caller: W,
    target: null,
    request: (id) => [
      'PUT',
      `/clients/${id}/grants/${adminId}`,
      { scopes: ['keys:write', 42], unknown_field: true },
    ],
    expect: { missing: ['keys:write'], what: adminGrant },
  },
  {
    name: 'clients:write grants a client admin scopes it holds itself',
    caller: W,
    target: null,
    request: (id) => ['PUT', `/clients/${id}/grants/${adminId}`, { scopes: ['clients:read'] }],
    expect: 201,
  },
  {
    name: 'clients:write grants the admin audience without scopes',
    caller: W,
    target: null,
    request: (id) => ['PUT', `/clients/${id}/grants/${adminId}`, {}],
    expect: 201,
  },
  {
    name: 'a scope the admin audience does not define is a 400 for a caller the rule allows',
    caller: W,
    target: null,
    request: (id) => ['PUT', `/clients/${id}/grants/${adminId}`, { scopes: ['orders:read'] }],
    expect: 400,
  },
  {
    name: 'an admin client with more scopes cannot lower its own to what the caller holds',
    caller: W,
    target: ALL,
    request: (id) => ['PUT', `/clients/${id}/grants/${adminId}`, { scopes: ['clients:read'] }],
    expect: { missing: minus(ALL, W), what: adminGrant },
  },
  {
    name: 'a caller lowers an admin client whose scopes it all holds',
    caller: WK,
    target: ['keys:read', 'keys:write'],
    request: (id) => ['PUT', `/clients/${id}/grants/${adminId}`, { scopes: ['keys:read'] }],
    expect: 200,
  },
  {
    name: 'nor raises it past what the caller holds',
    caller: WK,
    target: ['keys:read', 'keys:write'],
    request: (id) => ['PUT', `/clients/${id}/grants/${adminId}`, { scopes: ['keys:read', 'audit:read'] }],
    expect: { missing: ['audit:read'], what: adminGrant },
  },
  // Any change of a client that holds an admin grant: every scope it holds.
  {
    name: 'a secret added to a full admin client',
    caller: W,
    target: ALL,
    request: (id) => ['POST', `/clients/${id}/secrets`, {}],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: "a full admin client's secret revoked",
    caller: W,
    target: ALL,
    request: (id, secretId) => ['DELETE', `/clients/${id}/secrets/${secretId}`],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: 'a full admin client disabled',
    caller: W,
    target: ALL,
    request: (id) => ['PATCH', `/clients/${id}`, { enabled: false }],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: 'a full admin client renamed',
    caller: W,
    target: ALL,
    request: (id) => ['PATCH', `/clients/${id}`, { name: 'mine now' }],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: 'a full admin client switched to keys the caller has',
    caller: W,
    target: ALL,
    request: (id) => [
      'PATCH',
      `/clients/${id}`,
      { token_endpoint_auth_method: 'private_key_jwt', jwks: JWKS },
    ],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: 'a full admin client given a jwks_uri',
    caller: W,
    target: ALL,
    request: (id) => [
      'PATCH',
      `/clients/${id}`,
      { token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'https://keys.example.com/jwks' },
    ],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: 'a refused change with an invalid body too is a 403, not a 400',
    caller: W,
    target: ALL,
    request: (id) => ['PATCH', `/clients/${id}`, { enabled: 'no', unknown_field: 1 }],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: 'a full admin client deleted',
    caller: W,
    target: ALL,
    request: (id) => ['DELETE', `/clients/${id}`],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: 'a full admin client granted another audience',
    caller: W,
    target: ALL,
    request: (id) => ['PUT', `/clients/${id}/grants/${apiId}`, { scopes: ['orders:read'] }],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: "a full admin client's admin grant withdrawn",
    caller: W,
    target: ALL,
    request: (id) => ['DELETE', `/clients/${id}/grants/${adminId}`],
    expect: { missing: minus(ALL, W), what: adminGrant },
  },
  {
    name: "a full admin client's other grant withdrawn",
    caller: W,
    target: ALL,
    request: (id) => ['DELETE', `/clients/${id}/grants/${apiId}`],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: "a full admin client's tokens revoked",
    caller: W,
    target: ALL,
    request: (id) => ['POST', `/clients/${id}/revoke-tokens`],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: "a resource server's tokens revoked by a caller without tokens:introspect",
    caller: WK,
    target: ['tokens:introspect'],
    request: (id) => ['POST', `/clients/${id}/revoke-tokens`],
    expect: { missing: ['tokens:introspect'], what: client },
  },
  {
    name: 'an admin client holding one scope the caller lacks',
    caller: W,
    target: ['audit:read'],
    request: (id) => ['POST', `/clients/${id}/secrets`, {}],
    expect: { missing: ['audit:read'], what: client },
  },
  // Federated credentials: a change of the client they authenticate.
  {
    name: 'a federated credential added to a full admin client',
    caller: W,
    target: ALL,
    federated: true,
    request: (id) => [
      'POST',
      `/clients/${id}/federated-credentials`,
      { ...GITHUB_DEPLOY, name: 'mine', subject: 'repo:mallory/x:ref:refs/heads/main' },
    ],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: "a full admin client's federated credential pointed at another subject",
    caller: W,
    target: ALL,
    federated: true,
    request: (id, fid) => [
      'PATCH',
      `/clients/${id}/federated-credentials/${fid}`,
      { subject: 'repo:mallory/x:ref:refs/heads/main' },
    ],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: "a full admin client's federated credential removed",
    caller: W,
    target: ALL,
    federated: true,
    request: (id, fid) => ['DELETE', `/clients/${id}/federated-credentials/${fid}`],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: 'a refused federated credential with an invalid body too is a 403, not a 400',
    caller: W,
    target: ALL,
    federated: true,
    request: (id) => ['POST', `/clients/${id}/federated-credentials`, { issuer: 42, colour: 'blue' }],
    expect: { missing: minus(ALL, W), what: client },
  },
  {
    name: 'an admin client holding one scope the caller lacks given a federated credential',
    caller: W,
    target: ['keys:write'],
    federated: true,
    request: (id) => ['POST', `/clients/${id}/federated-credentials`, { ...GITHUB_DEPLOY, name: 'more' }],
    expect: { missing: ['keys:write'], what: client },
  },
  // What the caller holds, it may change.
  {
    name: 'a federated credential added to an admin client whose scopes the caller holds',
    caller: WK,
    target: ['keys:read'],
    federated: true,
    request: (id) => ['POST', `/clients/${id}/federated-credentials`, { ...GITHUB_DEPLOY, name: 'more' }],
    expect: 201,
  },
  {
    name: "an admin client's federated credential changed and removed by a caller holding its scopes",
    caller: WK,
    target: ['keys:write'],
    federated: true,
    request: (id, fid) => ['PATCH', `/clients/${id}/federated-credentials/${fid}`, { once: true }],
    expect: 200,
  },
  {
    name: 'a federated credential of a client without an admin grant: clients:write is enough',
    caller: W,
    target: null,
    federated: true,
    request: (id, fid) => ['DELETE', `/clients/${id}/federated-credentials/${fid}`],
    expect: 204,
  },
  {
    name: 'a secret added to an admin client whose scopes the caller holds',
    caller: WK,
    target: ['keys:read', 'keys:write'],
    request: (id) => ['POST', `/clients/${id}/secrets`, {}],
    expect: 201,
  },
  {
    name: 'an admin client whose scopes the caller holds disabled',
    caller: WK,
    target: ['keys:write'],
    request: (id) => ['PATCH', `/clients/${id}`, { enabled: false }],
    expect: 200,
  },
  {
    name: 'the tokens of an admin client whose scopes the caller holds revoked',
    caller: WK,
    target: ['keys:read'],
    request: (id) => ['POST', `/clients/${id}/revoke-tokens`],
    expect: 200,
  },
  {
    name: 'a client without an admin grant: clients:write revokes its tokens',
    caller: W,
    target: null,
    request: (id) => ['POST', `/clients/${id}/revoke-tokens`],
    expect: 200,
  },
  {
    name: 'an admin client whose scopes the caller holds deleted',
    caller: WK,
    target: ['keys:read'],
    request: (id) => ['DELETE', `/clients/${id}`],
    expect: 204,
  },
  {
    name: 'an admin grant without scopes needs none',
    caller: W,
    target: [],
    request: (id) => ['POST', `/clients/${id}/secrets`, {}],
    expect: 201,
  },
  {
    name: 'a client without an admin grant: clients:write is enough',
    caller: W,
    target: null,
    request: (id, secretId) => ['DELETE', `/clients/${id}/secrets/${secretId}`],
    expect: 204,
  },
  {
    name: 'a full admin caller changes a full admin client',
    caller: ALL,
    target: ALL,
    request: (id) => ['PATCH', `/clients/${id}`, { enabled: false }],
    expect: 200,
  },
];

/** Operators: a target operator of a role (null: a new one). */
interface OperatorCase {
  name: string;
  caller: readonly string[];
  target: 'admin' | 'viewer' | null;
  request: (id: string) => [string, string, unknown?];
  expect: number | { missing: readonly string[]; what: (email: string) => string };
}

const operator = (email: string) => `a change of operator ${email}`;
const newOperator = () => 'a new operator';

const OPERATOR_CASES: OperatorCase[] = [
  {
    name: 'operators:write adds an admin operator',
    caller: O,
    target: null,
    request: () => ['POST', '/operators', { email: `new-${++serial}@example.com`, role: 'admin' }],
    expect: { missing: minus(ALL, O), what: newOperator },
  },
  {
    name: 'operators:write adds a viewer without the read scopes',
    caller: O,
    target: null,
    request: () => ['POST', '/operators', { email: `new-${++serial}@example.com`, role: 'viewer' }],
    expect: { missing: minus(ROLE_SCOPES.viewer, O), what: newOperator },
  },
  {
    name: 'a refused operator with an invalid body too is a 403, not a 400',
    caller: O,
    target: null,
    request: () => ['POST', '/operators', { email: 5, role: 'admin' }],
    expect: { missing: minus(ALL, O), what: newOperator },
  },
  {
    name: 'operators:write with the viewer scopes adds a viewer',
    caller: OV,
    target: null,
    request: () => ['POST', '/operators', { email: `new-${++serial}@example.com`, role: 'viewer' }],
    expect: 201,
  },
  {
    name: 'a viewer made an admin',
    caller: OV,
    target: 'viewer',
    request: (id) => ['PATCH', `/operators/${id}`, { role: 'admin' }],
    expect: { missing: minus(ALL, OV), what: operator },
  },
  {
    name: 'an admin operator disabled',
    caller: OV,
    target: 'admin',
    request: (id) => ['PATCH', `/operators/${id}`, { enabled: false }],
    expect: { missing: minus(ALL, OV), what: operator },
  },
  {
    name: 'an admin operator reset',
    caller: OV,
    target: 'admin',
    request: (id) => ['POST', `/operators/${id}/reset`],
    expect: { missing: minus(ALL, OV), what: operator },
  },
  {
    name: 'an admin operator removed',
    caller: OV,
    target: 'admin',
    request: (id) => ['DELETE', `/operators/${id}`],
    expect: { missing: minus(ALL, OV), what: operator },
  },
  {
    name: 'a viewer disabled by a caller holding its scopes',
    caller: OV,
    target: 'viewer',
    request: (id) => ['PATCH', `/operators/${id}`, { enabled: false }],
    expect: 200,
  },
  {
    name: 'a viewer reset by a caller holding its scopes',
    caller: OV,
    target: 'viewer',
    request: (id) => ['POST', `/operators/${id}/reset`],
    expect: 200,
  },
  {
    name: 'a role that does not exist is a 400 for a caller the rule allows',
    caller: OV,
    target: 'viewer',
    request: (id) => ['PATCH', `/operators/${id}`, { role: 'root' }],
    expect: 400,
  },
  {
    name: 'an admin operator removed by an admin',
    caller: ALL,
    target: 'admin',
    request: (id) => ['DELETE', `/operators/${id}`],
    expect: 204,
  },
];

async function operatorTarget(role: 'admin' | 'viewer'): Promise<{ id: string; email: string }> {
  const email = `target-${++serial}@example.com`;
  const { operator } = await operators.addOperator(ctx, { email, role });
  return { id: operator.id, email };
}

describe('no caller gives what it does not hold: an admin client with a token', () => {
  it.each(CLIENT_CASES)('$name', async (c) => {
    const caller = await adminClient(t, ctx, c.caller);
    const { id, secretId } = await target(c.target, c.federated);
    const before = await snapshot();
    const [method, path, body] = c.request(id, secretId);
    const answer = await adminCall(t, { token: caller.token }, method, path, body);
    if (typeof c.expect === 'number') {
      expect(answer.status, JSON.stringify(answer.body)).toBe(c.expect);
      return;
    }
    expectRefused(answer, c.expect.what(id), c.expect.missing);
    expect(await snapshot()).toEqual(before);
  });

  it('a client grants itself every admin scope: refused, and its next token has no more than before', async () => {
    const caller = await adminClient(t, ctx, W);
    const answer = await adminCall(
      t,
      { token: caller.token },
      'PUT',
      `/clients/${caller.id}/grants/${adminId}`,
      {
        scopes: ALL,
      },
    );
    expectRefused(answer, adminGrant(), minus(ALL, W));
    const created = await adminCall(t, { token: caller.token }, 'POST', '/operators', {
      email: 'escalated@example.com',
      role: 'admin',
    });
    expect(created.status).toBe(403);
    expect(created.headers.get('www-authenticate')).toBe(
      'Bearer error="insufficient_scope", scope="operators:write"',
    );
  });

  it.each(OPERATOR_CASES)('$name', async (c) => {
    const caller = await adminClient(t, ctx, c.caller);
    const existing = c.target === null ? undefined : await operatorTarget(c.target);
    const before = await snapshot();
    const [method, path, body] = c.request(existing?.id ?? '');
    const answer = await adminCall(t, { token: caller.token }, method, path, body);
    if (typeof c.expect === 'number') {
      expect(answer.status, JSON.stringify(answer.body)).toBe(c.expect);
      return;
    }
    expectRefused(answer, c.expect.what(existing?.email ?? ''), c.expect.missing);
    expect(await snapshot()).toEqual(before);
  });
});

describe('no caller gives what it does not hold: a console session', () => {
  let admin: AdminCredentials;
  let viewer: AdminCredentials;

  beforeAll(async () => {
    admin = await operatorSession(t, ctx, 'boss@example.com', 'admin');
    viewer = await operatorSession(t, ctx, 'watcher@example.com', 'viewer');
  });

  /** An admin operator holds every scope: each case's change is allowed, with the answer of its success. */
  const ALLOWED: Record<string, number> = { POST: 201, PATCH: 200, PUT: 201, DELETE: 204 };

  it.each(CLIENT_CASES.filter((c) => typeof c.expect !== 'number'))('an admin operator: $name', async (c) => {
    const { id, secretId } = await target(c.target, c.federated);
    const [method, path, body] = c.request(id, secretId);
    const { unknown_field, colour } = (body ?? {}) as { unknown_field?: unknown; colour?: unknown };
    const valid = unknown_field === undefined && colour === undefined;
    const answer = await adminCall(t, admin, method, path, body);
    // A PUT creates a grant only for a target without an admin grant; every target already has the API's. A
    // revocation of a client's tokens creates nothing (200, MANAGEMENT.md).
    const status =
      method === 'PUT'
        ? c.target === null && path.includes(adminId)
          ? 201
          : 200
        : path.endsWith('/revoke-tokens') || path === '/apply'
          ? 200
          : ALLOWED[method];
    expect(answer.status, JSON.stringify(answer.body)).toBe(valid ? status : 400);
  });

  it.each(OPERATOR_CASES.filter((c) => typeof c.expect !== 'number'))(
    'an admin operator: $name',
    async (c) => {
      const existing = c.target === null ? undefined : await operatorTarget(c.target);
      const [method, path, body] = c.request(existing?.id ?? '');
      const answer = await adminCall(t, admin, method, path, body);
      const valid = typeof (body as { email?: unknown } | undefined)?.email !== 'number';
      const status = path.endsWith('/reset') ? 200 : ALLOWED[method];
      expect(answer.status, JSON.stringify(answer.body)).toBe(valid ? status : 400);
    },
  );

  const VIEWER_CASES = [
    ...CLIENT_CASES.map((c) => {
      const sent = c.request('target-none', 'sec_none');
      // An apply needs both write scopes, and says which the caller lacks (routes-apply.ts).
      return sent[1] === '/apply'
        ? {
            ...c,
            scope: 'audiences:write clients:write',
            detail:
              'an apply needs the scopes audiences:write clients:write; this caller lacks audiences:write clients:write',
            sent,
          }
        : { ...c, scope: 'clients:write', detail: 'this call needs the scope clients:write', sent };
    }),
    ...OPERATOR_CASES.map((c) => ({
      ...c,
      scope: 'operators:write',
      detail: 'this call needs the scope operators:write',
      sent: c.request('op_none'),
    })),
  ].filter((c) => typeof c.expect !== 'number');

  it.each(VIEWER_CASES)(
    'a viewer changes nothing: $name',
    async ({ scope, detail, sent: [method, path, body] }) => {
      const before = await snapshot();
      const answer = await adminCall(t, viewer, method, path, body);
      expect({ status: answer.status, body: answer.body }).toEqual({
        status: 403,
        body: {
          type: 'urn:tessera:problem:insufficient_scope',
          title: 'Forbidden',
          status: 403,
          detail,
        },
      });
      expect(answer.headers.get('www-authenticate')).toBe(
        `Bearer error="insufficient_scope", scope="${scope}"`,
      );
      expect(await snapshot()).toEqual(before);
    },
  );
});

describe('the rule in the management layer, for every face but the local CLI', () => {
  it('refuses in the operation itself, whichever face calls it', async () => {
    const lesser: ManagementContext = { ...ctx, actor: 'client:lesser', holds: new Set(W) };
    const { id } = await target(ALL);
    const refusal = {
      code: 'insufficient_scope',
      scopes: minus(ALL, W),
    };
    await expect(secrets.addSecret(lesser, id)).rejects.toMatchObject(refusal);
    await expect(clients.setEnabled(lesser, id, false)).rejects.toMatchObject(refusal);
    await expect(clients.rotateSecret(lesser, id)).rejects.toMatchObject(refusal);
    await expect(clients.deleteClient(lesser, id)).rejects.toMatchObject(refusal);
    await expect(grants.removeGrant(lesser, id, API)).rejects.toMatchObject(refusal);
    await expect(grants.addGrant(lesser, id, 'https://other.example.com')).rejects.toMatchObject(refusal);
    await expect(
      clients.createClient(lesser, { name: 'x', grants: [adminUrl], scopes: { [adminUrl]: ['keys:write'] } }),
    ).rejects.toMatchObject({ code: 'insufficient_scope', scopes: ['keys:write'] });
    await expect(
      operators.addOperator(lesser, { email: 'x@example.com', role: 'viewer' }),
    ).rejects.toMatchObject({
      code: 'insufficient_scope',
      scopes: minus(ROLE_SCOPES.viewer, W),
    });
    // The local CLI holds every scope: it is how the first admin is made.
    await clients.setEnabled(ctx, id, false);
  });
});

describe('the audit trail of the admin API', () => {
  it('sums refused calls per address and minute (admin.auth_failed, admin.forbidden), with no write per request', async () => {
    const own = await startTestServer();
    const ownCtx = managementOf(own);
    try {
      const caller = await adminClient(own, ownCtx, ['clients:read']);
      const changesBefore = await own.server.runtime.store.latestChange();
      // The caller's token.issued reaches the store through the spool within a second: wait for it, so that what
      // follows is compared with a trail that nothing else is still on its way to.
      const issued = await pollUntil(
        () => own.server.runtime.store.queryAuditEvents({ limit: 1000, types: ['token.issued'] }),
        (events) => events.some((e) => e.clientId === caller.id),
        5000,
      );
      expect(issued.value.filter((e) => e.clientId === caller.id)).toHaveLength(1);
      const written = await own.server.runtime.store.queryAuditEvents({ limit: 1000 });
      // Four bad tokens: none, not a JWT, a token for another audience, a forged signature.
      const bad: (AdminCredentials | undefined)[] = [
        undefined,
        { token: 'not-a-token' },
        { token: caller.token.slice(0, -4) + 'AAAA' },
        { token: `${caller.token.split('.').slice(0, 2).join('.')}.${'A'.repeat(86)}` },
      ];
      for (const as of bad) expect((await adminCall(own, as, 'GET', '/clients')).status).toBe(401);
      // Three calls missing a scope: two routes' own scopes, one refused by the rule.
      expect((await adminCall(own, caller, 'GET', '/keys')).status).toBe(403);
      expect((await adminCall(own, caller, 'POST', '/clients', { name: 'x' })).status).toBe(403);
      expect((await adminCall(own, caller, 'GET', '/operators')).status).toBe(403);
      // Nothing written while the minute lasts: no change, no event.
      expect(await own.server.runtime.store.latestChange()).toBe(changesBefore);
      expect(await own.server.runtime.store.queryAuditEvents({ limit: 1000 })).toEqual(written);
      // Closing records the minute's sums (as the minute's end does, within a second).
      await own.server.close();
      const store = openSqliteStore(sqlitePath(own.config));
      try {
        const events = await store.queryAuditEvents({
          limit: 10,
          types: ['admin.auth_failed', 'admin.forbidden'],
        });
        expect(events.map((e) => [e.type, e.count, e.source, e.clientId, e.actor]).sort()).toEqual([
          ['admin.auth_failed', 4, '127.0.0.1', null, null],
          ['admin.forbidden', 3, '127.0.0.1', caller.id, null],
        ]);
        expect(events.find((e) => e.type === 'admin.forbidden')!.reason).toBe(
          'GET /admin/v1/keys: this call needs the scope keys:read; ' +
            'POST /admin/v1/clients: this call needs the scope clients:write; ' +
            'GET /admin/v1/operators: this call needs the scope operators:read',
        );
      } finally {
        await store.close();
      }
    } finally {
      await own.close();
    }
  });

  it('names every actor by its kind: no client id passes for the server or an anonymous login', async () => {
    const since = new Date().toISOString();
    const tessera = await adminClient(t, ctx, W, 'tessera');
    const anonymous = await adminClient(t, ctx, W, 'anonymous');
    const { id } = await target(null);
    expect((await adminCall(t, tessera, 'PATCH', `/clients/${id}`, { name: 'by tessera' })).status).toBe(200);
    expect((await adminCall(t, anonymous, 'PATCH', `/clients/${id}`, { name: 'by anonymous' })).status).toBe(
      200,
    );
    const session = await operatorSession(t, ctx, 'namer@example.com', 'admin');
    expect((await adminCall(t, session, 'PATCH', `/clients/${id}`, { name: 'by an operator' })).status).toBe(
      200,
    );
    await clients.updateClient(ctx, id, { name: 'by the cli' });
    const trail = await adminCall(
      t,
      { token: (await adminClient(t, ctx, ['audit:read'])).token },
      'GET',
      `/audit-events?type=client.updated&client_id=${id}&since=${since}`,
    );
    expect(trail.body.items.map((e: { actor: string }) => e.actor).reverse()).toEqual([
      'client:tessera',
      'client:anonymous',
      'operator:namer@example.com',
      'cli:test',
    ]);
  });
});
