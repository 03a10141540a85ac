/**
 * Workload identity federation at the token endpoint (INTERFACE.md, "Workload identity federation"): a client
 * with federated credentials gets its token with a platform's signed token as client_assertion, and client_id.
 *
 * Tokens shaped like the platforms' own (a Kubernetes projected service-account token, a GitHub Actions and a
 * GitLab CI OIDC token, a SPIFFE JWT-SVID), signed for real with jose, with the issuer's keys inline, at a
 * jwks_uri, or found by discovery, served by local HTTP servers (TESSERA_JWKS_ALLOW_PRIVATE=true); real
 * clients (openid-client and oauth4webapi with a client authentication of their own, curl); and every rule with
 * its exact answer and the reason the audit trail gives. Clients are provisioned through the store, each
 * credential made by the domain's field rules as the management layer makes them.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
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
import {
  DEFAULT_MAX_LIFETIME,
  JWT_BEARER,
  MAX_FEDERATED_CREDENTIALS,
  newFederatedCredentialId,
  validateCredentialName,
  validateFederatedAudience,
  validateIssuer,
  validateIssuerKeys,
  validateMaxLifetime,
  validateRequiredClaims,
  validateSubject,
  type ClaimValue,
  type FederatedCredential,
} from '../../src/domain/client-auth/index.js';
import {
  MAX_MAX_LIFETIME,
  MAX_REQUIRED_CLAIMS,
  MIN_MAX_LIFETIME,
} from '../../src/domain/client-auth/federation-rules.js';
import { testClock } from '../helpers/clock.js';
import { writeKeyClient } from '../helpers/key-client.js';
import {
  latestAuditEvent,
  NO_BLOCKING,
  postToken,
  startTestServer,
  type TestServer,
} from '../helpers/server.js';

const API = 'https://api.example.com';
const REFUSED = { error: 'invalid_client', error_description: 'client authentication failed' };
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

const K8S_ISSUER = 'https://kubernetes.default.svc.cluster.local';
const K8S_SUBJECT = 'system:serviceaccount:prod:billing';
const GITHUB_ISSUER = 'https://token.actions.githubusercontent.com';
const GITHUB_SUBJECT = 'repo:acme/billing:environment:production';

// --- signing keys and platforms ---

interface Signer {
  privateKey: CryptoKey;
  /** The public key as published: kid, alg, use. */
  jwk: JWK;
  alg: string;
}

async function signer(alg: string, kid: string): Promise<Signer> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' }, alg };
}

/** A JWT signed by `key`: its kid and alg in the header unless `header` says otherwise. */
function sign(key: Signer, claims: JWTPayload, header: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, typ: 'JWT', kid: key.jwk.kid, ...header })
    .sign(key.privateKey);
}

/**
 * A platform's issuer on a local server: `<url>/.well-known/openid-configuration` (OpenID Connect Discovery)
 * naming `<url>/keys`, its published key set; each counts its fetches. The test changes what it publishes,
 * what its metadata says, and whether it is up.
 */
class Platform {
  /** The keys it publishes. */
  published: JWK[] = [];
  fetches = { metadata: 0, keys: 0 };
  /** Answers every request with this status (503: down). */
  status: number | undefined;
  /** Replaces the metadata's issuer (undefined: its own) or leaves it out (null). */
  metadataIssuer: string | null | undefined;
  /** Replaces either answer altogether. */
  handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  maxAge = 3600;
  url = '';
  private readonly server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const prefix = new URL(this.url).pathname;
    if (path === `${prefix}/.well-known/openid-configuration`) this.fetches.metadata++;
    else if (path === `${prefix}/keys`) this.fetches.keys++;
    if (this.handler) return this.handler(req, res);
    if (this.status !== undefined) {
      res.writeHead(this.status, { 'content-type': 'text/plain' });
      return res.end('unavailable');
    }
    const json = (body: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': `max-age=${this.maxAge}` });
      res.end(JSON.stringify(body));
    };
    if (path === `${prefix}/.well-known/openid-configuration`)
      return json({
        ...(this.metadataIssuer === null ? {} : { issuer: this.metadataIssuer ?? this.url }),
        jwks_uri: this.jwksUri,
        response_types_supported: ['id_token'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
      });
    if (path === `${prefix}/keys`) return json({ keys: this.published });
    res.writeHead(404).end();
  });

  constructor(private readonly name: string) {}

  /** The issuer URL: the server's address and the platform's name as its path. */
  get issuer(): string {
    return this.url;
  }

  get jwksUri(): string {
    return `${this.url}/keys`;
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/${this.name}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

let platforms: Platform[] = [];
async function platform(name: string, ...keys: Signer[]): Promise<Platform> {
  const started = await new Platform(name).start();
  started.published = keys.map((k) => k.jwk);
  platforms.push(started);
  return started;
}

// --- the server, clients and credentials ---

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({ TESSERA_JWKS_ALLOW_PRIVATE: 'true', ...NO_BLOCKING });
  await t.addAudience(API);
});
afterAll(async () => {
  await t?.close();
  await Promise.all(platforms.map((p) => p.stop()));
  platforms = [];
});

interface CredentialInput {
  name?: string;
  issuer: string;
  jwks?: { keys: JWK[] };
  jwksUri?: string;
  subject: string;
  audience?: string;
  claims?: Record<string, ClaimValue>;
  maxLifetime?: number;
  once?: boolean;
}

/** A federated credential as the management layer writes it: every field through the domain's rules. */
function credential(input: CredentialInput, server = t): FederatedCredential {
  const at = new Date().toISOString();
  return {
    id: newFederatedCredentialId(),
    name: validateCredentialName(input.name ?? `credential ${randomUUID().slice(0, 8)}`),
    issuer: validateIssuer(input.issuer, false, server.url),
    ...validateIssuerKeys(input.jwks ?? null, input.jwksUri ?? null, false, true),
    subject: validateSubject(input.subject),
    // The default is the Tessera issuer URL, as management makes it.
    audience: validateFederatedAudience(input.audience ?? server.url),
    claims: validateRequiredClaims(input.claims ?? {}),
    maxLifetime: validateMaxLifetime(input.maxLifetime ?? DEFAULT_MAX_LIFETIME),
    once: input.once ?? false,
    createdAt: at,
    updatedAt: at,
  };
}

