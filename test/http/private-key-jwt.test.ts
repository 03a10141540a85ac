/**
 * private_key_jwt (INTERFACE.md, "Client authentication"; RFC 7523 §2.2): real clients (openid-client,
 * oauth4webapi) unchanged, with an inline jwks and with a jwks_uri served by the test; and every rule with its
 * exact answer and its reason in the audit trail: algorithms, iss/sub, aud, exp horizon, expiry and nbf with
 * the 60 s skew, jti replay, unknown kid with one refetch a minute, methods a client is not registered for,
 * and jwks_uri fetching (private addresses, a host that hangs, an answer of 10 MB).
 */
import { spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { AddressInfo } from 'node:net';
import {
  decodeJwt,
  decodeProtectedHeader,
  exportPKCS8,
  importPKCS8,
  SignJWT,
  type JWK,
  type JWTPayload,
} from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWT_BEARER, type PublicJwks } from '../../src/domain/client-auth/index.js';
import { ASSERTION_SIGNING_ALGS } from '../helpers/expected.js';
import { clientAssertion, signer, writeKeyClient, type Signer } from '../helpers/key-client.js';
import {
  basic,
  latestAuditEvent,
  NO_BLOCKING,
  postToken,
  startTestServer,
  type TestServer,
} from '../helpers/server.js';

const API = 'https://api.example.com';
const REFUSED = { error: 'invalid_client', error_description: 'client authentication failed' };

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
  const id = await writeKeyClient(server.server.runtime.store, {
    name: 'key client',
    audiences: [API],
    ...keys,
  });
  await server.sync();
  return id;
}

