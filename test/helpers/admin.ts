/**
 * Admin API callers for tests: admin clients made as `tessera client create --admin --admin-scopes ...` makes
 * them, their tokens from /oauth/token, and calls to /admin/v1 with a token or a console session.
 */
import { expect } from 'vitest';
import { ADMIN_SCOPES, adminAudienceUrl, ensureAdminAudience } from '../../src/management/builtin.js';
import { clients, operators, type ManagementContext } from '../../src/management/index.js';
import { tokenParams } from './provision.js';
import { postToken, type TestServer } from './server.js';

export interface AdminAnswer {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON answers, checked field by field
}

/** How a test calls the admin API: with a bearer token, or as a console page with its session. */
export type AdminCredentials =
  { token: string } | { cookie: string; csrf: string; origin: string; actor?: string };

export interface AdminClient {
  id: string;
  secret: string;
  token: string;
}

/** Gets a token of the admin audience for a client; it must carry exactly `scopes`. */
export async function adminTokenOf(
  t: TestServer,
  id: string,
  secret: string,
  scopes: readonly string[],
): Promise<string> {
  const answer = await postToken(t.url, tokenParams(id, secret, adminAudienceUrl(t.config)));
  expect(answer.status).toBe(200);
  expect(answer.body.scope).toBe(scopes.length === 0 ? undefined : [...scopes].sort().join(' '));
  return answer.body.access_token as string;
}

/** Creates a client granted the admin audience with these scopes (by `ctx`, the CLI's) and gets its token. */
export async function adminClient(
  t: TestServer,
  ctx: ManagementContext,
  scopes: readonly string[],
  id?: string,
): Promise<AdminClient> {
  await ensureAdminAudience(ctx);
  const url = adminAudienceUrl(t.config);
  const { client, secret } = await clients.createClient(ctx, {
    name: 'admin caller',
    ...(id === undefined ? {} : { id }),
    grants: [url],
    scopes: { [url]: [...scopes] },
  });
  await t.sync();
  return { id: client.id, secret, token: await adminTokenOf(t, client.id, secret, scopes) };
}

/** The server's own address (an https issuer names another). */
const baseOf = (t: TestServer): string => `http://127.0.0.1:${t.config.port}`;

/** One admin API call (`path` under /admin/v1) as `as` makes it. */
export async function adminCall(
  t: TestServer,
  as: AdminCredentials | undefined,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<AdminAnswer> {
  const sent: Record<string, string> = { ...headers };
  if (as && 'token' in as) sent.authorization = `Bearer ${as.token}`;
  if (as && 'cookie' in as) {
    sent.cookie = as.cookie;
    sent.origin = as.origin;
    sent['x-csrf-token'] = as.csrf;
  }
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  if (payload !== undefined) sent['content-type'] ??= 'application/json';
  const response = await fetch(`${baseOf(t)}/admin/v1${path}`, { method, headers: sent, body: payload });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: text === '' ? undefined : (JSON.parse(text) as unknown),
  };
}

/**
 * Adds an operator (as `tessera operator add` does) and sets their password with the token of the enrollment
 * link, which is in its fragment (as the enrollment page does).
 */
export async function enrollOperator(
  ctx: ManagementContext,
  email: string,
  role: 'admin' | 'viewer',
  password: string,
): Promise<void> {
  const { url } = await operators.addOperator(ctx, { email, role });
  await operators.enroll(ctx, new URL(url).hash.slice('#token='.length), password);
}

/** Adds an operator with a password (as `tessera operator add` and the enrollment page do) and logs them in. */
export async function operatorSession(
  t: TestServer,
  ctx: ManagementContext,
  email: string,
  role: 'admin' | 'viewer',
  password = 'a long enough pass phrase',
): Promise<{ cookie: string; csrf: string; origin: string }> {
  await enrollOperator(ctx, email, role, password);
  const origin = new URL(t.config.issuer).origin;
  const response = await fetch(`${baseOf(t)}/console/api/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin },
    body: JSON.stringify({ email, password }),
  });
  expect(response.status).toBe(200);
  const body = (await response.json()) as { csrf_token: string };
  const cookie = response.headers.getSetCookie()[0]!.split(';')[0]!;
  return { cookie, csrf: body.csrf_token, origin };
}

/**
 * An admin client with every admin scope (as `tessera client create --admin` makes it), and an access token
 * it got at the token endpoint, as a program calling the admin API would.
 */
export async function adminToken(t: TestServer, ctx: ManagementContext): Promise<string> {
  return (await adminClient(t, ctx, ADMIN_SCOPES)).token;
}

/** An answer of `send`: its status, the headers every answer's checks need, and the parsed body. */
export interface SentAnswer {
  status: number;
  type: string | null;
  cacheControl: string | null;
  body: unknown;
}

/** Sends `body` (text, as it is) to a path of the server; JSON unless another content type is given. */
export async function send(
  t: TestServer,
  method: string,
  path: string,
  body: string | undefined,
  headers: Record<string, string> = {},
): Promise<SentAnswer> {
  const response = await fetch(`${t.url}${path}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await response.text();
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    cacheControl: response.headers.get('cache-control'),
    body: text === '' ? undefined : JSON.parse(text),
  };
}