/** A client with these federated credentials (a private_key_jwt client without jwks or jwks_uri), granted API. */
async function federatedClient(credentials: FederatedCredential[], server = t): Promise<string> {
  const id = await writeKeyClient(server.server.runtime.store, {
    name: 'federated client',
    audiences: [API],
    federatedCredentials: credentials,
  });
  await server.sync();
  return id;
}

/** A token request with the platform's token as client_assertion, and client_id unless it is undefined. */
const withToken = (
  clientId: string | undefined,
  jwt: string,
  extra: Record<string, string> = {},
  server = t,
) =>
  postToken(server.url, {
    grant_type: 'client_credentials',
    ...(clientId === undefined ? {} : { client_id: clientId }),
    client_assertion_type: JWT_BEARER,
    client_assertion: jwt,
    audience: API,
    ...extra,
  });

/** The latest audit event of `id` (a client id as the trail records it). */
const latestEvent = (id: string, server = t) => latestAuditEvent(server, id);

/** A token for `id`: 200 with exactly the usual body, the access token the client's. */
async function expectIssued(
  answer: Awaited<ReturnType<typeof withToken>>,
  id: string,
  server = t,
): Promise<JWTPayload> {
  expect({ status: answer.status, body: answer.body }).toEqual({
    status: 200,
    body: { access_token: expect.stringMatching(JWT), token_type: 'Bearer', expires_in: 1800 },
  });
  expect(answer.headers.get('cache-control')).toBe('no-store');
  const claims = decodeJwt(answer.body.access_token as string);
  // The token is the client's, as for any other method (INTERFACE.md).
  expect(claims).toMatchObject({ iss: server.url, sub: id, client_id: id, aud: API });
  return claims;
}

/** The audit trail's token.issued event of `id` names the credential and the platform's subject. */
async function expectIssuedBy(id: string, used: FederatedCredential, server = t): Promise<void> {
  const event = await latestEvent(id, server);
  expect({ type: event?.type, reason: event?.reason }).toEqual({
    type: 'token.issued',
    reason: `federated ${used.id} sub ${used.subject}`,
  });
}

