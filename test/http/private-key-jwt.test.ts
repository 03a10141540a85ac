/**
 * private_key_jwt (INTERFACE.md, "Client authentication"; RFC 7523 §2.2): real clients (openid-client,
 * oauth4webapi) unchanged, with an inline jwks and with a jwks_uri served by the test; and every rule with its
 * exact answer and its reason in the audit trail: algorithms, iss/sub, aud, exp horizon, expiry and nbf with
 * the 60 s skew, jti replay, unknown kid with one refetch a minute, methods a client is not registered for,
 * and jwks_uri fetching (private addresses, a host that hangs, an answer of 10 MB).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  decodeJwt,
  exportJWK,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWT_BEARER } from '../../src/domain/assertion.js';
import { generateClientId } from '../../src/domain/secrets.js';
import type { PublicJwks } from '../../src/domain/client-keys.js';
import { basic, postToken, startTestServer, type TestServer } from '../helpers/server.js';

const API = 'https://api.example.com';
const REFUSED = { error: 'invalid_client', error_description: 'client authentication failed' };

interface Signer {
  privateKey: CryptoKey;
  jwk: JWK;
  alg: string;
}

async function signer(alg: string, kid?: string): Promise<Signer> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  if (kid !== undefined) jwk.kid = kid;
  return { privateKey, jwk, alg };
}

/** A served JWK Set whose keys, answer and delay the test changes; counts its fetches. */
class KeyHost {
  keys: JWK[] = [];
  fetches = 0;
  handler: ((res: ServerResponse) => void) | undefined;
  private readonly server: Server = createServer((_req, res) => {
    this.fetches++;
    if (this.handler) return this.handler(res);
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=3600' });
    res.end(JSON.stringify({ keys: this.keys }));
  });
  url = '';
  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/jwks.json`;
    return this;
  }
  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

let t: TestServer;
/** Refusals here are many, from one address: the failed-attempt limits are tested on their own. */
const NO_BLOCKING = { TESSERA_ATTEMPTS_SOURCE_MAX: '100000', TESSERA_ATTEMPTS_CLIENT_MAX: '100000' };
let hosts: KeyHost[] = [];

async function keyHost(): Promise<KeyHost> {
  const host = await new KeyHost().start();
  hosts.push(host);
  return host;
}

beforeAll(async () => {
  t = await startTestServer({ TESSERA_JWKS_ALLOW_PRIVATE: 'true', ...NO_BLOCKING });
  await t.addAudience(API);
});
afterAll(async () => {
  await t?.close();
  await Promise.all(hosts.map((h) => h.stop()));
  hosts = [];
});

/** A private_key_jwt client with these keys, inline or at a URL, granted API. */
async function keyClient(
  server: TestServer,
  keys: { jwks: PublicJwks } | { jwksUri: string },
): Promise<string> {
  const id = generateClientId();
  await server.server.runtime.store.createClient({
    id,
    name: 'key client',
    secretDigest: null,
    tokenTtl: null,
    audiences: [API],
    authMethod: 'private_key_jwt',
    jwks: 'jwks' in keys ? keys.jwks : null,
    jwksUri: 'jwksUri' in keys ? keys.jwksUri : null,
  });
  await server.sync();
  return id;
}

/** An assertion as RFC 7523 wants it, for `id`, with `claims` and `header` over the defaults. */
async function assertion(
  key: Signer,
  id: string,
  claims: JWTPayload = {},
  header: Record<string, unknown> = {},
  base = t,
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    iss: id,
    sub: id,
    aud: `${base.url}/oauth/token`,
    iat: now,
    exp: now + 300,
    jti: randomUUID(),
    ...claims,
  })
    .setProtectedHeader({ alg: key.alg, ...(key.jwk.kid ? { kid: key.jwk.kid } : {}), ...header })
    .sign(key.privateKey);
}

const withAssertion = (jwt: string, extra: Record<string, string> = {}, base = t) =>
  postToken(base.url, {
    grant_type: 'client_credentials',
    client_assertion_type: JWT_BEARER,
    client_assertion: jwt,
    audience: API,
    ...extra,
  });

/** The reason the audit trail gives for the latest refusal of `id`. */
async function reasonFor(id: string, base = t): Promise<string | null | undefined> {
  await base.server.runtime.audit.flush();
  const [event] = await base.server.runtime.store.queryAuditEvents({ limit: 1, clientId: id });
  return event?.reason;
}

async function expectRefused(jwt: string, id: string, reason: string, extra: Record<string, string> = {}) {
  const answer = await withAssertion(jwt, extra);
  expect({ status: answer.status, body: answer.body }).toEqual({ status: 401, body: REFUSED });
  expect(answer.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
  expect(await reasonFor(id)).toBe(`invalid_client: ${reason}`);
}

describe('private_key_jwt: real clients, unchanged', () => {
  for (const alg of ['ES256', 'ES384', 'RS256', 'PS256', 'EdDSA']) {
    it(`openid-client's PrivateKeyJwt with an inline jwks (${alg})`, async () => {
      const key = await signer(alg, `k-${alg}`);
      const id = await keyClient(t, { jwks: { keys: [key.jwk] } });
      const config = await client.discovery(
        new URL(t.url),
        id,
        { token_endpoint_auth_method: 'private_key_jwt' },
        client.PrivateKeyJwt({ key: key.privateKey, kid: key.jwk.kid }),
        { execute: [client.allowInsecureRequests] },
      );
      const token = await client.clientCredentialsGrant(config, { audience: API });
      expect(token.token_type).toBe('bearer');
      expect(decodeJwt(token.access_token)).toMatchObject({ sub: id, client_id: id, aud: API });
    });
  }

  it("openid-client's PrivateKeyJwt with a jwks_uri served by the test", async () => {
    const key = await signer('ES256', 'uri-1');
    const host = await keyHost();
    host.keys = [key.jwk];
    const id = await keyClient(t, { jwksUri: host.url });
    const config = await client.discovery(
      new URL(t.url),
      id,
      { token_endpoint_auth_method: 'private_key_jwt' },
      client.PrivateKeyJwt(key.privateKey),
      { execute: [client.allowInsecureRequests] },
    );
    for (let i = 0; i < 3; i++) {
      const token = await client.clientCredentialsGrant(config, { audience: API });
      expect(decodeJwt(token.access_token).sub).toBe(id);
    }
    // Cached for its max-age: fetched once for three tokens.
    expect(host.fetches).toBe(1);
  });

  it("oauth4webapi's PrivateKeyJwt, inline and at a URL", async () => {
    const key = await signer('EdDSA', 'o4w');
    const host = await keyHost();
    host.keys = [key.jwk];
    const issuer = new URL(t.url);
    const insecure = { [oauth.allowInsecureRequests]: true } as const;
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
    for (const keys of [{ jwks: { keys: [key.jwk] } }, { jwksUri: host.url }]) {
      const id = await keyClient(t, keys);
      const response = await oauth.clientCredentialsGrantRequest(
        as,
        { client_id: id },
        oauth.PrivateKeyJwt({ key: key.privateKey, kid: 'o4w' }),
        new URLSearchParams({ audience: API }),
        insecure,
      );
      const token = await oauth.processClientCredentialsResponse(as, { client_id: id }, response);
      expect(decodeJwt(token.access_token).sub).toBe(id);
    }
  });

  it('discovery lists private_key_jwt and the assertion algorithms', async () => {
    const metadata = (await (
      await fetch(`${t.url}/.well-known/oauth-authorization-server`)
    ).json()) as Record<string, unknown>;
    expect(metadata.token_endpoint_auth_methods_supported).toEqual([
      'client_secret_basic',
      'client_secret_post',
      'private_key_jwt',
    ]);
    expect(metadata.token_endpoint_auth_signing_alg_values_supported).toEqual([
      'ES256',
      'ES384',
      'RS256',
      'PS256',
      'EdDSA',
      'Ed25519',
    ]);
  });
});