/** An assertion as RFC 7523 wants it, for `id`, with `claims` and `header` over the defaults. */
const assertion = (
  key: Signer,
  id: string,
  claims: JWTPayload = {},
  header: Record<string, unknown> = {},
  base = t,
): Promise<string> => clientAssertion(key, id, `${base.url}/oauth/token`, claims, header);

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
  return (await latestAuditEvent(base, id))?.reason;
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
    expect(metadata.token_endpoint_auth_signing_alg_values_supported).toEqual(ASSERTION_SIGNING_ALGS);
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

  it('a jti the store cannot record (another process holds its write lock past the wait): 503 temporarily_unavailable, not a failed proof', async () => {
    // An apply from the CLI holding SQLite's write lock for longer than a write waits (5 s).
    const holder = new DatabaseSync(path.join(t.dataDir, 'tessera.db'));
    holder.exec('BEGIN IMMEDIATE');
    try {
      const refused = await withAssertion(await assertion(key, id));
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe(t.config.retryAfter.toString());
      expect(refused.body).toEqual({
        error: 'temporarily_unavailable',
        error_description: 'the service cannot answer right now; try again later',
      });
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    // Not counted against the client: it gets its token at once.
    expect((await withAssertion(await assertion(key, id))).status).toBe(200);
  }, 20_000);

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

  it('an RSA key with a public exponent past 2^31 - 1 in a fetched set is left out: its kid is unknown', async () => {
    // Each check by such a key is an exponentiation as long as its exponent (13 ms at 3072 bits, on the thread
    // answering every request); jose would check it.
    const pair = generateKeyPairSync('rsa', { modulusLength: 2048, publicExponent: 2 ** 31 + 1 });
    const large = {
      alg: 'RS256',
      jwk: { ...(pair.publicKey.export({ format: 'jwk' }) as JWK), kid: 'large-e' },
      privateKey: await importPKCS8(
        pair.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string,
        'RS256',
      ),
    };
    const good = await signer('ES256', 'good');
    const host = await keyHost();
    host.keys = [large.jwk, good.jwk];
    const id = await keyClient(t, { jwksUri: host.url });
    await expectRefused(await assertion(large, id), id, 'unknown kid');
    expect((await withAssertion(await assertion(good, id))).status).toBe(200);
    const only = await keyHost();
    only.keys = [large.jwk];
    const alone = await keyClient(t, { jwksUri: only.url });
    await expectRefused(await assertion(large, alone), alone, 'jwks_uri: the set has no usable signing key');
  });

  it('a set nested deeper than 32 levels is refused as it is read (never copied by a recursion)', async () => {
    const key = await signer('ES256', 'deep');
    const host = await keyHost();
    const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
    // The set is level 1, keys 2, the key 3, its member `extra` 4 and on: 29 lists reach level 32, 30 level 33.
    const serve = (levels: number) => (res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"keys":[${JSON.stringify(key.jwk).slice(0, -1)},"extra":${nested(levels)}}]}`);
    };
    host.handler = serve(29);
    const fits = await keyClient(t, { jwksUri: host.url });
    expect((await withAssertion(await assertion(key, fits))).status).toBe(200);
    for (const levels of [30, 20_000]) {
      const other = await keyHost();
      other.handler = serve(levels);
      const deep = await keyClient(t, { jwksUri: other.url });
      await expectRefused(
        await assertion(key, deep),
        deep,
        'jwks_uri: the answer nests deeper than 32 levels',
      );
    }
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

describe('private_key_jwt: Python authlib, unchanged', () => {
  /** Debian's python3-authlib; not the python3 first on PATH (pyenv), which has no authlib. */
  const PYTHON = '/usr/bin/python3';
  const INSTALL = 'apt-get install python3-authlib';
  const inCi = process.env.CI !== undefined && !['', '0', 'false'].includes(process.env.CI);
  const probe = spawnSync(
    PYTHON,
    ['-c', 'import authlib.integrations.requests_client, authlib.oauth2.rfc7523'],
    { encoding: 'utf8', timeout: 20_000 },
  );
  const missing =
    probe.status === 0
      ? undefined
      : `${PYTHON} cannot import authlib (${probe.error?.message ?? probe.stderr.trim().split('\n').pop()}); ${INSTALL}`;

  /**
   * The README's example, as a client writes it: OAuth2Session with token_endpoint_auth_method
   * private_key_jwt and authlib's PrivateKeyJWT (RS256 unless told otherwise), the private key as PEM. Prints
   * the token and the assertion it sent (read back from the request, to check what authlib signs).
   */
  const SCRIPT = `
import json, sys
from urllib.parse import parse_qs
from authlib.integrations.requests_client import OAuth2Session
from authlib.oauth2.rfc7523 import PrivateKeyJWT

client_id, token_endpoint, audience, alg = sys.argv[1:5]
private_key = sys.stdin.read()
session = OAuth2Session(client_id, private_key, token_endpoint_auth_method="private_key_jwt")
session.trust_env = False  # no proxy from the environment for 127.0.0.1
session.register_client_auth_method(
    PrivateKeyJWT(token_endpoint) if alg == "default" else PrivateKeyJWT(token_endpoint, alg=alg)
)
sent = []
session.hooks["response"].append(lambda response, *args, **kwargs: sent.append(response.request.body))
token = session.fetch_token(token_endpoint, grant_type="client_credentials", audience=audience)
body = sent[-1].decode() if isinstance(sent[-1], bytes) else sent[-1]
print(json.dumps({"token": dict(token), "request": {k: v[0] for k, v in parse_qs(body).items()}}))
`;

  function authlib(
    clientId: string,
    alg: string,
    pem: string,
  ): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(PYTHON, ['-c', SCRIPT, clientId, `${t.url}/oauth/token`, API, alg], {
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const timer = setTimeout(() => child.kill('SIGKILL'), 25_000);
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.once('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
      child.stdin.end(pem);
    });
  }

  // authlib's default (RS256), and ES256 as it is asked for.
  for (const [alg, asked] of [
    ['RS256', 'default'],
    ['ES256', 'ES256'],
  ] as const) {
    for (const where of ['an inline jwks', 'a jwks_uri'] as const) {
      it(`OAuth2Session + PrivateKeyJWT, ${alg}, against ${where}: no kid, a 60-minute exp, a token`, async (ctx) => {
        if (missing !== undefined) {
          // CI installs it (.ci/run): there, a missing authlib is a failure, not a skip.
          if (inCi) throw new Error(missing);
          console.warn(`skipped: ${missing}`);
          ctx.skip(missing);
        }
        const key = await signer(alg, `authlib-${alg}`);
        let keys: { jwks: PublicJwks } | { jwksUri: string };
        if (where === 'a jwks_uri') {
          const host = await keyHost();
          host.keys = [key.jwk];
          keys = { jwksUri: host.url };
        } else keys = { jwks: { keys: [key.jwk] } };
        const id = await keyClient(t, keys);

        const run = await authlib(id, asked, await exportPKCS8(key.privateKey));
        expect(run.code, run.stderr).toBe(0);
        const { token, request } = JSON.parse(run.stdout) as {
          token: Record<string, unknown>;
          request: Record<string, string>;
        };
        expect(token).toMatchObject({ token_type: 'Bearer', expires_in: 1800 });
        expect(decodeJwt(token.access_token as string)).toMatchObject({ sub: id, client_id: id, aud: API });

        // What authlib sent, unchanged: the jwt-bearer assertion, signed with no kid, living 60 minutes.
        expect(request).toMatchObject({
          grant_type: 'client_credentials',
          audience: API,
          client_assertion_type: JWT_BEARER,
        });
        const header = decodeProtectedHeader(request.client_assertion!);
        expect(header).toEqual({ alg, typ: 'JWT' });
        const claims = decodeJwt(request.client_assertion!);
        expect(claims).toMatchObject({ iss: id, sub: id, aud: `${t.url}/oauth/token` });
        expect(claims.exp! - claims.iat!).toBe(3600);
        expect(typeof claims.jti).toBe('string');
      });
    }
  }
});

describe('private_key_jwt: failed attempts', () => {
  const TOO_MANY = {
    error: 'invalid_request',
    error_description: 'too many failed attempts; try again later',
  };
  let s: TestServer;

  beforeAll(async () => {
    s = await startTestServer({
      TESSERA_JWKS_ALLOW_PRIVATE: 'true',
      // The source of each request is the X-Forwarded-For the test sends.
      TESSERA_TRUST_PROXY: 'loopback',
      TESSERA_ATTEMPTS_CLIENT_MAX: '3',
      TESSERA_ATTEMPTS_CLIENT_WINDOW: '1m',
      TESSERA_ATTEMPTS_CLIENT_BLOCK: '45s',
      TESSERA_ATTEMPTS_SOURCE_MAX: '100000',
    });
    await s.addAudience(API);
  });
  afterAll(async () => {
    await s?.close();
  });

  const from = (source: string, jwt: string) =>
    postToken(
      s.url,
      {
        grant_type: 'client_credentials',
        client_assertion_type: JWT_BEARER,
        client_assertion: jwt,
        audience: API,
      },
      { headers: { 'x-forwarded-for': source } },
    );
  const sign = (key: Signer, id: string, claims: JWTPayload = {}) => assertion(key, id, claims, {}, s);

  for (const where of ['an inline jwks', 'a jwks_uri'] as const) {
    it(`wrong signatures count (${where}): the 4th is 429 with Retry-After, yet the right assertion gets its token`, async () => {
      expect(s.config.attemptsPerClient).toEqual({ failures: 3, windowSeconds: 60, blockSeconds: 45 });
      const key = await signer('ES256', 'attempts');
      // Another key with the same kid: its signatures do not verify.
      const forger = await signer('ES256', 'attempts');
      let keys: { jwks: PublicJwks } | { jwksUri: string };
      if (where === 'a jwks_uri') {
        const host = await keyHost();
        host.keys = [key.jwk];
        keys = { jwksUri: host.url };
      } else keys = { jwks: { keys: [key.jwk] } };
      const id = await keyClient(s, keys);
      const source = where === 'a jwks_uri' ? '198.51.100.20' : '198.51.100.10';

      for (let i = 0; i < 3; i++) {
        const refused = await from(source, await sign(forger, id));
        expect({ status: refused.status, body: refused.body }).toEqual({ status: 401, body: REFUSED });
        expect(refused.headers.get('www-authenticate')).toBe('Basic realm="tessera"');
        expect(await reasonFor(id, s)).toBe('invalid_client: assertion signature does not verify');
      }
      // Blocked: this client id from this address, for 45 s.
      const blocked = await from(source, await sign(forger, id));
      expect({ status: blocked.status, body: blocked.body }).toEqual({ status: 429, body: TOO_MANY });
      expect(blocked.headers.get('retry-after')).toBe('45');
      expect(blocked.headers.get('cache-control')).toBe('no-store');
      expect(blocked.headers.get('pragma')).toBe('no-cache');
      expect(blocked.headers.get('www-authenticate')).toBeNull();
      // Any other bad assertion from there is a 429 too: an expired one by the right key.
      const now = Math.floor(Date.now() / 1000);
      const expired = await from(source, await sign(key, id, { iat: now - 400, exp: now - 300 }));
      expect({ status: expired.status, body: expired.body }).toEqual({ status: 429, body: TOO_MANY });
      expect(expired.headers.get('retry-after')).toMatch(/^(4[0-5])$/);

      // The client itself, from the blocked address, with a right assertion: its token, every time.
      const right = await sign(key, id);
      for (const jwt of [right, await sign(key, id)]) {
        const ok = await from(source, jwt);
        expect(ok.status, JSON.stringify(ok.body)).toBe(200);
        expect(ok.body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 1800 });
        expect(decodeJwt(ok.body.access_token as string)).toMatchObject({ sub: id, client_id: id, aud: API });
      }
      // A right assertion used once already is not its credential any more: 429 from there.
      const replayed = await from(source, right);
      expect({ status: replayed.status, body: replayed.body }).toEqual({ status: 429, body: TOO_MANY });
      // The block is this client from this address only: from elsewhere a wrong signature is a 401 again.
      const elsewhere = await from('198.51.100.99', await sign(forger, id));
      expect({ status: elsewhere.status, body: elsewhere.body }).toEqual({ status: 401, body: REFUSED });

      // Each 401 and each token is an event; the 429s are not events of their own (summed per minute).
      await s.server.runtime.audit.flush();
      const events = await s.server.runtime.store.queryAuditEvents({ limit: 100, clientId: id });
      const wrong = 'invalid_client: assertion signature does not verify';
      expect(events.map((e) => `${e.type} ${e.source}: ${e.reason ?? ''}`).sort()).toEqual(
        [
          `token.issued ${source}: `,
          `token.issued ${source}: `,
          ...Array<string>(3).fill(`token.refused ${source}: ${wrong}`),
          `token.refused 198.51.100.99: ${wrong}`,
        ].sort(),
      );
    });
  }
});