/** Exactly 401 invalid_client, with its challenge; the audit trail's reason for `id`. */
async function expectRefused(
  id: string | undefined,
  jwt: string,
  reason: string,
  options: { server?: TestServer; auditId?: string; extra?: Record<string, string> } = {},
): Promise<void> {
  const server = options.server ?? t;
  const answer = await withToken(id, jwt, options.extra, server);
  expect({ status: answer.status, body: answer.body }).toEqual({ status: 401, body: REFUSED });
  expect(answer.headers.get('www-authenticate')).toBe('Basic realm="tessera"');
  expect(answer.headers.get('cache-control')).toBe('no-store');
  const event = await latestEvent(options.auditId ?? id!, server);
  expect({ type: event?.type, reason: event?.reason }).toEqual({
    type: 'token.refused',
    reason: `invalid_client: ${reason}`,
  });
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

// --- the platforms' tokens, as they make them ---

/** A Kubernetes projected service-account token (kubelet's TokenRequest, audience Tessera, 1 hour). */
function kubernetesClaims(audience: string, overrides: JWTPayload = {}): JWTPayload {
  const iat = nowSeconds();
  return {
    aud: [audience],
    exp: iat + 3600,
    iat,
    iss: K8S_ISSUER,
    jti: randomUUID(),
    'kubernetes.io': {
      namespace: 'prod',
      node: { name: 'node-a1', uid: randomUUID() },
      pod: { name: 'billing-7d9c8b5f4-x2x9q', uid: randomUUID() },
      serviceaccount: { name: 'billing', uid: randomUUID() },
    },
    nbf: iat,
    sub: K8S_SUBJECT,
    ...overrides,
  };
}

/** A GitHub Actions OIDC token of a job in the production environment of acme/billing's main branch. */
function githubClaims(audience: string, overrides: JWTPayload = {}): JWTPayload {
  const iat = nowSeconds();
  return {
    jti: randomUUID(),
    sub: GITHUB_SUBJECT,
    environment: 'production',
    aud: audience,
    ref: 'refs/heads/main',
    sha: 'd6e2a3b1f0c9e8d7c6b5a4f3e2d1c0b9a8f7e6d5',
    repository: 'acme/billing',
    repository_owner: 'acme',
    repository_owner_id: '1700001',
    run_id: '9123456780',
    run_number: '42',
    run_attempt: '1',
    repository_visibility: 'private',
    repository_id: '700000001',
    actor_id: '1700002',
    actor: 'octocat',
    workflow: 'deploy',
    head_ref: '',
    base_ref: '',
    event_name: 'push',
    ref_protected: 'true',
    ref_type: 'branch',
    workflow_ref: 'acme/billing/.github/workflows/deploy.yml@refs/heads/main',
    workflow_sha: 'd6e2a3b1f0c9e8d7c6b5a4f3e2d1c0b9a8f7e6d5',
    job_workflow_ref: 'acme/billing/.github/workflows/deploy.yml@refs/heads/main',
    job_workflow_sha: 'd6e2a3b1f0c9e8d7c6b5a4f3e2d1c0b9a8f7e6d5',
    runner_environment: 'github-hosted',
    iss: GITHUB_ISSUER,
    nbf: iat - 5,
    exp: iat + 300,
    iat,
    ...overrides,
  };
}

/** A GitLab CI `id_tokens` token of a job on acme/billing's protected main branch. */
function gitlabClaims(issuer: string, audience: string, overrides: JWTPayload = {}): JWTPayload {
  const iat = nowSeconds();
  return {
    namespace_id: '72',
    namespace_path: 'acme',
    project_id: '20',
    project_path: 'acme/billing',
    user_id: '5',
    user_login: 'deployer',
    user_email: 'deployer@acme.example',
    user_access_level: 'maintainer',
    pipeline_id: '1234',
    pipeline_source: 'push',
    job_id: '5678',
    ref: 'main',
    ref_type: 'branch',
    ref_path: 'refs/heads/main',
    ref_protected: 'true',
    environment: 'production',
    environment_protected: 'true',
    deployment_tier: 'production',
    runner_id: 27,
    runner_environment: 'gitlab-hosted',
    sha: '714a629c0b401fdce83e847fc9589983fc6f46bc',
    project_visibility: 'private',
    ci_config_ref_uri: 'gitlab.example.com/acme/billing//.gitlab-ci.yml@refs/heads/main',
    ci_config_sha: '714a629c0b401fdce83e847fc9589983fc6f46bc',
    jti: randomUUID(),
    iat,
    nbf: iat - 5,
    exp: iat + 300,
    iss: issuer,
    sub: 'project_path:acme/billing:ref_type:branch:ref:main',
    aud: audience,
    ...overrides,
  };
}

/** A SPIFFE JWT-SVID (SPIRE, with its OIDC discovery provider as issuer): no jti, a short life. */
function svidClaims(issuer: string, audience: string, overrides: JWTPayload = {}): JWTPayload {
  const iat = nowSeconds();
  return {
    aud: [audience],
    exp: iat + 300,
    iat,
    iss: issuer,
    sub: 'spiffe://prod.acme.example/ns/billing/sa/billing',
    ...overrides,
  };
}

describe('federation: real platforms, each with its token as it is', () => {
  it('a Kubernetes projected service-account token, the cluster keys inline (kubectl get --raw /openid/v1/jwks)', async () => {
    const key = await signer('RS256', 'Dx8W1eb3pQ-z2lH0Zr6s0w8k8dGx2k5N1VvZb3wq0aA');
    const used = credential({
      name: 'prod cluster',
      issuer: K8S_ISSUER,
      jwks: { keys: [key.jwk] },
      subject: K8S_SUBJECT,
    });
    const id = await federatedClient([used]);
    const jwt = await sign(key, kubernetesClaims(t.url), { typ: undefined });
    await expectIssued(await withToken(id, jwt), id);
    await expectIssuedBy(id, used);
  });

  it('a GitHub Actions OIDC token, its keys at a jwks_uri, repository, ref and environment required', async () => {
    const key = await signer('RS256', 'github-1');
    const github = await platform('github', key);
    const used = credential({
      name: 'deploy from main',
      issuer: GITHUB_ISSUER,
      jwksUri: github.jwksUri,
      subject: GITHUB_SUBJECT,
      claims: { repository: 'acme/billing', ref: 'refs/heads/main', environment: 'production' },
      maxLifetime: 600,
    });
    const id = await federatedClient([used]);
    await expectIssued(await withToken(id, await sign(key, githubClaims(t.url))), id);
    await expectIssuedBy(id, used);
    // Another branch of the same repository, another repository's environment of the same name.
    await expectRefused(
      id,
      await sign(key, githubClaims(t.url, { ref: 'refs/heads/feature' })),
      'federated: claim ref does not match',
    );
    await expectRefused(
      id,
      await sign(key, githubClaims(t.url, { repository: 'acme/billing-fork' })),
      'federated: claim repository does not match',
    );
    expect(github.fetches).toEqual({ metadata: 0, keys: 1 });
  });

  it('a GitLab CI id_token, its keys found by discovery; claims compared strictly, type included', async () => {
    const key = await signer('RS256', 'gitlab-1');
    const gitlab = await platform('gitlab', key);
    const used = credential({
      issuer: gitlab.issuer,
      subject: 'project_path:acme/billing:ref_type:branch:ref:main',
      claims: { project_path: 'acme/billing', ref_protected: 'true', runner_id: 27 },
    });
    const id = await federatedClient([used]);
    for (let i = 0; i < 3; i++)
      await expectIssued(await withToken(id, await sign(key, gitlabClaims(gitlab.issuer, t.url))), id);
    await expectIssuedBy(id, used);
    // The metadata, then its jwks_uri: once each for the three tokens (cached for the key set's max-age).
    expect(gitlab.fetches).toEqual({ metadata: 1, keys: 1 });
    // GitLab sends "true" as a string: a boolean true is another value, and so is the number as a string.
    await expectRefused(
      id,
      await sign(key, gitlabClaims(gitlab.issuer, t.url, { ref_protected: true })),
      'federated: claim ref_protected does not match',
    );
    await expectRefused(
      id,
      await sign(key, gitlabClaims(gitlab.issuer, t.url, { runner_id: '27' })),
      'federated: claim runner_id does not match',
    );
  });

  it('a SPIFFE JWT-SVID (ES256, aud a list, no jti), its keys at the SPIRE discovery provider', async () => {
    const key = await signer('ES256', 'spire-1');
    const spire = await platform('spire', key);
    const used = credential({
      issuer: spire.issuer,
      jwksUri: spire.jwksUri,
      subject: 'spiffe://prod.acme.example/ns/billing/sa/billing',
      audience: 'https://auth.acme.example',
      maxLifetime: 300,
    });
    const id = await federatedClient([used]);
    const jwt = await sign(key, svidClaims(spire.issuer, 'https://auth.acme.example'), { typ: 'JWT' });
    await expectIssued(await withToken(id, jwt), id);
    await expectIssuedBy(id, used);
  });
});

describe('federation: real clients, unchanged but for how they authenticate', () => {
  let key: Signer;
  let id: string;
  beforeAll(async () => {
    key = await signer('RS256', 'clients');
    id = await federatedClient([
      credential({ issuer: K8S_ISSUER, jwks: { keys: [key.jwk] }, subject: K8S_SUBJECT }),
    ]);
  });
  /** What a pod reads from its projected volume, e.g. /var/run/secrets/tokens/tessera. */
  const projected = () => sign(key, kubernetesClaims(t.url));

  it("openid-client v6: a ClientAuth of its own sends client_id and the platform's token", async () => {
    const token = await projected();
    const federated: client.ClientAuth = (_as, metadata, body) => {
      body.set('client_id', metadata.client_id);
      body.set('client_assertion_type', JWT_BEARER);
      body.set('client_assertion', token);
    };
    const config = await client.discovery(new URL(t.url), id, {}, federated, {
      execute: [client.allowInsecureRequests],
    });
    for (let i = 0; i < 2; i++) {
      const answer = await client.clientCredentialsGrant(config, { audience: API });
      expect(answer.token_type).toBe('bearer');
      expect(decodeJwt(answer.access_token)).toMatchObject({ sub: id, client_id: id, aud: API });
    }
  });

  it('oauth4webapi: the same, as its ClientAuth', async () => {
    const token = await projected();
    const issuer = new URL(t.url);
    const insecure = { [oauth.allowInsecureRequests]: true } as const;
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
    const federated: oauth.ClientAuth = (_as, c, body) => {
      body.set('client_id', c.client_id);
      body.set('client_assertion_type', JWT_BEARER);
      body.set('client_assertion', token);
    };
    const response = await oauth.clientCredentialsGrantRequest(
      as,
      { client_id: id },
      federated,
      new URLSearchParams({ audience: API }),
      insecure,
    );
    const answer = await oauth.processClientCredentialsResponse(as, { client_id: id }, response);
    expect(decodeJwt(answer.access_token)).toMatchObject({ sub: id, client_id: id, aud: API });
  });

  it('curl, as a pod runs it: -d each parameter, the token read from its file', async (ctx) => {
    const token = await projected();
    const args = [
      '-sS',
      '--noproxy',
      '*',
      '-w',
      '\n%{http_code}',
      `${t.url}/oauth/token`,
      '-d',
      'grant_type=client_credentials',
      '-d',
      `client_id=${id}`,
      '--data-urlencode',
      `client_assertion_type=${JWT_BEARER}`,
      '-d',
      `client_assertion=${token}`,
      '--data-urlencode',
      `audience=${API}`,
    ];
    const run = await new Promise<{ error: Error | null; stdout: string }>((resolve) =>
      execFile('curl', args, { timeout: 10_000 }, (error, stdout) => resolve({ error, stdout })),
    );
    if ((run.error as NodeJS.ErrnoException | null)?.code === 'ENOENT') ctx.skip('no curl on this machine');
    expect(run.error).toBeNull();
    const [body, status] = run.stdout.split('\n');
    expect(status).toBe('200');
    const answer = JSON.parse(body!) as Record<string, unknown>;
    expect(answer).toEqual({
      access_token: expect.stringMatching(JWT),
      token_type: 'Bearer',
      expires_in: 1800,
    });
    expect(decodeJwt(answer.access_token as string)).toMatchObject({ sub: id, client_id: id, aud: API });
  });

  it('a JSON body (Auth0 style) works the same', async () => {
    const answer = await postToken(
      t.url,
      {
        grant_type: 'client_credentials',
        client_id: id,
        client_assertion_type: JWT_BEARER,
        client_assertion: await projected(),
        audience: API,
      },
      { json: true },
    );
    await expectIssued(answer, id);
  });
});

describe('federation: the rules, each with its exact answer and its reason', () => {
  let key: Signer;
  let used: FederatedCredential;
  let id: string;
  const k8s = (overrides: JWTPayload = {}) => sign(key, kubernetesClaims(t.url, overrides));

  beforeAll(async () => {
    key = await signer('RS256', 'rules');
    used = credential({
      issuer: K8S_ISSUER,
      jwks: { keys: [key.jwk] },
      subject: K8S_SUBJECT,
      claims: { environment: 'prod' },
    });
    id = await federatedClient([used]);
  });
  const ok = (overrides: JWTPayload = {}) => k8s({ environment: 'prod', ...overrides });

  it('the same token authenticates many times (a platform token is reused until it is renewed)', async () => {
    const jwt = await ok();
    for (let i = 0; i < 5; i++) await expectIssued(await withToken(id, jwt), id);
    await expectIssuedBy(id, used);
  });

  it('every asymmetric algorithm is accepted: RS256, ES256, ES384, PS256, EdDSA (and Ed25519)', async () => {
    const keys = await Promise.all(
      ['RS256', 'ES256', 'ES384', 'PS256', 'EdDSA'].map((alg) => signer(alg, `alg-${alg}`)),
    );
    const ed25519 = await signer('Ed25519', 'alg-Ed25519');
    const all = credential({
      issuer: K8S_ISSUER,
      jwks: { keys: [...keys.map((k) => k.jwk), ed25519.jwk] },
      subject: K8S_SUBJECT,
    });
    const multi = await federatedClient([all]);
    for (const k of keys)
      await expectIssued(await withToken(multi, await sign(k, kubernetesClaims(t.url))), multi);
    await expectIssued(await withToken(multi, await sign(ed25519, kubernetesClaims(t.url))), multi);
  });

  it('alg none and HS256 (the public key as its secret) are refused', async () => {
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const unsigned = `${b64({ alg: 'none', typ: 'JWT' })}.${b64(kubernetesClaims(t.url, { environment: 'prod' }))}.`;
    await expectRefused(id, unsigned, 'federated: algorithm not allowed');
    const forged = await new SignJWT(kubernetesClaims(t.url, { environment: 'prod' }))
      .setProtectedHeader({ alg: 'HS256', kid: 'rules' })
      .sign(new TextEncoder().encode(JSON.stringify(key.jwk)));
    await expectRefused(id, forged, 'federated: algorithm not allowed');
  });

  it('an issuer the client does not trust', async () => {
    await expectRefused(
      id,
      await ok({ iss: 'https://kubernetes.other-cluster.example' }),
      'federated: issuer not trusted by this client',
    );
  });

  it('a kid the issuer does not have; a signature by another key with its kid', async () => {
    const stranger = await signer('RS256', 'stranger');
    await expectRefused(
      id,
      await sign(stranger, kubernetesClaims(t.url, { environment: 'prod' })),
      'federated: unknown kid',
    );
    const impostor = await signer('RS256', 'rules');
    await expectRefused(
      id,
      await sign(impostor, kubernetesClaims(t.url, { environment: 'prod' })),
      'federated: signature does not verify',
    );
  });

  it('subject: exactly the credential`s', async () => {
    await expectRefused(
      id,
      await ok({ sub: 'system:serviceaccount:prod:billing-admin' }),
      'federated: subject does not match',
    );
    await expectRefused(id, await ok({ sub: undefined }), 'federated: subject does not match');
  });

  it('audience: equal, or a list containing it; anything else refused', async () => {
    await expectIssued(await withToken(id, await ok({ aud: t.url })), id);
    await expectIssued(await withToken(id, await ok({ aud: ['https://vault.example.com', t.url] })), id);
    await expectRefused(
      id,
      await ok({ aud: 'https://vault.example.com' }),
      'federated: audience does not match',
    );
    await expectRefused(id, await ok({ aud: [`${t.url}/`] }), 'federated: audience does not match');
    await expectRefused(id, await ok({ aud: undefined }), 'federated: audience does not match');
  });

  it('claims: each listed one equal, present, of the same type', async () => {
    await expectRefused(id, await k8s(), 'federated: claim environment does not match');
    await expectRefused(
      id,
      await k8s({ environment: 'staging' }),
      'federated: claim environment does not match',
    );
    await expectRefused(
      id,
      await k8s({ environment: ['prod'] }),
      'federated: claim environment does not match',
    );
  });

  it('exp: required and in the future, with 60 s of skew', async () => {
    const now = nowSeconds();
    await expectIssued(await withToken(id, await ok({ iat: now - 600, nbf: now - 600, exp: now - 30 })), id);
    await expectRefused(
      id,
      await ok({ iat: now - 600, nbf: now - 600, exp: now - 90 }),
      'federated: token expired',
    );
    await expectRefused(id, await ok({ exp: undefined }), 'federated: token has no exp');
    await expectRefused(
      id,
      await ok({ exp: `${now + 60}` as unknown as number }),
      'federated: token exp is not a number',
    );
  });

  it('nbf and iat: not in the future, with 60 s of skew', async () => {
    const now = nowSeconds();
    await expectIssued(await withToken(id, await ok({ nbf: now + 30, iat: now + 30 })), id);
    await expectRefused(id, await ok({ nbf: now + 120 }), 'federated: not yet valid (nbf)');
    await expectRefused(
      id,
      await ok({ nbf: now, iat: now + 120, exp: now + 600 }),
      'federated: issued in the future (iat)',
    );
  });

  it('lifetime: exp − iat, or exp − now without iat, at most max_lifetime (1 hour by default)', async () => {
    const now = nowSeconds();
    expect(used.maxLifetime).toBe(3600);
    await expectIssued(await withToken(id, await ok({ iat: now, exp: now + 3600 })), id);
    await expectRefused(id, await ok({ iat: now, exp: now + 3601 }), 'federated: lifetime over max_lifetime');
    // Issued a while ago: its life is still exp − iat.
    await expectRefused(
      id,
      await ok({ iat: now - 3000, nbf: now - 3000, exp: now + 700 }),
      'federated: lifetime over max_lifetime',
    );
    await expectIssued(await withToken(id, await ok({ iat: undefined, exp: now + 3500 })), id);
    await expectRefused(
      id,
      await ok({ iat: undefined, exp: now + 3700 }),
      'federated: lifetime over max_lifetime',
    );
  });

  it('max_lifetime at its bounds: 24 hours accepted by a credential that allows it, 1 minute refused beyond it', async () => {
    // Every token issued at `now`: a lifetime is exp - iat, whatever second the token is signed in.
    const now = nowSeconds();
    const day = await federatedClient([
      credential({
        issuer: K8S_ISSUER,
        jwks: { keys: [key.jwk] },
        subject: K8S_SUBJECT,
        maxLifetime: MAX_MAX_LIFETIME,
      }),
    ]);
    await expectIssued(
      await withToken(day, await k8s({ iat: now, nbf: now, exp: now + MAX_MAX_LIFETIME })),
      day,
    );
    const minute = await federatedClient([
      credential({
        issuer: K8S_ISSUER,
        jwks: { keys: [key.jwk] },
        subject: K8S_SUBJECT,
        maxLifetime: MIN_MAX_LIFETIME,
      }),
    ]);
    await expectIssued(
      await withToken(minute, await k8s({ iat: now, nbf: now, exp: now + MIN_MAX_LIFETIME })),
      minute,
    );
    await expectRefused(
      minute,
      await k8s({ iat: now, nbf: now, exp: now + MIN_MAX_LIFETIME + 1 }),
      'federated: lifetime over max_lifetime',
    );
  });

  it(`${MAX_REQUIRED_CLAIMS} required claims, every one checked`, async () => {
    const claims = Object.fromEntries(
      Array.from({ length: MAX_REQUIRED_CLAIMS }, (_, i) => [
        `c${i}`,
        i % 3 === 0 ? i : i % 3 === 1 ? `v${i}` : true,
      ]),
    );
    const many = await federatedClient([
      credential({ issuer: K8S_ISSUER, jwks: { keys: [key.jwk] }, subject: K8S_SUBJECT, claims }),
    ]);
    await expectIssued(await withToken(many, await k8s(claims)), many);
    await expectRefused(many, await k8s({ ...claims, c19: false }), 'federated: claim c19 does not match');
  });

  it('several credentials of one issuer (other subjects): the one whose subject matches is used', async () => {
    const subjects = ['system:serviceaccount:prod:billing', 'system:serviceaccount:prod:invoicing'];
    const both = subjects.map((subject) =>
      credential({ issuer: K8S_ISSUER, jwks: { keys: [key.jwk] }, subject }),
    );
    const shared = await federatedClient(both);
    for (const [i, subject] of subjects.entries()) {
      await expectIssued(await withToken(shared, await k8s({ sub: subject })), shared);
      await expectIssuedBy(shared, both[i]!);
    }
    await expectRefused(
      shared,
      await k8s({ sub: 'system:serviceaccount:prod:other' }),
      'federated: subject does not match',
    );
  });

  it('of several credentials of one issuer, the refusal gives the reason of the closest', async () => {
    const strict = [
      credential({ issuer: K8S_ISSUER, jwks: { keys: [key.jwk] }, subject: 'system:serviceaccount:prod:a' }),
      credential({
        issuer: K8S_ISSUER,
        jwks: { keys: [key.jwk] },
        subject: K8S_SUBJECT,
        claims: { environment: 'prod' },
      }),
    ];
    const client2 = await federatedClient(strict);
    await expectRefused(
      client2,
      await k8s({ environment: 'dev' }),
      'federated: claim environment does not match',
    );
  });

  it(`${MAX_FEDERATED_CREDENTIALS} credentials: the last one's issuer still found`, async () => {
    const others = Array.from({ length: MAX_FEDERATED_CREDENTIALS - 1 }, (_, i) =>
      credential({
        issuer: `https://issuer-${i}.example.com`,
        jwks: { keys: [key.jwk] },
        subject: K8S_SUBJECT,
      }),
    );
    const last = credential({ issuer: K8S_ISSUER, jwks: { keys: [key.jwk] }, subject: K8S_SUBJECT });
    const full = await federatedClient([...others, last]);
    await expectIssued(await withToken(full, await k8s()), full);
    await expectIssuedBy(full, last);
  });

  it('once: the jti is required, and a token is good once', async () => {
    const single = credential({
      issuer: K8S_ISSUER,
      jwks: { keys: [key.jwk] },
      subject: K8S_SUBJECT,
      once: true,
    });
    const onceClient = await federatedClient([single]);
    const jwt = await k8s();
    await expectIssued(await withToken(onceClient, jwt), onceClient);
    await expectIssuedBy(onceClient, single);
    await expectRefused(onceClient, jwt, 'federated: token replayed');
    await expectRefused(onceClient, await k8s({ jti: undefined }), 'federated: jti required');
    await expectRefused(onceClient, await k8s({ jti: '' }), 'federated: jti required');
    await expectRefused(onceClient, await k8s({ jti: 'x'.repeat(513) }), 'federated: jti required');
  });

  it('once: a token that fails a check records nothing; the good one with the same jti is then accepted', async () => {
    const single = credential({
      issuer: K8S_ISSUER,
      jwks: { keys: [key.jwk] },
      subject: K8S_SUBJECT,
      once: true,
    });
    const onceClient = await federatedClient([single]);
    const jti = randomUUID();
    const impostor = await signer('RS256', 'rules');
    await expectRefused(
      onceClient,
      await sign(impostor, kubernetesClaims(t.url, { jti })),
      'federated: signature does not verify',
    );
    await expectRefused(
      onceClient,
      await k8s({ jti, sub: 'system:serviceaccount:prod:x' }),
      'federated: subject does not match',
    );
    await expectIssued(await withToken(onceClient, await k8s({ jti })), onceClient);
  });

  it('once: its jtis are the client and issuer`s own, apart from another credential`s', async () => {
    const otherKey = await signer('ES256', 'other-platform');
    const a = credential({ issuer: K8S_ISSUER, jwks: { keys: [key.jwk] }, subject: K8S_SUBJECT, once: true });
    const b = credential({
      issuer: 'https://kubernetes.staging.example',
      jwks: { keys: [otherKey.jwk] },
      subject: K8S_SUBJECT,
      once: true,
    });
    const two = await federatedClient([a, b]);
    const jti = randomUUID();
    await expectIssued(await withToken(two, await k8s({ jti })), two);
    await expectIssued(
      await withToken(
        two,
        await sign(otherKey, kubernetesClaims(t.url, { jti, iss: 'https://kubernetes.staging.example' })),
      ),
      two,
    );
    await expectIssuedBy(two, b);
  });

  it('client_id is required: without it the iss is taken for the client id', async () => {
    // A platform URL is no client id: unknown, and the trail records no id for it.
    await expectRefused(undefined, await ok(), 'unknown client', { auditId: '(not a client id)' });
    // A token whose iss is the federated client's own id: that is private_key_jwt's way, refused here.
    const ownIss = await ok({ iss: id });
    await expectRefused(undefined, ownIss, 'federated: client_id is required', { auditId: id });
  });

  it('client_id other than the iss: only a federated client accepts it', async () => {
    const jwt = await ok();
    const secretClient = await t.createClient([API]);
    await expectRefused(secretClient.id, jwt, 'client authenticates with a secret, not private_key_jwt');
    const keyClient = await writeKeyClient(t.server.runtime.store, {
      name: 'own keys',
      audiences: [API],
      jwks: { keys: [key.jwk] },
    });
    await t.sync();
    await expectRefused(keyClient, jwt, 'client_id is not the client_assertion iss');
    await expectRefused('no-such-client', jwt, 'unknown client');
  });

  it('a client with no credential yet gets no token; a disabled client neither', async () => {
    const empty = await federatedClient([]);
    await expectRefused(empty, await ok(), 'federated: client has no federated credentials');
    const disabled = await federatedClient([
      credential({ issuer: K8S_ISSUER, jwks: { keys: [key.jwk] }, subject: K8S_SUBJECT }),
    ]);
    await t.server.runtime.store.updateClient(disabled, { enabled: false });
    await t.sync();
    await expectRefused(disabled, await ok(), 'client is disabled');
  });

  it('a credential removed, or changed, is refused at the next request', async () => {
    const kept = credential({
      issuer: 'https://kubernetes.staging.example',
      jwks: { keys: [key.jwk] },
      subject: K8S_SUBJECT,
    });
    const changing = await federatedClient([used, kept]);
    await expectIssued(await withToken(changing, await ok()), changing);
    await t.server.runtime.store.updateClient(changing, { federatedCredentials: [kept] });
    await t.sync();
    await expectRefused(changing, await ok(), 'federated: issuer not trusted by this client');
    await t.server.runtime.store.updateClient(changing, {
      federatedCredentials: [kept, { ...used, subject: 'system:serviceaccount:prod:other' }],
    });
    await t.sync();
    await expectRefused(changing, await ok(), 'federated: subject does not match');
  });
});

describe('federation: the issuer keys', () => {
  const claimsFor = (issuer: string, overrides: JWTPayload = {}) =>
    kubernetesClaims(t.url, { iss: issuer, ...overrides });

  it('checked in memory first: a token that cannot match costs no fetch', async () => {
    const key = await signer('RS256', 'memory');
    const host = await platform('memory', key);
    const id = await federatedClient([
      credential({ issuer: host.issuer, jwksUri: host.jwksUri, subject: K8S_SUBJECT }),
    ]);
    await expectRefused(
      id,
      await sign(key, claimsFor(host.issuer, { sub: 'nobody' })),
      'federated: subject does not match',
    );
    await expectRefused(
      id,
      await sign(key, claimsFor(host.issuer, { exp: nowSeconds() - 600 })),
      'federated: token expired',
    );
    await expectRefused(
      id,
      await sign(key, claimsFor('https://elsewhere.example')),
      'federated: issuer not trusted by this client',
    );
    expect(host.fetches).toEqual({ metadata: 0, keys: 0 });
    await expectIssued(await withToken(id, await sign(key, claimsFor(host.issuer))), id);
    expect(host.fetches).toEqual({ metadata: 0, keys: 1 });
  });

  it("each issuer's keys verify its own tokens only", async () => {
    const a = await signer('RS256', 'key-a');
    const b = await signer('RS256', 'key-b');
    const hostA = await platform('issuer-a', a);
    const hostB = await platform('issuer-b', b);
    const credentials = [
      credential({ issuer: hostA.issuer, jwksUri: hostA.jwksUri, subject: K8S_SUBJECT }),
      credential({ issuer: hostB.issuer, jwks: { keys: [b.jwk] }, subject: K8S_SUBJECT }),
      credential({ issuer: 'https://inline-c.example', jwks: { keys: [a.jwk] }, subject: 'only-c' }),
    ];
    const id = await federatedClient(credentials);
    await expectIssued(await withToken(id, await sign(a, claimsFor(hostA.issuer))), id);
    await expectIssued(await withToken(id, await sign(b, claimsFor(hostB.issuer))), id);
    // A's key, A's kid, B's iss: B's keys do not have it.
    await expectRefused(id, await sign(a, claimsFor(hostB.issuer)), 'federated: unknown kid');
    // A's key under B's kid: B's key does not verify it.
    await expectRefused(
      id,
      await sign(a, claimsFor(hostB.issuer), { kid: 'key-b' }),
      'federated: signature does not verify',
    );
    // B's key, B's kid, A's iss: A's published set does not have it, even after the refetch it makes.
    await expectRefused(id, await sign(b, claimsFor(hostA.issuer)), 'federated: unknown kid');
    expect(hostA.fetches.keys).toBe(2);
  });

  it('two issuers publishing at the same URL are cached apart', async () => {
    const key = await signer('ES256', 'same-url');
    const host = await platform('same-url', key);
    const id = await federatedClient([
      credential({ issuer: 'https://one.example', jwksUri: host.jwksUri, subject: K8S_SUBJECT }),
      credential({ issuer: 'https://two.example', jwksUri: host.jwksUri, subject: K8S_SUBJECT }),
    ]);
    for (const issuer of ['https://one.example', 'https://two.example', 'https://one.example'])
      await expectIssued(await withToken(id, await sign(key, claimsFor(issuer))), id);
    expect(host.fetches.keys).toBe(2);
  });

  it('an unknown kid refetches at once (a rotated key works), then not again within the minute', async () => {
    const old = await signer('RS256', 'old');
    const rotated = await signer('RS256', 'rotated');
    for (const where of ['jwks_uri', 'discovery'] as const) {
      const host = await platform(`rotate-${where}`, old);
      const id = await federatedClient([
        credential({
          issuer: host.issuer,
          ...(where === 'jwks_uri' ? { jwksUri: host.jwksUri } : {}),
          subject: K8S_SUBJECT,
        }),
      ]);
      await expectIssued(await withToken(id, await sign(old, claimsFor(host.issuer))), id);
      host.published = [old.jwk, rotated.jwk];
      await expectIssued(await withToken(id, await sign(rotated, claimsFor(host.issuer))), id);
      const unknown = await signer('RS256', 'unknown');
      await expectRefused(id, await sign(unknown, claimsFor(host.issuer)), 'federated: unknown kid');
      const discovery = where === 'discovery' ? 2 : 0;
      expect(host.fetches).toEqual({ metadata: discovery, keys: 2 });
    }
  });

  it('an issuer that is down: refused while it has never answered, and fetched at most once a minute', async () => {
    const key = await signer('RS256', 'down');
    const host = await platform('down', key);
    host.status = 503;
    const id = await federatedClient([
      credential({ issuer: host.issuer, jwksUri: host.jwksUri, subject: K8S_SUBJECT }),
    ]);
    await expectRefused(
      id,
      await sign(key, claimsFor(host.issuer)),
      'federated: issuer keys unavailable: answered 503',
    );
    await expectRefused(
      id,
      await sign(key, claimsFor(host.issuer)),
      'federated: issuer keys unavailable: answered 503',
    );
    expect(host.fetches.keys).toBe(1);
  });

  it('discovery: the metadata must name this issuer and a jwks_uri, within the same guard', async () => {
    const key = await signer('RS256', 'meta');
    const cases: [string, (host: Platform) => void, string][] = [
      [
        'another issuer',
        (host) => (host.metadataIssuer = 'https://accounts.evil.example'),
        'discovery: the metadata\'s issuer is "https://accounts.evil.example", not this issuer',
      ],
      [
        'no issuer',
        (host) => (host.metadataIssuer = null),
        "discovery: the metadata's issuer is missing, not this issuer",
      ],
      [
        'no jwks_uri',
        (host) =>
          (host.handler = (_req, res) => {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ issuer: host.issuer }));
          }),
        'discovery: the metadata has no jwks_uri',
      ],
      ['not found', (host) => (host.status = 404), 'discovery: answered 404'],
      [
        'a redirect (not followed)',
        (host) =>
          (host.handler = (_req, res) => {
            res.writeHead(302, { location: 'https://accounts.google.com/.well-known/openid-configuration' });
            res.end();
          }),
        'discovery: answered 302',
      ],
      [
        'an answer of 100 KiB',
        (host) =>
          (host.handler = (_req, res) => {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ issuer: host.issuer, padding: 'x'.repeat(100 * 1024) }));
          }),
        'discovery: answer over 65536 bytes',
      ],
    ];
    for (const [name, breakIt, why] of cases) {
      const host = await platform(`meta-${name.replace(/\W+/g, '-')}`, key);
      breakIt(host);
      const id = await federatedClient([credential({ issuer: host.issuer, subject: K8S_SUBJECT })]);
      await expectRefused(
        id,
        await sign(key, claimsFor(host.issuer)),
        `federated: issuer keys unavailable: ${why}`,
      );
      expect(host.fetches.keys, name).toBe(0);
    }
  });

  it('a jwks_uri that redirects is not followed', async () => {
    const key = await signer('RS256', 'redirect');
    const host = await platform('redirect', key);
    host.handler = (_req, res) => {
      res.writeHead(301, { location: 'http://169.254.169.254/latest/meta-data/' });
      res.end();
    };
    const id = await federatedClient([
      credential({ issuer: host.issuer, jwksUri: host.jwksUri, subject: K8S_SUBJECT }),
    ]);
    await expectRefused(
      id,
      await sign(key, claimsFor(host.issuer)),
      'federated: issuer keys unavailable: answered 301',
    );
  });

  it('metrics: key fetches and failures, by issuer', async () => {
    const key = await signer('RS256', 'metrics');
    const host = await platform('metrics', key);
    const id = await federatedClient([credential({ issuer: host.issuer, subject: K8S_SUBJECT })]);
    await expectIssued(await withToken(id, await sign(key, claimsFor(host.issuer))), id);
    const broken = await platform('metrics-broken', key);
    broken.status = 500;
    const other = await federatedClient([
      credential({ issuer: broken.issuer, jwksUri: broken.jwksUri, subject: K8S_SUBJECT }),
    ]);
    await expectRefused(
      other,
      await sign(key, claimsFor(broken.issuer)),
      'federated: issuer keys unavailable: answered 500',
    );
    const text = await (await fetch(`${t.url}/metrics`)).text();
    const line = (name: string, issuer: string) =>
      text.split('\n').find((l) => l.startsWith(`${name}{issuer="${issuer}"}`));
    expect(line('tessera_issuer_key_fetches_total', host.issuer)).toBe(
      `tessera_issuer_key_fetches_total{issuer="${host.issuer}"} 1`,
    );
    expect(line('tessera_issuer_key_fetch_failures_total', host.issuer)).toBe(
      `tessera_issuer_key_fetch_failures_total{issuer="${host.issuer}"} 0`,
    );
    expect(line('tessera_issuer_key_fetch_failures_total', broken.issuer)).toBe(
      `tessera_issuer_key_fetch_failures_total{issuer="${broken.issuer}"} 1`,
    );
    // Inline keys are never fetched, and a client's own jwks_uri is not an issuer's.
    expect(text).not.toContain(`issuer="${K8S_ISSUER}"`);
  });
});

