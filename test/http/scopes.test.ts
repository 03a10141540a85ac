/**
 * Scopes (INTERFACE.md, "Scopes"): defined per audience, carried by grants, asked for in the token request,
 * and checked by resource servers. Real clients (openid-client, oauth4webapi) ask for tokens; Auth0's
 * express-oauth2-jwt-bearer checks them with requiredScopes. Every case on a real server.
 */
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { auth, requiredScopes } from 'express-oauth2-jwt-bearer';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audiences, clients, grants, ManagementError } from '../../src/management/index.js';
import type { ManagementContext } from '../../src/management/index.js';
import { ADMIN_SCOPE_NAMES } from '../helpers/expected.js';
import { managementOf } from '../helpers/management.js';
import { postToken, startTestServer, type TestServer } from '../helpers/server.js';

const API = 'https://orders.example.com';
const OTHER = 'https://other.example.com';

let t: TestServer;
let ctx: ManagementContext;
let scoped: { id: string; secret: string };
let bare: { id: string; secret: string };

beforeAll(async () => {
  t = await startTestServer();
  ctx = managementOf(t, 'test');
  await audiences.addAudience(ctx, {
    url: API,
    scopes: [
      { name: 'orders:write' },
      { name: 'orders:read', description: 'read orders' },
      { name: 'orders:delete' },
    ],
  });
  await audiences.addAudience(ctx, { url: OTHER, scopes: [{ name: 'other:read' }] });
  const a = await clients.createClient(ctx, {
    name: 'scoped',
    grants: [API, OTHER],
    scopes: { [API]: ['orders:write', 'orders:read', 'orders:read'] },
  });
  scoped = { id: a.client.id, secret: a.secret };
  const b = await clients.createClient(ctx, { name: 'bare', grants: [API] });
  bare = { id: b.client.id, secret: b.secret };
  await t.sync();
});
afterAll(async () => {
  await t?.close();
});

const token = (who: { id: string; secret: string }, extra: Record<string, string> = {}) =>
  postToken(t.url, {
    grant_type: 'client_credentials',
    client_id: who.id,
    client_secret: who.secret,
    audience: API,
    ...extra,
  });

describe('the token request', () => {
  it('without scope: every granted scope, sorted, in the answer and the claim', async () => {
    const r = await token(scoped);
    expect(r.status).toBe(200);
    expect(Object.keys(r.body)).toEqual(['access_token', 'token_type', 'expires_in', 'scope']);
    expect(r.body.scope).toBe('orders:read orders:write');
    expect(decodeJwt(r.body.access_token as string).scope).toBe('orders:read orders:write');
  });

  it('an empty scope is no scope; duplicates count once; the token carries exactly those asked', async () => {
    expect((await token(scoped, { scope: '' })).body.scope).toBe('orders:read orders:write');
    const narrowed = await token(scoped, { scope: 'orders:write orders:write' });
    expect(narrowed.body.scope).toBe('orders:write');
    expect(decodeJwt(narrowed.body.access_token as string).scope).toBe('orders:write');
  });

  it('a grant without scopes: no scope claim, no scope field; any scope asked is invalid_scope', async () => {
    const r = await token(bare);
    expect(Object.keys(r.body)).toEqual(['access_token', 'token_type', 'expires_in']);
    expect(decodeJwt(r.body.access_token as string)).not.toHaveProperty('scope');
    const refused = await token(bare, { scope: 'orders:read' });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({
      error: 'invalid_scope',
      error_description: 'scope orders:read is not granted to this client for this audience',
    });
  });

  it.each([
    ['orders:read orders:delete', 'scope orders:delete is not granted to this client for this audience'],
    ['other:read', 'scope other:read is not granted to this client for this audience'],
    [
      'orders:read  orders:write',
      'scope must be scope tokens separated by single spaces (RFC 6749 section 3.3)',
    ],
    ['orders"read', 'scope must be scope tokens separated by single spaces (RFC 6749 section 3.3)'],
  ])('scope=%j: 400 invalid_scope (%s)', async (scope, description) => {
    const r = await token(scoped, { scope });
    expect(r.status).toBe(400);
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(r.body).toEqual({ error: 'invalid_scope', error_description: description });
  });

  it('an unknown audience is still invalid_target, whatever the scope', async () => {
    const r = await token(scoped, { audience: 'https://nowhere.example.com', scope: 'orders:read' });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('invalid_target');
  });

  it('the metadata lists every audience scope, sorted, once', async () => {
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      const md = (await (await fetch(t.url + path)).json()) as { scopes_supported: string[] };
      expect(md.scopes_supported).toEqual(
        [...ADMIN_SCOPE_NAMES, 'orders:delete', 'orders:read', 'orders:write', 'other:read'].sort(),
      );
    }
  });
});

