/**
 * Mutual TLS (INTERFACE.md, "Mutual TLS: certificates as client credentials, and certificate-bound tokens"; RFC 8705)
 * over Tessera's own TLS, on a real socket, with real certificates (helpers/pki.ts): tls_client_auth by each kind of
 * registered value (a DN compared as a DN, a SPIFFE ID as a SAN URI), through an intermediate the client sends (and
 * on a resumed TLS session), self_signed_tls_client_auth, every refusal with its exact answer and audit reason,
 * certificate-bound tokens (alone and with DPoP), introspection's cnf, an admin token bound to a certificate, and
 * discovery. Proxies' headers are test/http/mtls-proxy.test.ts's; curl, Python, Go and openid-client
 * test/http/mtls-clients.test.ts's.
 */
import { request as httpsRequest, Agent as HttpsAgent } from 'node:https';
import { writeFileSync } from 'node:fs';
import type { TLSSocket } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLocalJWKSet, decodeJwt, jwtVerify, type JSONWebKeySet } from 'jose';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { holder, signProof } from '../helpers/dpop.js';
import { adminAudienceUrl, ensureAdminAudience } from '../../src/management/builtin.js';
import { managementOf } from '../helpers/management.js';
import {
  issueCert,
  makeCa,
  selfSigned,
  serverCert,
  writePems,
  type Authority,
  type Issued,
} from '../helpers/pki.js';
import {
  freePort,
  latestAuditEvent,
  NO_BLOCKING,
  startTestServer,
  type TestServer,
} from '../helpers/server.js';
import { digestSecret, generateSecret } from '../../src/domain/secrets.js';
import type { NewClient } from '../../src/store/types.js';
import { exchangeParams } from '../helpers/provision.js';

const API = 'https://api.example.com';
const SPIFFE = 'spiffe://prod.example.com/ns/billing/sa/worker';
const SUBJECT = 'CN=worker,OU=Billing,O=Example Inc,C=US';
const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };
const INVALID_CLIENT = { error: 'invalid_client', error_description: 'client authentication failed' };
const HOUR = 3_600_000;

let root: Authority;
let intermediate: Authority;
let untrustedRoot: Authority;
let serverRoot: Authority;
let worker: Issued;
let viaIntermediate: Issued;
let untrusted: Issued;
let expired: Issued;
let serverOnly: Issued;
let otherSubject: Issued;
let self: Awaited<ReturnType<typeof selfSigned>>;
let otherSelf: Awaited<ReturnType<typeof selfSigned>>;
let files: Record<string, string>;
let t: TestServer;
let base: string;
const ids: Record<string, string> = {};
let boundSecret: string;
/** The JWK Set a self-signed client publishes at its jwks_uri (served by `published`). */
let publishedSet: { keys: unknown[] };
let published: HttpServer;

/** A TLS client of the server, presenting `leaf` (with `chain` after it, PEM) or no certificate. */
const agent = (leaf?: Issued, chain = ''): Agent =>
  new Agent({
    connect: {
      ca: serverRoot.certPem,
      ...(leaf === undefined ? {} : { cert: leaf.certPem + chain, key: leaf.keyPem }),
    },
  });

async function token(
  form: Record<string, string>,
  dispatcher: Agent,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown>; headers: Record<string, string | null> }> {
  const response = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(form).toString(),
    dispatcher,
  });
  return {
    status: response.status,
    body: (await response.json()) as Record<string, unknown>,
    headers: {
      'cache-control': response.headers.get('cache-control'),
      pragma: response.headers.get('pragma'),
    },
  };
}

const asks = (id: string): Record<string, string> => ({
  grant_type: 'client_credentials',
  client_id: id,
  audience: API,
});

async function client(id: string, fields: Partial<NewClient>): Promise<void> {
  await t.server.runtime.store.createClient({
    id,
    name: id,
    secretDigest: null,
    tokenTtl: null,
    audiences: [API],
    ...fields,
  });
  ids[id] = id;
}

