/**
 * Token profiles (MANAGEMENT.md, "Moving in"; domain/token-profiles.ts): an audience's `token_profile` decides the
 * claims its tokens carry beyond RFC 9068's, so that resource servers written for Auth0 or Keycloak keep working
 * unchanged but for the issuer and the key set's URL. Checked as those resource servers check: Auth0's
 * express-oauth2-jwt-bearer with a `sub` check written for Auth0 (`<client_id>@clients`) and its permissions, and a
 * Keycloak-style check of `azp` and `preferred_username` with jose. And the faces: the admin API (and its refusal
 * of an unknown profile), the CLI, export and apply.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { claimCheck, auth, requiredScopes } from 'express-oauth2-jwt-bearer';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { updateAudience } from '../../src/management/audiences.js';
import { putGrant } from '../../src/management/grants.js';
import { createClient, updateClient } from '../../src/management/clients.js';
import { exportConfig, parseConfigFile, planApply } from '../../src/management/declarative/index.js';
import { managementOf } from '../helpers/management.js';
import { tessera, tesseraEnv, tesseraOk } from '../helpers/process.js';
import {
  basic,
  NO_BLOCKING,
  postToken,
  startTestServer,
  tempDir,
  type TestServer,
} from '../helpers/server.js';

const RFC = 'https://plain.example.com';
const AUTH0 = 'https://orders.example.com';
const KEYCLOAK = 'https://ledger.example.com';

let t: TestServer;
let rs: { url: string; close(): Promise<void> };

/** A resource server as an Auth0 user writes it: express-oauth2-jwt-bearer, a check of sub for a machine client. */
async function auth0ResourceServer(issuer: string): Promise<{ url: string; close(): Promise<void> }> {
  const app = express();
  app.get(
    '/orders',
    auth({ issuerBaseURL: issuer, audience: AUTH0, tokenSigningAlg: 'ES256' }),
    requiredScopes('orders:read'),
    claimCheck((claims) => typeof claims.sub === 'string' && claims.sub.endsWith('@clients')),
    claimCheck((claims) => claims.gty === 'client-credentials'),
    claimCheck((claims) => Array.isArray(claims.permissions) && claims.permissions.includes('orders:read')),
    (req: Request, res: Response) => {
      res.json({ sub: req.auth?.payload.sub, azp: req.auth?.payload.azp });
    },
  );
  app.use((err: Error & { status?: number }, _req: Request, res: Response, _next: NextFunction) => {
    res.status(err.status ?? 500).json({ error: err.message });
  });
  const server: HttpServer = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

beforeAll(async () => {
  t = await startTestServer(NO_BLOCKING);
  await t.addAudience(RFC);
  await t.addAudience(AUTH0, {
    scopes: [
      { name: 'orders:read', description: null },
      { name: 'orders:write', description: null },
    ],
    tokenProfile: 'auth0',
  });
  await t.addAudience(KEYCLOAK, { tokenProfile: 'keycloak' });
  rs = await auth0ResourceServer(t.url);
}, 60_000);

afterAll(async () => {
  await rs?.close();
  await t?.close();
});

async function tokenFor(clientId: string, secret: string, audience: string, scope?: string): Promise<string> {
  const answer = await postToken(t.url, {
    grant_type: 'client_credentials',
    client_id: clientId,
    client_secret: secret,
    audience,
    ...(scope === undefined ? {} : { scope }),
  });
  expect(answer.status).toBe(200);
  return answer.body.access_token as string;
}

/** The payload's member names as the token carries them, in order (a repeated name shows twice). */
const memberNames = (token: string): string[] => {
  const json = Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8');
  return [...json.matchAll(/"([^"]+)":/g)].map((m) => m[1]!).filter((n) => !n.includes(' '));
};

describe('the claims of each profile', () => {
  it('rfc9068 (the default): the claims of INTERFACE.md and nothing more', async () => {
    const c = await t.createClient([RFC]);
    const claims = decodeJwt(await tokenFor(c.id, c.secret, RFC));
    expect(Object.keys(claims).sort()).toEqual(['aud', 'client_id', 'exp', 'iat', 'iss', 'jti', 'sub']);
    expect(claims.sub).toBe(c.id);
  });

  it('auth0: an Auth0 resource server (express-oauth2-jwt-bearer) accepts it as it accepted Auth0’s own', async () => {
    const c = await t.createClient([AUTH0]);
    await putGrant(managementOf(t), c.id, (await t.server.runtime.store.findAudience(AUTH0))!, {
      scopes: ['orders:read', 'orders:write'],
    });
    await t.sync();
    const token = await tokenFor(c.id, c.secret, AUTH0);
    const { payload } = await jwtVerify(
      token,
      createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`)),
      {
        issuer: t.url,
        audience: AUTH0,
      },
    );
    expect(payload).toEqual({
      iss: t.url,
      sub: `${c.id}@clients`,
      aud: AUTH0,
      client_id: c.id,
      iat: payload.iat,
      exp: payload.iat! + 1800,
      jti: payload.jti,
      scope: 'orders:read orders:write',
      azp: c.id,
      gty: 'client-credentials',
      permissions: ['orders:read', 'orders:write'],
    });
    const response = await fetch(`${rs.url}/orders`, { headers: { authorization: `Bearer ${token}` } });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ sub: `${c.id}@clients`, azp: c.id });
    // Without the scope the Auth0 check refuses it, as it would have refused Auth0's.
    const narrow = await tokenFor(c.id, c.secret, AUTH0, 'orders:write');
    expect(decodeJwt(narrow).permissions).toEqual(['orders:write']);
    const refused = await fetch(`${rs.url}/orders`, { headers: { authorization: `Bearer ${narrow}` } });
    expect(refused.status).toBe(403);
  });

  it('keycloak: azp, typ Bearer, preferred_username service-account-<client_id> and clientId, as a Keycloak resource server checks them', async () => {
    const c = await t.createClient([KEYCLOAK]);
    const token = await tokenFor(c.id, c.secret, KEYCLOAK);
    const { payload } = await jwtVerify(
      token,
      createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`)),
      {
        issuer: t.url,
        audience: KEYCLOAK,
      },
    );
    // The checks of a resource server written for Keycloak's service-account tokens.
    expect(payload.azp).toBe(c.id);
    expect(payload.preferred_username).toBe(`service-account-${c.id}`);
    expect(payload).toEqual({
      iss: t.url,
      sub: c.id,
      aud: KEYCLOAK,
      client_id: c.id,
      iat: payload.iat,
      exp: payload.iat! + 1800,
      jti: payload.jti,
      azp: c.id,
      typ: 'Bearer',
      preferred_username: `service-account-${c.id}`,
      clientId: c.id,
    });
  });

  it('a custom claim named as a profile’s own is the client’s: the profile’s is left out, never twice in the token', async () => {
    const c = await t.createClient([AUTH0, KEYCLOAK]);
    await updateClient(managementOf(t), c.id, {
      claims: { permissions: ['legacy:all'], preferred_username: 'billing-bot' },
    });
    await t.sync();
    const auth0 = await tokenFor(c.id, c.secret, AUTH0);
    expect(decodeJwt(auth0).permissions).toEqual(['legacy:all']);
    expect(memberNames(auth0).filter((n) => n === 'permissions')).toHaveLength(1);
    const keycloak = await tokenFor(c.id, c.secret, KEYCLOAK);
    expect(decodeJwt(keycloak).preferred_username).toBe('billing-bot');
    expect(memberNames(keycloak).filter((n) => n === 'preferred_username')).toHaveLength(1);
  });

  it('a change of profile reaches the tokens at once', async () => {
    const c = await t.createClient([RFC]);
    await updateAudience(managementOf(t), RFC, { tokenProfile: 'keycloak' });
    await t.sync();
    expect(decodeJwt(await tokenFor(c.id, c.secret, RFC)).preferred_username).toBe(`service-account-${c.id}`);
    await updateAudience(managementOf(t), RFC, { tokenProfile: 'rfc9068' });
    await t.sync();
    expect(decodeJwt(await tokenFor(c.id, c.secret, RFC)).preferred_username).toBeUndefined();
    expect((await t.server.runtime.store.findAudience(RFC))!.tokenProfile).toBeNull();
  });
});