describe('real clients', () => {
  it('openid-client: with and without scope', async () => {
    const config = await client.discovery(new URL(t.url), scoped.id, scoped.secret, undefined, {
      execute: [client.allowInsecureRequests],
    });
    const all = await client.clientCredentialsGrant(config, { audience: API });
    expect(all.scope).toBe('orders:read orders:write');
    const one = await client.clientCredentialsGrant(config, { audience: API, scope: 'orders:read' });
    expect(one.scope).toBe('orders:read');
    const refused = await client
      .clientCredentialsGrant(config, { audience: API, scope: 'orders:delete' })
      .then(
        () => undefined,
        (e: unknown) => e as { error?: string },
      );
    expect(refused?.error).toBe('invalid_scope');
  });

  it('oauth4webapi: with and without scope', async () => {
    const issuer = new URL(t.url);
    const insecure = { [oauth.allowInsecureRequests]: true } as const;
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
    const c: oauth.Client = { client_id: scoped.id };
    const authn = oauth.ClientSecretBasic(scoped.secret);
    for (const [scope, expected] of [
      [undefined, 'orders:read orders:write'],
      ['orders:write', 'orders:write'],
    ] as const) {
      const params = new URLSearchParams({ audience: API, ...(scope ? { scope } : {}) });
      const response = await oauth.clientCredentialsGrantRequest(as, c, authn, params, insecure);
      const result = await oauth.processClientCredentialsResponse(as, c, response);
      expect(result.scope).toBe(expected);
    }
  });
});

describe('express-oauth2-jwt-bearer requiredScopes', () => {
  let api: HttpServer;
  let apiUrl: string;
  beforeAll(async () => {
    const app = express();
    app.get(
      '/orders',
      auth({ issuerBaseURL: t.url, audience: API }),
      requiredScopes('orders:read'),
      (_req: Request, res: Response) => {
        res.json({ ok: true });
      },
    );
    app.use(
      (
        err: Error & { status?: number; headers?: Record<string, string> },
        _q: Request,
        res: Response,
        _n: NextFunction,
      ) => {
        res
          .status(err.status ?? 500)
          .set(err.headers ?? {})
          .json({ message: err.message });
      },
    );
    api = createServer(app);
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => (api ? api.close(() => resolve()) : resolve()));
  });

  it('accepts a token that has the scope and refuses (403 insufficient_scope) one that does not', async () => {
    const call = async (accessToken: string) =>
      fetch(`${apiUrl}/orders`, { headers: { authorization: `Bearer ${accessToken}` } });
    const full = (await token(scoped)).body.access_token as string;
    expect((await call(full)).status).toBe(200);
    const narrow = (await token(scoped, { scope: 'orders:write' })).body.access_token as string;
    const refused = await call(narrow);
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
    const none = (await token(bare)).body.access_token as string;
    expect((await call(none)).status).toBe(403);
  });
});

describe('managing scopes', () => {
  it('scope names follow RFC 6749 §3.3, at most 128 characters, 200 per audience, each once', async () => {
    const refusal = async (scopes: { name: string }[]) =>
      audiences.addAudience(ctx, { url: 'https://bad.example.com', scopes }).then(
        () => undefined,
        (e: unknown) => e as ManagementError,
      );
    // A name's refusal names its place in the list; the list's own rules, the list.
    for (const [scopes, field, message] of [
      [
        [{ name: 'a b' }],
        'scopes/0/name',
        'scope "a b" is not a scope token (RFC 6749 §3.3: printable ASCII but space, " and \\)',
      ],
      [
        [{ name: 'ok' }, { name: '' }],
        'scopes/1/name',
        'scope "" is not a scope token (RFC 6749 §3.3: printable ASCII but space, " and \\)',
      ],
      [
        [{ name: 'x'.repeat(129) }],
        'scopes/0/name',
        `scope "${'x'.repeat(40)}"… is longer than 128 characters`,
      ],
      [[{ name: 'a' }, { name: 'a' }], 'scopes', 'scope a is listed twice'],
      [
        Array.from({ length: 201 }, (_, i) => ({ name: `s${i}` })),
        'scopes',
        'an audience has at most 200 scopes',
      ],
    ] as const) {
      const error = await refusal([...scopes]);
      expect(error).toBeInstanceOf(ManagementError);
      expect({ code: error?.code, field: error?.field, message: error?.message }).toEqual({
        code: 'invalid_field',
        field,
        message,
      });
    }
    expect(await ctx.store.findAudience('https://bad.example.com')).toBeUndefined();
  });

  it('a grant scope the audience does not define is refused, naming it', async () => {
    await expect(grants.setGrantScopes(ctx, bare.id, API, ['orders:read', 'orders:admin'])).rejects.toThrow(
      'audience https://orders.example.com defines no scope "orders:admin"',
    );
  });

  it('removing a scope from an audience removes it from every grant, at once for the token endpoint', async () => {
    await grants.setGrantScopes(ctx, bare.id, API, ['orders:delete', 'orders:read']);
    await audiences.removeScopes(ctx, API, ['orders:delete']);
    expect((await ctx.store.findClient(bare.id))?.grants).toEqual([
      { audience: API, scopes: ['orders:read'], claims: null, tokenExchange: false },
    ]);
    await t.sync();
    expect((await token(bare)).body.scope).toBe('orders:read');
    const refused = await token(bare, { scope: 'orders:delete' });
    expect(refused.body).toEqual({
      error: 'invalid_scope',
      error_description: 'scope orders:delete is not granted to this client for this audience',
    });
    const md = (await (await fetch(`${t.url}/.well-known/openid-configuration`)).json()) as {
      scopes_supported: string[];
    };
    expect(md.scopes_supported).not.toContain('orders:delete');
  });
});