describe('federation: stale keys while the issuer is down', () => {
  const clock = testClock();
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ TESSERA_JWKS_ALLOW_PRIVATE: 'true', ...NO_BLOCKING }, undefined, {
      clock,
    });
    await s.addAudience(API);
  });
  afterAll(async () => {
    await s?.close();
  });

  it('keys past their max-age are kept while a refetch fails, and tried again a minute on', async () => {
    const key = await signer('ES256', 'stale');
    const host = await platform('stale', key);
    host.maxAge = 60; // clamped up to 5 minutes
    const used = credential({ issuer: host.issuer, subject: K8S_SUBJECT }, s);
    const id = await federatedClient([used], s);
    const token = () => {
      const iat = Math.floor(clock.now() / 1000);
      return sign(key, kubernetesClaims(s.url, { iss: host.issuer, iat, nbf: iat, exp: iat + 600 }));
    };
    await expectIssued(await withToken(id, await token(), {}, s), id, s);
    expect(host.fetches).toEqual({ metadata: 1, keys: 1 });
    clock.advance(4 * 60_000);
    await expectIssued(await withToken(id, await token(), {}, s), id, s);
    expect(host.fetches).toEqual({ metadata: 1, keys: 1 });

    // Past the 5 minutes, with the issuer down: fetched again, the stale keys still verify.
    host.status = 503;
    clock.advance(2 * 60_000);
    await expectIssued(await withToken(id, await token(), {}, s), id, s);
    expect(host.fetches).toEqual({ metadata: 2, keys: 1 });
    await expectIssued(await withToken(id, await token(), {}, s), id, s);
    expect(host.fetches.metadata).toBe(2);
    clock.advance(61_000);
    await expectIssued(await withToken(id, await token(), {}, s), id, s);
    expect(host.fetches.metadata).toBe(3);
    await expectIssuedBy(id, used, s);
    // Back up: the next fetch a minute on refreshes them.
    host.status = undefined;
    clock.advance(61_000);
    await expectIssued(await withToken(id, await token(), {}, s), id, s);
    expect(host.fetches).toEqual({ metadata: 4, keys: 2 });
  });
});

