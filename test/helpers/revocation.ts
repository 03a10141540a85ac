/**
 * A real server for the revocation and introspection tests (test/http/revocation.test.ts,
 * test/http/introspection.test.ts): an audience, clients of it, a resource server whose only admin grant is
 * tokens:introspect, an admin client; the server's clock, which a test may hold at a moment; and the requests they
 * send, with the checks they share. setUpServer() registers the hooks that start and stop it.
 */
import { afterAll, beforeAll, expect } from 'vitest';
import { audiences, clients, type ManagementContext } from '../../src/management/index.js';
import { clockAt, testClock } from './clock.js';
import { managementOf } from './management.js';
import { issuedToken } from './provision.js';
import { basic, NO_BLOCKING, startTestServer, type TestServer } from './server.js';

export const API = 'https://api.example.com';
export const INACTIVE = '{"active":false}';
export const INVALID_CLIENT = { error: 'invalid_client', error_description: 'client authentication failed' };
export const CHALLENGE = 'Basic realm="tessera"';

export interface Caller {
  id: string;
  secret: string;
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers, checked member by member
  body: any;
}

export let t: TestServer;
export let ctx: ManagementContext;
/** The server's clock: the wall clock, or a moment a test holds it at. */
const wall = testClock();
let held: number | undefined;
export const now = (): number => held ?? wall.now();

export let app: Caller;
export let other: Caller;
export let bare: Caller;
export let rs: Caller;
export let ops: Caller;

export async function newClient(input: Parameters<typeof clients.createClient>[1]): Promise<Caller> {
  const { client: created, secret } = await clients.createClient(ctx, input);
  await t.sync();
  return { id: created.id, secret: secret! };
}

export async function post(
  path: string,
  params: Record<string, string>,
  headers: Record<string, string> = {},
) {
  const response = await fetch(t.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(params).toString(),
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    body: text === '' ? undefined : (JSON.parse(text) as unknown),
  } as Answer;
}

export const introspect = (token: string, as: Caller = rs) =>
  post('/oauth/introspect', { token }, { authorization: basic(as.id, as.secret) });
export const revoke = (as: Caller, token: string, extra: Record<string, string> = {}) =>
  post('/oauth/revoke', { token, ...extra }, { authorization: basic(as.id, as.secret) });

export const tokenOf = (c: Caller, audience = API): Promise<string> => issuedToken(t.url, c, audience);

export async function expectActive(token: string): Promise<void> {
  const answer = await introspect(token);
  expect(answer.status).toBe(200);
  expect(answer.body.active, answer.text).toBe(true);
}

export async function expectInactive(token: string): Promise<void> {
  const answer = await introspect(token);
  expect({ status: answer.status, text: answer.text }).toEqual({ status: 200, text: INACTIVE });
}

export function expectNoStore(headers: Headers): void {
  expect(headers.get('cache-control')).toBe('no-store');
  expect(headers.get('pragma')).toBe('no-cache');
}

/** Holds the server's clock at `at` (ms) while `run` runs. */
export async function at<T>(ms: number, run: () => Promise<T>): Promise<T> {
  held = ms;
  try {
    return await run();
  } finally {
    held = undefined;
  }
}

/** Starts the server and makes its clients before the file's tests; stops it after them. */
export function setUpServer(): void {
  beforeAll(async () => {
    // Refusals are many here, from one address: the failed-attempt limits have a test and a server of their own.
    t = await startTestServer(NO_BLOCKING, undefined, { clock: clockAt(now) });
    ctx = managementOf(t, 'cli:test', now);
    await audiences.addAudience(ctx, {
      url: API,
      scopes: [{ name: 'orders:read' }, { name: 'orders:write' }],
    });
    app = await newClient({ name: 'app', grants: [API], scopes: { [API]: ['orders:write', 'orders:read'] } });
    other = await newClient({ name: 'other', grants: [API], scopes: { [API]: ['orders:read'] } });
    bare = await newClient({ name: 'bare', grants: [API] });
    // A resource server: a client whose only admin grant is tokens:introspect (INTERFACE.md).
    rs = await newClient({ name: 'orders api', adminScopes: ['tokens:introspect'] });
    ops = await newClient({ name: 'ops', adminScopes: ['clients:read', 'clients:write'] });
  }, 60_000);

  afterAll(async () => {
    await t?.close();
  });
}
