/**
 * Holes between client credentials (INTERFACE.md): two authentication methods in one request are a 400 decided
 * before any credential is parsed; an access token (typ at+jwt) is never a client credential, whoever signed it
 * and whatever trusts its issuer; a federated credential never trusts Tessera's own issuer, in any spelling; and
 * a DPoP-bound token never becomes a bearer token through token exchange. Exact statuses, bodies and challenges,
 * on a real server on a real socket.
 */
import {
  calculateJwkThumbprint,
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  jwtVerify,
  SignJWT,
  type JWTPayload,
} from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  JWT_BEARER,
  newFederatedCredentialId,
  type FederatedCredential,
} from '../../src/domain/client-auth/index.js';
import type { PublicJwks } from '../../src/domain/client-auth/index.js';
import { audiences, clients, type ManagementContext } from '../../src/management/index.js';
import { adminCall, adminToken } from '../helpers/admin.js';
import { clientAssertion, signer, writeKeyClient, type Signer } from '../helpers/key-client.js';
import { managementOf } from '../helpers/management.js';
import { ACCESS_TOKEN, exchangeParams } from '../helpers/provision.js';
import {
  basic,
  latestAuditEvent,
  NO_BLOCKING,
  postToken,
  startTestServer,
  type TestServer,
} from '../helpers/server.js';

const API = 'https://api.example.com';
const FRONT = 'https://front.example.com';
const MIDDLE = 'https://middle.example.com';
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

const REFUSED = { error: 'invalid_client', error_description: 'client authentication failed' };
const TWO_METHODS = {
  error: 'invalid_request',
  error_description:
    'use one client authentication method: HTTP Basic, client_secret in the body, or client_assertion',
};
const TWO_SECRET_METHODS = {
  error: 'invalid_request',
  error_description:
    'use one client authentication method: HTTP Basic or client_secret in the body, not both',
};
const OWN_ISSUER =
  "issuer must not be this server's own issuer: its tokens are exchanged for others by token exchange (RFC 8693), never taken as a client credential";
const BOUND_SUBJECT =
  'the subject_token is bound to a DPoP key: a DPoP proof of the acting client is required';

let t: TestServer;
let ctx: ManagementContext;

interface Made {
  id: string;
  secret: string;
}

async function made(input: Parameters<typeof clients.createClient>[1]): Promise<Made> {
  const { client, secret } = await clients.createClient(ctx, input);
  return { id: client.id, secret: secret ?? '' };
}

beforeAll(async () => {
  t = await startTestServer(NO_BLOCKING);
  ctx = managementOf(t);
  await audiences.addAudience(ctx, { url: API });
  // FRONT's tokens live an hour, so that a token exchanged from one (1800 s) is never cut short by its exp.
  await audiences.addAudience(ctx, { url: FRONT, tokenTtl: 3600 });
  await audiences.addAudience(ctx, { url: MIDDLE });
  await t.sync();
});
afterAll(async () => {
  await t?.close();
});

/** The answer as a test compares it: status, body, and the headers that matter here. */
async function token(
  params: Record<string, string>,
  init: { headers?: Record<string, string>; json?: boolean } = {},
) {
  const r = await postToken(t.url, params, init);
  return {
    status: r.status,
    body: r.body,
    headers: {
      'cache-control': r.headers.get('cache-control'),
      pragma: r.headers.get('pragma'),
      'www-authenticate': r.headers.get('www-authenticate'),
    },
  };
}

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };
const answer400 = (body: object) => ({
  status: 400,
  body,
  headers: { ...NO_STORE, 'www-authenticate': null },
});
const answer401 = {
  status: 401,
  body: REFUSED,
  headers: { ...NO_STORE, 'www-authenticate': 'Basic realm="tessera"' },
};