beforeAll(async () => {
  root = await makeCa({ subject: 'CN=Example Client Root' });
  intermediate = await makeCa({ subject: 'CN=Example Client Intermediate', issuer: root });
  untrustedRoot = await makeCa({ subject: 'CN=Somebody Else Root' });
  serverRoot = await makeCa({ subject: 'CN=Example Server Root' });
  const san = {
    uri: [SPIFFE],
    dns: ['worker.example.com'],
    ip: ['10.0.0.7', '2001:db8::7'],
    email: ['Worker@Example.com'],
  };
  worker = await issueCert(root, { subject: SUBJECT, san });
  viaIntermediate = await issueCert(intermediate, { subject: 'CN=batch,O=Example Inc,C=US' });
  untrusted = await issueCert(untrustedRoot, { subject: SUBJECT, san });
  expired = await issueCert(root, {
    subject: SUBJECT,
    san,
    notBefore: new Date(Date.now() - 48 * HOUR),
    notAfter: new Date(Date.now() - 24 * HOUR),
  });
  serverOnly = await issueCert(root, { subject: SUBJECT, san, eku: ['serverAuth'] });
  otherSubject = await issueCert(root, { subject: 'CN=intruder,OU=Billing,O=Example Inc,C=US' });
  self = await selfSigned({ subject: 'CN=self-signed worker' });
  otherSelf = await selfSigned({ subject: 'CN=self-signed worker' });
  const server = await serverCert(serverRoot);
  files = await writePems({
    'server.pem': server.certPem,
    'server-key.pem': server.keyPem,
    'client-ca.pem': root.certPem,
  });
  publishedSet = { keys: [self.jwk] };
  published = createHttpServer((_request, response) =>
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(publishedSet)),
  );
  await new Promise<void>((resolve) => published.listen(0, '127.0.0.1', resolve));
  const port = await freePort();
  t = await startTestServer({
    ...NO_BLOCKING,
    // The published set is on loopback.
    TESSERA_JWKS_ALLOW_PRIVATE: 'true',
    TESSERA_PORT: String(port),
    TESSERA_ISSUER: `https://localhost:${port}`,
    TESSERA_TLS_CERT: files['server.pem']!,
    TESSERA_TLS_KEY: files['server-key.pem']!,
    TESSERA_TLS_CLIENT_CA: files['client-ca.pem']!,
  });
  base = `https://localhost:${port}`;
  await t.addAudience(API);
  // The registered DN differs from the certificate's in case, spacing and the case of its attribute types.
  await client('by-dn', {
    authMethod: 'tls_client_auth',
    tlsClientAuth: { kind: 'subject_dn', value: 'cn=Worker , ou=billing,  o=EXAMPLE   INC,c=us' },
  });
  await client('by-spiffe', {
    authMethod: 'tls_client_auth',
    tlsClientAuth: { kind: 'san_uri', value: SPIFFE },
  });
  await client('by-dns', {
    authMethod: 'tls_client_auth',
    tlsClientAuth: { kind: 'san_dns', value: 'Worker.Example.com' },
  });
  await client('by-ip', {
    authMethod: 'tls_client_auth',
    tlsClientAuth: { kind: 'san_ip', value: '2001:DB8:0::7' },
  });
  await client('by-email', {
    authMethod: 'tls_client_auth',
    tlsClientAuth: { kind: 'san_email', value: 'worker@example.com' },
  });
  await client('batch', {
    authMethod: 'tls_client_auth',
    tlsClientAuth: { kind: 'subject_dn', value: 'CN=batch,O=Example Inc,C=US' },
  });
  await client('self', {
    authMethod: 'self_signed_tls_client_auth',
    jwks: { keys: [self.jwk as never] },
  });
  await client('self-published', {
    authMethod: 'self_signed_tls_client_auth',
    jwksUri: `http://127.0.0.1:${(published.address() as AddressInfo).port}/jwks.json`,
  });
  await client('bound-dn', {
    authMethod: 'tls_client_auth',
    tlsClientAuth: { kind: 'subject_dn', value: SUBJECT },
    certificateBoundAccessTokens: true,
  });
  boundSecret = generateSecret();
  await client('bound-secret', {
    secretDigest: digestSecret(boundSecret),
    certificateBoundAccessTokens: true,
  });
  await t.sync();
}, 60_000);

