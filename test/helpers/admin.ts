import { expect } from 'vitest';
import { ADMIN_SCOPES, adminAudienceUrl, ensureAdminAudience } from '../../src/management/builtin.js';
import { clients, type ManagementContext } from '../../src/management/index.js';
import { postToken, type TestServer } from './server.js';

/**
 * An admin client with every admin scope (as `tessera client create --admin` makes it), and an access token
 * it got at the token endpoint, as a program calling the admin API would.
 */
export async function adminToken(t: TestServer, ctx: ManagementContext): Promise<string> {
  await ensureAdminAudience(ctx);
  const admin = adminAudienceUrl(t.config);
  const { client, secret } = await clients.createClient(ctx, {
    name: 'ops',
    grants: [admin],
    scopes: { [admin]: [...ADMIN_SCOPES] },
  });
  await t.sync();
  const answer = await postToken(t.url, {
    grant_type: 'client_credentials',
    client_id: client.id,
    client_secret: secret,
    audience: admin,
  });
  expect(answer.status).toBe(200);
  return answer.body.access_token as string;
}

/** An admin API answer: its status, the headers every answer's checks need, and the parsed body. */
export interface AdminAnswer {
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
): Promise<AdminAnswer> {
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