describe('private_key_jwt: the rules, each with its exact answer', () => {
  let key: Signer;
  let id: string;
  const now = () => Math.floor(Date.now() / 1000);

  beforeAll(async () => {
    key = await signer('ES256', 'rules');
    id = await keyClient(t, { jwks: { keys: [key.jwk] } });
  });

  it('accepts aud as the issuer, or an array holding the token endpoint; client_id equal to iss', async () => {
    expect((await withAssertion(await assertion(key, id, { aud: t.url }))).status).toBe(200);
    const array = await assertion(key, id, { aud: ['https://other.example.com', `${t.url}/oauth/token`] });
    expect((await withAssertion(array)).status).toBe(200);
    expect((await withAssertion(await assertion(key, id), { client_id: id })).status).toBe(200);
  });

  it('a replay of the same assertion is refused', async () => {
    const jwt = await assertion(key, id);
    expect((await withAssertion(jwt)).status).toBe(200);
    await expectRefused(jwt, id, 'assertion replayed');
  });

  it('alg none is refused', async () => {
    const unsigned = [
      Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url'),
      Buffer.from(
        JSON.stringify({ iss: id, sub: id, aud: t.url, exp: now() + 60, jti: randomUUID() }),
      ).toString('base64url'),
      '',
    ].join('.');
    await expectRefused(unsigned, id, 'assertion algorithm not allowed');
  });

  it('HS256 with the public key as the secret is refused', async () => {
    const forged = await new SignJWT({ iss: id, sub: id, aud: t.url, exp: now() + 60, jti: randomUUID() })
      .setProtectedHeader({ alg: 'HS256', kid: 'rules' })
      .sign(new TextEncoder().encode(JSON.stringify(key.jwk)));
    await expectRefused(forged, id, 'assertion algorithm not allowed');
  });

  it('a signature by another key is refused', async () => {
    const other = await signer('ES256', 'rules');
    await expectRefused(await assertion(other, id), id, 'assertion signature does not verify');
  });

  it('a wrong aud is refused', async () => {
    await expectRefused(
      await assertion(key, id, { aud: 'https://elsewhere.example.com/oauth/token' }),
      id,
      'assertion aud is neither the issuer nor the token endpoint',
    );
  });

  it('iss or sub other than the client is refused; client_id other than iss too', async () => {
    await expectRefused(
      await assertion(key, id, { sub: 'someone-else' }),
      id,
      'assertion iss and sub must both be the client id',
    );
    const answer = await withAssertion(await assertion(key, id), { client_id: 'someone-else' });
    expect({ status: answer.status, body: answer.body }).toEqual({ status: 401, body: REFUSED });
  });

  it('exp at most 60 minutes after iat (or now): 60 minutes is accepted (authlib), more is refused', async () => {
    expect((await withAssertion(await assertion(key, id, { exp: now() + 3600 }))).status).toBe(200);
    await expectRefused(
      await assertion(key, id, { exp: now() + 3600 + 120 }),
      id,
      'assertion exp is more than 60 minutes ahead',
    );
    const { iat: _iat, ...noIat } = { iat: 0, exp: now() + 7200 };
    await expectRefused(
      await new SignJWT({ iss: id, sub: id, aud: t.url, jti: randomUUID(), ...noIat })
        .setProtectedHeader({ alg: 'ES256', kid: 'rules' })
        .sign(key.privateKey),
      id,
      'assertion exp is more than 60 minutes ahead',
    );
  });

  it('expired is refused; within the 60 s skew it is accepted', async () => {
    expect(
      (await withAssertion(await assertion(key, id, { iat: now() - 100, exp: now() - 30 }))).status,
    ).toBe(200);
    await expectRefused(
      await assertion(key, id, { iat: now() - 200, exp: now() - 90 }),
      id,
      'assertion expired',
    );
  });

  it('nbf ahead is refused; within the 60 s skew it is accepted', async () => {
    expect((await withAssertion(await assertion(key, id, { nbf: now() + 30 }))).status).toBe(200);
    await expectRefused(await assertion(key, id, { nbf: now() + 120 }), id, 'assertion not yet valid (nbf)');
  });

  it('exp and jti are required', async () => {
    await expectRefused(await assertion(key, id, { jti: undefined }), id, 'assertion has no jti');
    await expectRefused(await assertion(key, id, { exp: undefined }), id, 'assertion has no exp');
  });

  it('without a kid, each key that fits the alg is tried (authlib sends none)', async () => {
    const first = await signer('ES256');
    const second = await signer('ES256');
    const rsa = await signer('RS256');
    const multi = await keyClient(t, { jwks: { keys: [first.jwk, rsa.jwk, second.jwk] } });
    expect((await withAssertion(await assertion(second, multi))).status).toBe(200);
    expect((await withAssertion(await assertion(rsa, multi))).status).toBe(200);
    const stranger = await signer('ES256');
    await expectRefused(await assertion(stranger, multi), multi, 'assertion signature does not verify');
  });

  it('a malformed assertion, a wrong assertion type, and two methods at once', async () => {
    const malformed = await withAssertion('not.a.jwt');
    expect({ status: malformed.status, body: malformed.body }).toEqual({ status: 401, body: REFUSED });
    const wrongType = await postToken(t.url, {
      grant_type: 'client_credentials',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:saml2-bearer',
      client_assertion: await assertion(key, id),
      audience: API,
    });
    expect({ status: wrongType.status, body: wrongType.body }).toEqual({
      status: 400,
      body: { error: 'invalid_request', error_description: `client_assertion_type must be ${JWT_BEARER}` },
    });
    const both = await withAssertion(await assertion(key, id), { client_id: id, client_secret: 'x' });
    expect({ status: both.status, body: both.body }).toEqual({
      status: 400,
      body: {
        error: 'invalid_request',
        error_description:
          'use one client authentication method: HTTP Basic, client_secret in the body, or client_assertion',
      },
    });
  });
});