afterAll(async () => {
  await t?.close();
  published?.close();
});

describe('discovery over TLS', () => {
  it('lists both RFC 8705 methods, certificate-bound tokens and the mTLS aliases (the issuer’s URLs)', async () => {
    const response = await fetch(`${base}/.well-known/oauth-authorization-server`, { dispatcher: agent() });
    expect(response.status).toBe(200);
    const metadata = (await response.json()) as Record<string, unknown>;
    const methods = [
      'client_secret_basic',
      'client_secret_post',
      'private_key_jwt',
      'tls_client_auth',
      'self_signed_tls_client_auth',
    ];
    expect(metadata.token_endpoint_auth_methods_supported).toEqual(methods);
    expect(metadata.revocation_endpoint_auth_methods_supported).toEqual(methods);
    expect(metadata.introspection_endpoint_auth_methods_supported).toEqual(methods);
    expect(metadata.tls_client_certificate_bound_access_tokens).toBe(true);
    expect(metadata.mtls_endpoint_aliases).toEqual({
      token_endpoint: `${base}/oauth/token`,
      revocation_endpoint: `${base}/oauth/revoke`,
      introspection_endpoint: `${base}/oauth/introspect`,
    });
    expect(response.headers.get('strict-transport-security')).toBe('max-age=31536000');
  });

  it('a handshake without a certificate succeeds, and a secret client is served as before', async () => {
    const secret = generateSecret();
    await t.server.runtime.store.createClient({
      id: 'plain',
      name: 'plain',
      secretDigest: digestSecret(secret),
      tokenTtl: null,
      audiences: [API],
    });
    await t.sync();
    const answer = await token({ ...asks('plain'), client_secret: secret }, agent());
    expect(answer.status).toBe(200);
    expect(answer.body.token_type).toBe('Bearer');
    expect(decodeJwt(answer.body.access_token as string).cnf).toBeUndefined();
    // A certificate on the connection changes nothing for a client of another method (a mesh sends one always).
    const withCertificate = await token({ ...asks('plain'), client_secret: secret }, agent(worker));
    expect(withCertificate.status).toBe(200);
    expect(decodeJwt(withCertificate.body.access_token as string).cnf).toBeUndefined();
    // Its id alone, with or without a certificate, is a request without its secret, as without mutual TLS; so is an
    // unknown id's: 400, no failed attempt.
    for (const [id, dispatcher] of [
      ['plain', agent()],
      ['plain', agent(worker)],
      ['nobody', agent(worker)],
    ] as const) {
      const alone = await token(asks(id), dispatcher);
      expect([alone.status, alone.body]).toEqual([
        400,
        { error: 'invalid_request', error_description: 'client_secret is required' },
      ]);
    }
    expect((await latestAuditEvent(t, 'plain'))?.reason).toBe('invalid_request: client_secret is required');
  });
});