/** A form POST to the server, authenticated with HTTP Basic. */
async function postForm(path: string, params: Record<string, string>, as: { id: string; secret: string }) {
  const response = await fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(as.id, as.secret) },
    body: new URLSearchParams(params).toString(),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: (text === '' ? undefined : JSON.parse(text)) as Record<string, unknown>,
  };
}

describe('a profiled token in the rest of the server', () => {
  it('auth0: introspected as active (sub as it carries it), revoked for good, and exchanged for the same caller', async () => {
    const ctx = managementOf(t);
    const made = await createClient(ctx, { name: 'introspector', adminScopes: ['tokens:introspect'] });
    const rs = { id: made.client.id, secret: made.secret! };
    const caller = await t.createClient([AUTH0]);
    // A service, resource server of AUTH0, may exchange its callers' tokens for KEYCLOAK's.
    const service = await createClient(ctx, { name: 'orders service', grants: [KEYCLOAK] });
    const svc = { id: service.client.id, secret: service.secret! };
    await putGrant(ctx, svc.id, (await t.server.runtime.store.findAudience(KEYCLOAK))!, {
      tokenExchange: true,
    });
    await updateAudience(ctx, AUTH0, { resourceServerClientIds: [svc.id] });
    await t.sync();

    const token = await tokenFor(caller.id, caller.secret, AUTH0);
    const active = await postForm('/oauth/introspect', { token }, rs);
    expect(active.status).toBe(200);
    expect(active.body).toMatchObject({ active: true, sub: `${caller.id}@clients`, client_id: caller.id });

    const exchanged = await postForm(
      '/oauth/token',
      {
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        subject_token: token,
        subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        audience: KEYCLOAK,
      },
      svc,
    );
    expect(exchanged.status).toBe(200);
    const claims = decodeJwt(exchanged.body.access_token as string);
    // The caller stays the subject, by its client id; the keycloak profile names its service account, azp the actor.
    expect(claims).toMatchObject({
      sub: caller.id,
      client_id: svc.id,
      act: { sub: svc.id },
      azp: svc.id,
      preferred_username: `service-account-${caller.id}`,
      clientId: caller.id,
    });
    expect(
      (await postForm('/oauth/introspect', { token: exchanged.body.access_token as string }, rs)).body.active,
    ).toBe(true);

    const revoked = await postForm('/oauth/revoke', { token }, caller);
    expect(revoked.status).toBe(200);
    expect((await postForm('/oauth/introspect', { token }, rs)).body).toEqual({ active: false });
  });
});