/** The reason the audit trail gives for the latest token event of `id`. */
async function latestEvent(id: string) {
  const event = await latestAuditEvent(t, id);
  return { type: event?.type, reason: event?.reason };
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** A private_key_jwt client with these keys inline, granted API. */
async function keyClient(jwks: PublicJwks): Promise<string> {
  const id = await writeKeyClient(t.server.runtime.store, { name: 'key client', audiences: [API], jwks });
  await t.sync();
  return id;
}

/** An RFC 7523 assertion by `key` for `id`, with `header` over the defaults. */
const assertion = (key: Signer, id: string, header: Record<string, unknown> = {}, claims: JWTPayload = {}) =>
  clientAssertion(key, id, `${t.url}/oauth/token`, claims, header);

describe('two client authentication methods in one request: 400 invalid_request, before any is parsed', () => {
  let secretClient: Made;
  beforeAll(async () => {
    secretClient = await made({ name: 'secret client', grants: [API] });
    await t.sync();
  });

  const MALFORMED = ['not.a.jwt', 'garbage', 'a.b.c.d.e', '..', '\u00e9t\u00e9'];

  it('client_secret_post beside a malformed client_assertion (form and JSON): 400, not 401', async () => {
    for (const jwt of MALFORMED)
      for (const json of [false, true]) {
        const r = await token(
          {
            grant_type: 'client_credentials',
            client_id: secretClient.id,
            client_secret: secretClient.secret,
            client_assertion_type: JWT_BEARER,
            client_assertion: jwt,
            audience: API,
          },
          { json },
        );
        expect(r, `${jwt} json=${json}`).toEqual(answer400(TWO_METHODS));
      }
  });

  it('client_secret_basic beside a malformed client_assertion: 400, not 401', async () => {
    for (const jwt of MALFORMED) {
      const r = await token(
        {
          grant_type: 'client_credentials',
          client_assertion_type: JWT_BEARER,
          client_assertion: jwt,
          audience: API,
        },
        { headers: { authorization: basic(secretClient.id, secretClient.secret) } },
      );
      expect(r, jwt).toEqual(answer400(TWO_METHODS));
    }
  });

  it('a secret beside client_assertion_type alone, or client_assertion alone (no type): 400', async () => {
    const post = { client_id: secretClient.id, client_secret: secretClient.secret };
    const basicHeader = { headers: { authorization: basic(secretClient.id, secretClient.secret) } };
    const cases: [Record<string, string>, { headers?: Record<string, string> }][] = [
      [{ ...post, client_assertion_type: JWT_BEARER }, {}],
      [{ ...post, client_assertion: 'not.a.jwt' }, {}],
      [{ client_assertion_type: JWT_BEARER }, basicHeader],
      [{ client_assertion: 'not.a.jwt' }, basicHeader],
      // A wrong assertion type beside a secret is two methods too, not a complaint about the type.
      [{ ...post, client_assertion_type: 'urn:x', client_assertion: 'not.a.jwt' }, {}],
    ];
    for (const [extra, init] of cases) {
      const r = await token({ grant_type: 'client_credentials', audience: API, ...extra }, init);
      expect(r, JSON.stringify(extra)).toEqual(answer400(TWO_METHODS));
    }
  });

  it('a malformed Basic header beside a malformed client_assertion: 400, not the 401 of either', async () => {
    for (const authorization of [
      'Basic !!!',
      'Basic',
      'Bearer x',
      `Basic ${Buffer.from('no-colon').toString('base64')}`,
    ]) {
      const r = await token(
        {
          grant_type: 'client_credentials',
          client_assertion_type: JWT_BEARER,
          client_assertion: 'not.a.jwt',
          audience: API,
        },
        { headers: { authorization } },
      );
      expect(r, authorization).toEqual(answer400(TWO_METHODS));
    }
  });

  it('a well-formed, valid assertion beside a secret is two methods as well', async () => {
    const key = await signer('ES256', 'both');
    const id = await keyClient({ keys: [key.jwk] });
    const r = await token({
      grant_type: 'client_credentials',
      client_id: id,
      client_secret: 'x'.repeat(43),
      client_assertion_type: JWT_BEARER,
      client_assertion: await assertion(key, id),
      audience: API,
    });
    expect(r).toEqual(answer400(TWO_METHODS));
  });

  it('client_secret_basic and client_secret_post together: 400 invalid_request (even with the right secret)', async () => {
    for (const secret of [secretClient.secret, 'wrong']) {
      const r = await token(
        {
          grant_type: 'client_credentials',
          client_id: secretClient.id,
          client_secret: secret,
          audience: API,
        },
        { headers: { authorization: basic(secretClient.id, secretClient.secret) } },
      );
      expect(r, secret).toEqual(answer400(TWO_SECRET_METHODS));
      const json = await token(
        {
          grant_type: 'client_credentials',
          client_id: secretClient.id,
          client_secret: secret,
          audience: API,
        },
        { json: true, headers: { authorization: basic(secretClient.id, secretClient.secret) } },
      );
      expect(json, `${secret} (JSON)`).toEqual(answer400(TWO_SECRET_METHODS));
    }
    // A malformed Basic header beside client_secret is two methods, not a 401 for the header.
    const malformed = await token(
      {
        grant_type: 'client_credentials',
        client_id: secretClient.id,
        client_secret: secretClient.secret,
        audience: API,
      },
      { headers: { authorization: 'Basic !!!' } },
    );
    expect(malformed).toEqual(answer400(TWO_SECRET_METHODS));
    // Each alone still works.
    expect(
      (
        await token(
          { grant_type: 'client_credentials', audience: API },
          { headers: { authorization: basic(secretClient.id, secretClient.secret) } },
        )
      ).status,
    ).toBe(200);
    expect(
      (
        await token({
          grant_type: 'client_credentials',
          client_id: secretClient.id,
          client_secret: secretClient.secret,
          audience: API,
        })
      ).status,
    ).toBe(200);
  });
});

describe('private_key_jwt: an access token is never a client credential', () => {
  it('an assertion with typ at+jwt, signed by the client’s registered key: 401 invalid_client', async () => {
    const key = await signer('ES256', 'registered');
    const id = await keyClient({ keys: [key.jwk] });
    const withAssertion = async (jwt: string, extra: Record<string, string> = {}) =>
      token({
        grant_type: 'client_credentials',
        client_assertion_type: JWT_BEARER,
        client_assertion: jwt,
        audience: API,
        ...extra,
      });
    // The same key and claims with another typ (or none) get a token: only the typ is refused.
    for (const header of [{}, { typ: 'JWT' }, { typ: 'client-authentication+jwt' }]) {
      const ok = await withAssertion(await assertion(key, id, header));
      expect(ok.status, JSON.stringify(header)).toBe(200);
      expect(decodeJwt(ok.body.access_token as string)).toMatchObject({ sub: id, client_id: id });
    }
    for (const typ of ['at+jwt', 'application/at+jwt', 'AT+JWT', 'Application/At+JWT']) {
      const jwt = await assertion(key, id, { typ });
      expect(decodeProtectedHeader(jwt).typ).toBe(typ);
      expect(await withAssertion(jwt), typ).toEqual(answer401);
      expect(
        await withAssertion(await assertion(key, id, { typ }), { client_id: id }),
        `${typ} + client_id`,
      ).toEqual(answer401);
    }
  });
});

describe('workload identity federation: never Tessera’s own issuer, never its access tokens', () => {
  let admin: string;
  let fedClient: string;
  const github = {
    name: 'deploy',
    issuer: 'https://token.actions.githubusercontent.com',
    subject: 'repo:acme/billing:ref:refs/heads/main',
  };
  const invalidIssuer = (pointer: string) => ({
    type: 'urn:tessera:problem:invalid_field',
    title: 'Bad Request',
    status: 400,
    detail: OWN_ISSUER,
    errors: [{ pointer, detail: OWN_ISSUER }],
  });
  const ownIssuerSpellings = () => {
    const own = new URL(t.config.issuer);
    const upperHost = `${own.protocol}//${own.hostname.toUpperCase()}:${own.port}`;
    return [
      t.config.issuer,
      `${t.config.issuer}/`,
      upperHost,
      `${upperHost}/`,
      `${own.protocol.toUpperCase()}//${own.host}`,
    ];
  };

  beforeAll(async () => {
    admin = await adminToken(t, ctx);
    fedClient = (
      await made({ name: 'federated', id: 'fed-own-issuer', authMethod: 'private_key_jwt', grants: [API] })
    ).id;
    await t.sync();
  });

  it('POST …/federated-credentials with Tessera’s issuer, its trailing slash or upper-case host: 400 at /issuer', async () => {
    expect(t.config.issuer).toMatch(/^http:\/\/[a-z0-9.]+:\d+$/);
    for (const issuer of ownIssuerSpellings()) {
      const r = await adminCall(t, { token: admin }, 'POST', `/clients/${fedClient}/federated-credentials`, {
        ...github,
        issuer,
      });
      expect({ status: r.status, type: r.headers.get('content-type'), body: r.body }, issuer).toEqual({
        status: 400,
        type: 'application/problem+json; charset=utf-8',
        body: invalidIssuer('/issuer'),
      });
    }
    // Nothing was added (the list's paging is tested in short-lists.test.ts).
    const list = await adminCall(t, { token: admin }, 'GET', `/clients/${fedClient}/federated-credentials`);
    expect({ status: list.status, items: list.body.items }).toEqual({ status: 200, items: [] });
  });

  it('PATCH to Tessera’s issuer and POST /clients with it: 400 with the pointer, nothing changes', async () => {
    const added = await adminCall(
      t,
      { token: admin },
      'POST',
      `/clients/${fedClient}/federated-credentials`,
      github,
    );
    expect(added.status).toBe(201);
    const fid = added.body.id as string;
    for (const issuer of ownIssuerSpellings()) {
      const r = await adminCall(
        t,
        { token: admin },
        'PATCH',
        `/clients/${fedClient}/federated-credentials/${fid}`,
        {
          issuer,
        },
      );
      expect({ status: r.status, body: r.body }, issuer).toEqual({
        status: 400,
        body: invalidIssuer('/issuer'),
      });
    }
    const read = await adminCall(
      t,
      { token: admin },
      'GET',
      `/clients/${fedClient}/federated-credentials/${fid}`,
    );
    expect(read.body).toEqual(added.body);

    const created = await adminCall(t, { token: admin }, 'POST', '/clients', {
      name: 'own issuer',
      client_id: 'fed-own-issuer-2',
      token_endpoint_auth_method: 'private_key_jwt',
      federated_credentials: [{ ...github, issuer: `${t.config.issuer}/` }],
    });
    expect({ status: created.status, body: created.body }).toEqual({
      status: 400,
      body: invalidIssuer('/federated_credentials/0/issuer'),
    });
    expect((await adminCall(t, { token: admin }, 'GET', '/clients/fed-own-issuer-2')).status).toBe(404);
  });

  it('a Tessera access token as client_assertion of a federated credential: 401 invalid_client', async () => {
    // A Tessera token of some client, for API.
    const holder = await made({ name: 'holder', grants: [API] });
    await t.sync();
    const issued = await token({
      grant_type: 'client_credentials',
      client_id: holder.id,
      client_secret: holder.secret,
      audience: API,
    });
    expect(issued.status).toBe(200);
    const accessToken = issued.body.access_token as string;
    expect(accessToken).toMatch(JWT);
    expect(decodeProtectedHeader(accessToken).typ).toBe('at+jwt');
    const claims = decodeJwt(accessToken);

    // A credential that would take that very token: written straight to the store, as no face may write it
    // (Tessera's issuer, Tessera's keys inline, the token's sub and aud): the token path refuses it anyway.
    const jwks = (await (await fetch(`${t.url}/.well-known/jwks.json`)).json()) as PublicJwks;
    const at = new Date().toISOString();
    const trusting: FederatedCredential = {
      id: newFederatedCredentialId(),
      name: 'tessera itself',
      issuer: t.config.issuer,
      jwks,
      jwksUri: null,
      subject: claims.sub!,
      audience: API,
      claims: {},
      maxLifetime: 86_400,
      once: false,
      createdAt: at,
      updatedAt: at,
    };
    const id = await writeKeyClient(t.server.runtime.store, {
      name: 'trusts tessera',
      audiences: [API],
      federatedCredentials: [trusting],
    });
    await t.sync();
    const presented = (clientId: string, jwt = accessToken) =>
      token({
        grant_type: 'client_credentials',
        client_id: clientId,
        client_assertion_type: JWT_BEARER,
        client_assertion: jwt,
        audience: API,
      });
    expect(await presented(id)).toEqual(answer401);
    // And of a client whose credential trusts another issuer (the one any face can make).
    expect(await presented(fedClient)).toEqual(answer401);
    // Nor does the token authenticate its own client as an assertion.
    expect(await presented(holder.id)).toEqual(answer401);
    expect(await latestEvent(id)).toEqual({
      type: 'token.refused',
      reason: 'invalid_client: client_assertion is an access token (typ at+jwt), not a client credential',
    });
  });
});

describe('token exchange: a DPoP-bound subject token never becomes a bearer token', () => {
  let bound: Made; // dpop_bound_access_tokens: true
  let voluntary: Made; // sends a proof of its own accord
  let actor: Made; // resource server of FRONT, may exchange into MIDDLE
  let subjectKey: Signer;
  let actorKey: Signer;
  let jtis = 0;

  const proof = (key: Signer) =>
    new SignJWT({
      htm: 'POST',
      htu: `${t.url}/oauth/token`,
      iat: nowSeconds(),
      jti: `holes-${++jtis}-${Date.now()}`,
    })
      .setProtectedHeader({ alg: key.alg, typ: 'dpop+jwt', jwk: key.jwk })
      .sign(key.privateKey);

  beforeAll(async () => {
    subjectKey = await signer('ES256');
    actorKey = await signer('ES256');
    bound = await made({ name: 'bound caller', grants: [FRONT], dpopBoundAccessTokens: true });
    voluntary = await made({ name: 'voluntary caller', grants: [FRONT] });
    actor = await made({ name: 'actor', grants: [MIDDLE], grantTokenExchange: [MIDDLE] });
    await audiences.updateAudience(ctx, FRONT, { resourceServerClientIds: [actor.id] });
    await t.sync();
  });

  async function boundSubject(who: Made): Promise<string> {
    const r = await token(
      { grant_type: 'client_credentials', client_id: who.id, client_secret: who.secret, audience: FRONT },
      { headers: { dpop: await proof(subjectKey) } },
    );
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.token_type).toBe('DPoP');
    const subject = r.body.access_token as string;
    expect(decodeJwt(subject).cnf).toEqual({ jkt: await calculateJwkThumbprint(subjectKey.jwk, 'sha256') });
    return subject;
  }

  const exchange = (subject: string, headers: Record<string, string> = {}) =>
    token(exchangeParams(actor, subject, MIDDLE), { headers });

  it('the bound client itself gets no token without a proof (the subject is bound for real)', async () => {
    const r = await token({
      grant_type: 'client_credentials',
      client_id: bound.id,
      client_secret: bound.secret,
      audience: FRONT,
    });
    expect(r).toEqual(
      answer400({
        error: 'invalid_dpop_proof',
        error_description: 'a DPoP proof is required for this client (dpop_bound_access_tokens)',
      }),
    );
  });

  for (const [name, who] of [
    ['a dpop_bound client', () => bound],
    ['a client that sent a proof of its own accord', () => voluntary],
  ] as const)
    it(`a subject token of ${name}: 400 invalid_dpop_proof without the actor’s proof; 200, bound to the actor’s key, with it`, async () => {
      const subject = await boundSubject(who());
      expect(await exchange(subject)).toEqual(
        answer400({ error: 'invalid_dpop_proof', error_description: BOUND_SUBJECT }),
      );

      const r = await exchange(subject, { dpop: await proof(actorKey) });
      expect(r).toEqual({
        status: 200,
        body: {
          access_token: expect.stringMatching(JWT),
          issued_token_type: ACCESS_TOKEN,
          token_type: 'DPoP',
          expires_in: 1800,
        },
        headers: { ...NO_STORE, 'www-authenticate': null },
      });
      const keys = createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`));
      const { payload } = await jwtVerify(r.body.access_token as string, keys, {
        issuer: t.config.issuer,
        audience: MIDDLE,
        typ: 'at+jwt',
      });
      expect(payload).toMatchObject({ sub: who().id, client_id: actor.id, act: { sub: actor.id } });
      // Bound to the acting client's key, not the subject's.
      expect(payload.cnf).toEqual({ jkt: await calculateJwkThumbprint(actorKey.jwk, 'sha256') });
    });

  it('an unbound subject token still exchanges without a proof, as a bearer token', async () => {
    const plain = await token({
      grant_type: 'client_credentials',
      client_id: voluntary.id,
      client_secret: voluntary.secret,
      audience: FRONT,
    });
    expect(plain.body.token_type).toBe('Bearer');
    const r = await exchange(plain.body.access_token as string);
    expect({ status: r.status, type: r.body.token_type }).toEqual({ status: 200, type: 'Bearer' });
    expect(decodeJwt(r.body.access_token as string).cnf).toBeUndefined();
  });
});