describe('federation: without TESSERA_JWKS_ALLOW_PRIVATE', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer(NO_BLOCKING);
    await s.addAudience(API);
  });
  afterAll(async () => {
    await s?.close();
  });

  it('an issuer on a private address is refused, by jwks_uri or by discovery, and never fetched', async () => {
    const key = await signer('RS256', 'private');
    const host = await platform('private', key);
    const byUri = await federatedClient(
      [credential({ issuer: host.issuer, jwksUri: host.jwksUri, subject: K8S_SUBJECT }, s)],
      s,
    );
    const byDiscovery = await federatedClient(
      [credential({ issuer: host.issuer, subject: K8S_SUBJECT }, s)],
      s,
    );
    const jwt = await sign(key, kubernetesClaims(s.url, { iss: host.issuer }));
    await expectRefused(byUri, jwt, 'federated: issuer keys unavailable: 127.0.0.1 is not a public address', {
      server: s,
    });
    await expectRefused(
      byDiscovery,
      jwt,
      'federated: issuer keys unavailable: discovery: 127.0.0.1 is not a public address',
      {
        server: s,
      },
    );
    expect(host.fetches).toEqual({ metadata: 0, keys: 0 });
  });
});

describe('federation: failed attempts', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({
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

  it('each refusal counts: the 4th is 429, yet the right platform token still gets its token', async () => {
    const key = await signer('RS256', 'attempts');
    const id = await federatedClient(
      [credential({ issuer: K8S_ISSUER, jwks: { keys: [key.jwk] }, subject: K8S_SUBJECT }, s)],
      s,
    );
    const from = async (claims: JWTPayload) =>
      postToken(
        s.url,
        {
          grant_type: 'client_credentials',
          client_id: id,
          client_assertion_type: JWT_BEARER,
          client_assertion: await sign(key, kubernetesClaims(s.url, claims)),
          audience: API,
        },
        { headers: { 'x-forwarded-for': '198.51.100.7' } },
      );
    for (let i = 0; i < 3; i++) {
      const refused = await from({ sub: 'system:serviceaccount:prod:intruder' });
      expect({ status: refused.status, body: refused.body }).toEqual({ status: 401, body: REFUSED });
    }
    const blocked = await from({ sub: 'system:serviceaccount:prod:intruder' });
    expect({ status: blocked.status, body: blocked.body }).toEqual({
      status: 429,
      body: { error: 'invalid_request', error_description: 'too many failed attempts; try again later' },
    });
    expect(blocked.headers.get('retry-after')).toBe('45');
    const right = await from({});
    expect(right.status, JSON.stringify(right.body)).toBe(200);
    expect(decodeJwt(right.body.access_token as string)).toMatchObject({ sub: id, client_id: id });
  });
});