describe('the faces', () => {
  it('the management rule refuses an unknown profile, at its field', async () => {
    await expect(updateAudience(managementOf(t), RFC, { tokenProfile: 'okta' })).rejects.toMatchObject({
      code: 'invalid_field',
      field: 'token_profile',
      message: 'token_profile must be one of rfc9068, auth0, keycloak',
    });
  });

  it('export writes it where it is not the default, and the exported file plans no change', async () => {
    const ctx = managementOf(t);
    const file = await exportConfig(ctx);
    const audiences = Object.fromEntries(file.audiences!.map((a) => [a.identifier, a.token_profile]));
    expect(audiences).toMatchObject({ [RFC]: undefined, [AUTH0]: 'auth0', [KEYCLOAK]: 'keycloak' });
    const plan = await planApply(ctx, parseConfigFile(JSON.stringify(file), 'tessera.json'));
    expect(plan.steps).toEqual([]);
    // A file that changes one: a step field by field; an unknown one: refused at its place.
    const changed = {
      ...file,
      audiences: file.audiences!.map((a) =>
        a.identifier === AUTH0 ? { ...a, token_profile: 'keycloak' } : a,
      ),
    };
    const replanned = await planApply(ctx, parseConfigFile(JSON.stringify(changed), 'tessera.json'));
    expect(replanned.steps).toEqual([
      {
        action: 'update',
        type: 'audience',
        identifier: AUTH0,
        changes: [{ field: 'token_profile', from: 'auth0', to: 'keycloak' }],
      },
    ]);
    const bad = { audiences: [{ identifier: 'https://new.example.com', token_profile: 'okta' }] };
    await expect(planApply(ctx, parseConfigFile(JSON.stringify(bad), 'tessera.json'))).rejects.toMatchObject({
      problems: [
        expect.objectContaining({
          pointer: '/audiences/0/token_profile',
        }),
      ],
    });
  });
});

describe('the CLI', () => {
  it('audience add and update --token-profile; an unknown one is a usage error', async () => {
    const env = tesseraEnv({ TESSERA_DATA_DIR: tempDir('tessera-profiles-cli-') });
    const added = await tesseraOk(env, 'audience', 'add', AUTH0, '--token-profile', 'auth0', '--json');
    expect(added.json.token_profile).toBe('auth0');
    const updated = await tesseraOk(env, 'audience', 'update', AUTH0, '--token-profile', 'keycloak');
    expect(updated.stdout).toBe(`Audience ${AUTH0}: resource servers none; token profile keycloak.\n`);
    const listed = await tesseraOk(env, 'audience', 'list', '--json');
    expect(listed.json.map((a: { token_profile: string }) => a.token_profile)).toEqual(['keycloak']);
    const refused = await tessera(env, 'audience', 'add', RFC, '--token-profile', 'okta');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      "error: option '--token-profile <profile>' argument 'okta' is invalid. Allowed choices are rfc9068, auth0, keycloak.",
    );
  });
});