describe('tls_client_auth', () => {
  const verified = async (accessToken: string) => {
    const jwks = (await (
      await fetch(`${base}/.well-known/jwks.json`, { dispatcher: agent() })
    ).json()) as JSONWebKeySet;
    return (await jwtVerify(accessToken, createLocalJWKSet(jwks), { issuer: base, audience: API })).payload;
  };

  it.each([
    ['by-dn', 'the subject DN, compared as a DN (case, spacing, attribute types)'],
    ['by-spiffe', 'a SPIFFE ID as the SAN URI'],
    ['by-dns', 'a SAN dNSName, case-insensitively'],
    ['by-ip', 'a SAN iPAddress, in any spelling of the address'],
    ['by-email', 'a SAN rfc822Name, case-insensitively'],
  ])('%s: %s gets a verified token', async (id) => {
    const answer = await token(asks(id), agent(worker));
    expect(answer.status).toBe(200);
    expect(answer.headers).toEqual(NO_STORE);
    expect(Object.keys(answer.body)).toEqual(['access_token', 'token_type', 'expires_in']);
    expect(answer.body.token_type).toBe('Bearer');
    expect(answer.body.expires_in).toBe(1800);
    const claims = await verified(answer.body.access_token as string);
    expect(claims.client_id).toBe(id);
    expect(claims.sub).toBe(id);
    expect(claims.cnf).toBeUndefined();
    const event = await latestAuditEvent(t, id);
    expect([event?.type, event?.reason]).toEqual(['token.issued', null]);
  });

  it('through an intermediate the client sends, on a new and on a resumed TLS session', async () => {
    const answer = await token(asks('batch'), agent(viaIntermediate, intermediate.certPem));
    expect(answer.status).toBe(200);
    // Resumption: the second connection resumes the first's session (its ticket), and authenticates alike.
    const https = new HttpsAgent({
      ca: serverRoot.certPem,
      cert: viaIntermediate.certPem + intermediate.certPem,
      key: viaIntermediate.keyPem,
      keepAlive: false,
      maxCachedSessions: 10,
    });
    const post = () =>
      new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
        const body = new URLSearchParams(asks('batch')).toString();
        const req = httpsRequest(
          `${base}/oauth/token`,
          { method: 'POST', agent: https, headers: { 'content-type': 'application/x-www-form-urlencoded' } },
          (res) => {
            const reused = (res.socket as TLSSocket).isSessionReused();
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode!, reused }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    expect(await post()).toEqual({ status: 200, reused: false });
    let resumed = await post();
    // A TLS 1.3 ticket arrives after the handshake: the first resumption may need one more connection.
    if (!resumed.reused) resumed = await post();
    expect(resumed).toEqual({ status: 200, reused: true });
    https.destroy();
  });

  it('without the intermediate the chain is not trusted', async () => {
    const answer = await token(asks('batch'), agent(viaIntermediate));
    expect([answer.status, answer.body]).toEqual([401, INVALID_CLIENT]);
    expect((await latestAuditEvent(t, 'batch'))?.reason).toBe('invalid_client: mtls: chain not trusted');
  });

  it.each([
    ['no certificate', undefined, 'mtls: no certificate'],
    ['a certificate of a CA not in TESSERA_TLS_CLIENT_CA', 'untrusted', 'mtls: chain not trusted'],
    ['an expired certificate', 'expired', 'mtls: certificate expired'],
    [
      'a certificate whose extended key usage is serverAuth only',
      'serverOnly',
      'mtls: certificate not for client authentication (extended key usage)',
    ],
    ['a certificate of another subject', 'otherSubject', 'mtls: subject does not match'],
  ])('%s: 401 invalid_client, a failed attempt with its reason', async (_what, which, reason) => {
    const leaf = { untrusted, expired, serverOnly, otherSubject }[which as 'untrusted'] as Issued | undefined;
    const answer = await token(asks('by-dn'), agent(leaf));
    expect(answer.status).toBe(401);
    expect(answer.body).toEqual(INVALID_CLIENT);
    expect(answer.headers).toEqual(NO_STORE);
    const event = await latestAuditEvent(t, 'by-dn');
    expect([event?.type, event?.reason]).toEqual(['token.refused', `invalid_client: ${reason}`]);
  });

  it('each kind of SAN refuses a certificate without the registered value', async () => {
    for (const [id, reason] of [
      ['by-spiffe', 'mtls: no SAN URI matches'],
      ['by-dns', 'mtls: no SAN dNSName matches'],
      ['by-ip', 'mtls: no SAN iPAddress matches'],
      ['by-email', 'mtls: no SAN rfc822Name matches'],
    ] as const) {
      const answer = await token(asks(id), agent(otherSubject));
      expect([id, answer.status, answer.body]).toEqual([id, 401, INVALID_CLIENT]);
      expect((await latestAuditEvent(t, id))?.reason).toBe(`invalid_client: ${reason}`);
    }
  });

  it('client_id is required; a certificate client sending a secret as well uses two methods', async () => {
    const noId = await token({ grant_type: 'client_credentials', audience: API }, agent(worker));
    expect([noId.status, noId.body]).toEqual([
      400,
      { error: 'invalid_request', error_description: 'client_id is required' },
    ]);
    const both = await token({ ...asks('by-dn'), client_secret: 'a-secret' }, agent(worker));
    expect([both.status, both.body]).toEqual([
      400,
      {
        error: 'invalid_request',
        error_description:
          'use one client authentication method: this client authenticates with its TLS certificate; send client_id without a secret or an assertion',
      },
    ]);
    // Without its certificate, a secret proves nothing for it: a failed authentication.
    const secretOnly = await token({ ...asks('by-dn'), client_secret: 'a-secret' }, agent());
    expect([secretOnly.status, secretOnly.body]).toEqual([401, INVALID_CLIENT]);
  });
});

describe('self_signed_tls_client_auth', () => {
  it('the certificate registered in the client’s jwks (x5c) authenticates, no chain checked', async () => {
    const answer = await token(asks('self'), agent(self));
    expect(answer.status).toBe(200);
    expect(decodeJwt(answer.body.access_token as string).client_id).toBe('self');
  });

  it('another certificate of the same subject and a CA-issued one are refused', async () => {
    for (const leaf of [otherSelf, worker]) {
      const answer = await token(asks('self'), agent(leaf));
      expect([answer.status, answer.body]).toEqual([401, INVALID_CLIENT]);
      expect((await latestAuditEvent(t, 'self'))?.reason).toBe(
        "invalid_client: mtls: certificate is not one of the client's jwks x5c",
      );
    }
    const none = await token(asks('self'), agent());
    expect([none.status, none.body]).toEqual([401, INVALID_CLIENT]);
    expect((await latestAuditEvent(t, 'self'))?.reason).toBe('invalid_client: mtls: no certificate');
  });
});

describe('self_signed_tls_client_auth with its certificates at a jwks_uri', () => {
  it('a published certificate authenticates; a new one is found by fetching the set again, once', async () => {
    expect((await token(asks('self-published'), agent(self))).status).toBe(200);
    // The client publishes a second certificate: the first request with it fetches the set again.
    publishedSet = { keys: [self.jwk, otherSelf.jwk] };
    expect((await token(asks('self-published'), agent(otherSelf))).status).toBe(200);
    // A certificate it never published: refused, and the set is not fetched again within the minute.
    const refused = await token(asks('self-published'), agent(worker));
    expect([refused.status, refused.body]).toEqual([401, INVALID_CLIENT]);
    expect((await latestAuditEvent(t, 'self-published'))?.reason).toBe(
      "invalid_client: mtls: certificate is not one of the client's jwks x5c",
    );
  });
});

describe('certificate-bound tokens (RFC 8705 §3)', () => {
  it('a tls_client_auth client’s token carries cnf.x5t#S256 of its certificate and stays Bearer', async () => {
    const answer = await token(asks('bound-dn'), agent(worker));
    expect(answer.status).toBe(200);
    expect(answer.body.token_type).toBe('Bearer');
    expect(decodeJwt(answer.body.access_token as string).cnf).toEqual({ 'x5t#S256': worker.x5t });
  });

  it('a secret client bound to its certificate: bound to whatever certificate it asked with, none → 400', async () => {
    const form = { ...asks('bound-secret'), client_secret: boundSecret };
    // For the binding alone the certificate need not chain to a trusted CA.
    const answer = await token(form, agent(untrusted));
    expect(answer.status).toBe(200);
    expect(decodeJwt(answer.body.access_token as string).cnf).toEqual({ 'x5t#S256': untrusted.x5t });
    const none = await token(form, agent());
    expect([none.status, none.body]).toEqual([
      400,
      {
        error: 'invalid_request',
        error_description:
          "a TLS client certificate is required: this client's tokens are bound to its certificate (tls_client_certificate_bound_access_tokens)",
      },
    ]);
  });

  it('with a DPoP proof as well: cnf carries x5t#S256 and jkt, and the type is DPoP', async () => {
    const key = await holder();
    const proof = await signProof(
      key,
      {
        htm: 'POST',
        htu: `${base}/oauth/token`,
        iat: Math.floor(Date.now() / 1000),
        jti: `mtls-${Date.now()}`,
      },
      { alg: 'ES256' },
    );
    const answer = await token(asks('bound-dn'), agent(worker), { dpop: proof });
    expect(answer.status).toBe(200);
    expect(answer.body.token_type).toBe('DPoP');
    expect(decodeJwt(answer.body.access_token as string).cnf).toEqual({
      'x5t#S256': worker.x5t,
      jkt: key.jkt,
    });
  });

  it('token exchange keeps a certificate-bound subject token sender-constrained: bound to the acting client’s certificate', async () => {
    const DOWNSTREAM = 'https://ledger.example.com';
    const store = t.server.runtime.store;
    await t.addAudience(DOWNSTREAM);
    const serviceSecret = generateSecret();
    await store.createClient({
      id: 'service',
      name: 'a service that calls the ledger for its caller',
      secretDigest: digestSecret(serviceSecret),
      tokenTtl: null,
      audiences: [DOWNSTREAM],
      grantTokenExchange: [DOWNSTREAM],
    });
    await store.updateAudience(API, { resourceServerClientIds: ['service'] });
    await t.sync();
    const subject = await token(asks('bound-dn'), agent(worker));
    const exchange = {
      ...exchangeParams(
        { id: 'service', secret: serviceSecret },
        subject.body.access_token as string,
        DOWNSTREAM,
      ),
    };
    const without = await token(exchange, agent());
    expect([without.status, without.body]).toEqual([
      400,
      {
        error: 'invalid_request',
        error_description:
          'the subject_token is bound to a TLS client certificate: the acting client must ask with its own certificate',
      },
    ]);
    const exchanged = await token(exchange, agent(otherSubject));
    expect(exchanged.status).toBe(200);
    const claims = decodeJwt(exchanged.body.access_token as string);
    expect([claims.sub, claims.act, claims.cnf]).toEqual([
      'bound-dn',
      { sub: 'service' },
      { 'x5t#S256': otherSubject.x5t },
    ]);
  });

  it('introspection returns the cnf, to a resource server authenticated by its own certificate', async () => {
    await ensureAdminAudience(managementOf(t));
    const admin = adminAudienceUrl(t.config);
    await t.server.runtime.store.createClient({
      id: 'introspector',
      name: 'a resource server',
      secretDigest: null,
      authMethod: 'tls_client_auth',
      tlsClientAuth: { kind: 'san_dns', value: 'worker.example.com' },
      tokenTtl: null,
      audiences: [admin],
      scopes: { [admin]: ['tokens:introspect'] },
    });
    await t.sync();
    const issued = await token(asks('bound-dn'), agent(worker));
    const response = await fetch(`${base}/oauth/introspect`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        client_id: 'introspector',
        token: issued.body.access_token as string,
      }).toString(),
      dispatcher: agent(worker),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect([body.active, body.token_type, body.cnf]).toEqual([true, 'Bearer', { 'x5t#S256': worker.x5t }]);
  });

  it('a certificate client revokes its own token, authenticated by its certificate (RFC 7009)', async () => {
    const issued = await token(asks('bound-dn'), agent(worker));
    const revoke = (dispatcher: Agent) =>
      fetch(`${base}/oauth/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          client_id: 'bound-dn',
          token: issued.body.access_token as string,
        }).toString(),
        dispatcher,
      });
    const refused = await revoke(agent());
    expect([refused.status, await refused.json()]).toEqual([401, INVALID_CLIENT]);
    expect((await revoke(agent(worker))).status).toBe(200);
    const response = await fetch(`${base}/oauth/introspect`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        client_id: 'introspector',
        token: issued.body.access_token as string,
      }).toString(),
      dispatcher: agent(worker),
    });
    expect(await response.json()).toEqual({ active: false });
  });

  it('the admin API takes a certificate-bound token only with that certificate on the connection', async () => {
    await ensureAdminAudience(managementOf(t));
    const admin = adminAudienceUrl(t.config);
    await t.server.runtime.store.createClient({
      id: 'admin-by-cert',
      name: 'admin by certificate',
      secretDigest: null,
      authMethod: 'tls_client_auth',
      tlsClientAuth: { kind: 'san_uri', value: SPIFFE },
      certificateBoundAccessTokens: true,
      tokenTtl: null,
      audiences: [admin],
      scopes: { [admin]: ['clients:read'] },
    });
    await t.sync();
    const issued = await token({ ...asks('admin-by-cert'), audience: admin }, agent(worker));
    expect(issued.status).toBe(200);
    const call = async (dispatcher: Agent) => {
      const response = await fetch(`${base}/admin/v1/clients?limit=1`, {
        headers: { authorization: `Bearer ${issued.body.access_token as string}` },
        dispatcher,
      });
      return {
        status: response.status,
        challenge: response.headers.get('www-authenticate'),
        body: (await response.json()) as Record<string, unknown>,
      };
    };
    expect((await call(agent(worker))).status).toBe(200);
    for (const other of [agent(), agent(otherSubject)]) {
      const refused = await call(other);
      expect(refused.status).toBe(401);
      expect(refused.challenge).toContain(
        'Bearer error="invalid_token", error_description="the access token is bound to a TLS client certificate: present it with that certificate"',
      );
    }
  });
});

describe('TLS files reloaded', () => {
  it('SIGHUP takes a new server certificate; files that do not load keep the running ones', async () => {
    const replaced = await serverCert(serverRoot);
    const serial = async () =>
      new Promise<string>((resolve, reject) => {
        const req = httpsRequest(`${base}/healthz`, { ca: serverRoot.certPem, agent: false }, (res) => {
          resolve((res.socket as TLSSocket).getPeerX509Certificate()!.serialNumber);
          res.resume();
        });
        req.on('error', reject);
        req.end();
      });
    const before = await serial();
    writeFileSync(files['server.pem']!, replaced.certPem);
    writeFileSync(files['server-key.pem']!, replaced.keyPem);
    expect(t.server.reloadTls()).toBe(true);
    const after = await serial();
    expect(after).not.toBe(before);
    expect(after).toBe(new X509Certificate(replaced.certPem).serialNumber);
    writeFileSync(files['server-key.pem']!, 'not a key');
    expect(t.server.reloadTls()).toBe(false);
    expect(await serial()).toBe(after);
    writeFileSync(files['server-key.pem']!, replaced.keyPem);
  });

  it('new client CAs judge the certificates of connections opened before them too', async () => {
    // One kept-alive connection throughout.
    const connection = new Agent({
      connections: 1,
      connect: { ca: serverRoot.certPem, cert: worker.certPem, key: worker.keyPem },
    });
    expect((await token(asks('by-dn'), connection)).status).toBe(200);
    writeFileSync(files['client-ca.pem']!, untrustedRoot.certPem);
    expect(t.server.reloadTls()).toBe(true);
    const refused = await token(asks('by-dn'), connection);
    expect([refused.status, refused.body]).toEqual([401, INVALID_CLIENT]);
    expect((await latestAuditEvent(t, 'by-dn'))?.reason).toBe('invalid_client: mtls: chain not trusted');
    // A CA bundle that does not parse changes nothing.
    writeFileSync(files['client-ca.pem']!, 'no certificate here');
    expect(t.server.reloadTls()).toBe(false);
    expect((await token(asks('by-dn'), connection)).status).toBe(401);
    writeFileSync(files['client-ca.pem']!, root.certPem);
    expect(t.server.reloadTls()).toBe(true);
    expect((await token(asks('by-dn'), connection)).status).toBe(200);
    await connection.close();
  });
});