describe('private_key_jwt: methods a client is not registered for', () => {
  it('a secret sent by a key-only client is refused, and an assertion by a secret client', async () => {
    const key = await signer('ES256', 'only');
    const id = await keyClient(t, { jwks: { keys: [key.jwk] } });
    const bySecret = await postToken(
      t.url,
      { grant_type: 'client_credentials', audience: API },
      { headers: { authorization: basic(id, 'x'.repeat(43)) } },
    );
    expect({ status: bySecret.status, body: bySecret.body }).toEqual({ status: 401, body: REFUSED });
    expect(await reasonFor(id)).toBe(
      'invalid_client: client authenticates with private_key_jwt, not a secret',
    );

    const secretClient = await t.createClient([API]);
    const other = await signer('ES256');
    await expectRefused(
      await assertion(other, secretClient.id),
      secretClient.id,
      'client authenticates with a secret, not private_key_jwt',
    );
  });
});

describe('private_key_jwt: keys at a jwks_uri', () => {
  it('an unknown kid makes one refetch (a rotated key works at once), then none for a minute', async () => {
    const old = await signer('ES256', 'old');
    const rotated = await signer('ES256', 'new');
    const host = await keyHost();
    host.keys = [old.jwk];
    const id = await keyClient(t, { jwksUri: host.url });
    expect((await withAssertion(await assertion(old, id))).status).toBe(200);
    expect(host.fetches).toBe(1);
    host.keys = [old.jwk, rotated.jwk];
    expect((await withAssertion(await assertion(rotated, id))).status).toBe(200);
    expect(host.fetches).toBe(2);
    const unknown = await signer('ES256', 'unknown');
    await expectRefused(await assertion(unknown, id), id, 'unknown kid');
    expect(host.fetches).toBe(2);
  });

  it('a host that hangs: refused after the 2 s timeout; one that answers 10 MB: refused at 64 KiB', async () => {
    const key = await signer('ES256', 'k');
    const hanging = await keyHost();
    hanging.handler = () => undefined;
    const slow = await keyClient(t, { jwksUri: hanging.url });
    const started = Date.now();
    await expectRefused(await assertion(key, slow), slow, 'jwks_uri: no answer within 2000 ms');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
    expect(Date.now() - started).toBeLessThan(5000);

    const huge = await keyHost();
    huge.handler = (res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      let sent = 0;
      const more = (): void => {
        while (sent < 10 && res.write(chunk)) sent++;
        if (sent >= 10) res.end();
        else res.once('drain', more);
      };
      more();
    };
    const big = await keyClient(t, { jwksUri: huge.url });
    await expectRefused(await assertion(key, big), big, 'jwks_uri: answer over 65536 bytes');
    // The server is still up and serving.
    const ok = await t.createClient([API]);
    expect(
      (
        await postToken(
          t.url,
          { grant_type: 'client_credentials', audience: API },
          { headers: { authorization: basic(ok.id, ok.secret) } },
        )
      ).status,
    ).toBe(200);
  });

  it('a jwks_uri on 127.0.0.1 is refused without TESSERA_JWKS_ALLOW_PRIVATE, and never fetched', async () => {
    const guarded = await startTestServer(NO_BLOCKING);
    try {
      await guarded.addAudience(API);
      const key = await signer('ES256', 'k');
      const host = await keyHost();
      host.keys = [key.jwk];
      for (const url of [host.url, host.url.replace('127.0.0.1', 'localhost')]) {
        const id = await keyClient(guarded, { jwksUri: url });
        const answer = await withAssertion(await assertion(key, id, {}, {}, guarded), {}, guarded);
        expect({ status: answer.status, body: answer.body }).toEqual({ status: 401, body: REFUSED });
        expect(await reasonFor(id, guarded)).toMatch(
          /^invalid_client: jwks_uri: (127\.0\.0\.1 is not a public address|localhost resolves to (127\.0\.0\.1|::1), not a public address)$/,
        );
      }
      expect(host.fetches).toBe(0);
    } finally {
      await guarded.close();
    }
  });
});
