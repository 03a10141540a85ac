/**
 * Mutual TLS behind a proxy that terminates TLS (INTERFACE.md, "Mutual TLS…": "Behind a proxy"; RFC 8705, RFC 9440):
 * the client certificate in TESSERA_CLIENT_CERT_HEADER as RFC 9440's Client-Cert, Envoy's (and Istio's)
 * X-Forwarded-Client-Cert and nginx's escaped PEM, each exactly as that proxy writes it; read only from a peer in
 * TESSERA_TRUST_PROXY; its chain verified by Tessera against TESSERA_TLS_CLIENT_CA (a header is no proof of trust);
 * a header that does not parse ignored with a warning and never a 5xx; certificate-bound tokens from a header.
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { issueCert, makeCa, writePems, type Authority, type Issued } from '../helpers/pki.js';
import { latestAuditEvent, NO_BLOCKING, startTestServer, type TestServer } from '../helpers/server.js';
import { digestSecret, generateSecret } from '../../src/domain/secrets.js';

const API = 'https://api.example.com';
const SPIFFE = 'spiffe://prod.example.com/ns/billing/sa/worker';
const INVALID_CLIENT = { error: 'invalid_client', error_description: 'client authentication failed' };
const HOUR = 3_600_000;

let root: Authority;
let intermediate: Authority;
let worker: Issued;
let batch: Issued;
let untrusted: Issued;
let expired: Issued;
/** A leaf of an attacker's CA, with the victim's SPIFFE ID. */
let forged: Issued;
/** A leaf under two CA certificates that issue each other (X → Y → X …), none of them trusted. */
let looped: { leaf: Issued; chain: Authority[] };
let caFile: string;

const pemOf = (issued: Issued): string => issued.certPem;

/** How each proxy writes a certificate (and the intermediates it got) into its header. */
const FORMATS = {
  'client-cert': (leaf: Issued, chain: Authority[] = []): Record<string, string> => ({
    // RFC 9440 §2: sf-binary of the DER; the chain an sf-list of them.
    'client-cert': `:${leaf.der.toString('base64')}:`,
    ...(chain.length === 0
      ? {}
      : { 'client-cert-chain': chain.map((c) => `:${c.der.toString('base64')}:`).join(', ') }),
  }),
  'x-forwarded-client-cert': (leaf: Issued, chain: Authority[] = []): Record<string, string> => {
    // Envoy: By, Hash, Cert and Chain (the whole chain, the leaf first), Subject quoted, URI; the element the edge
    // proxy added first, and the sidecar's (the nearest) last.
    const hash = createHash('sha256').update(leaf.der).digest('hex');
    const whole = [leaf.certPem, ...chain.map(pemOf)].join('');
    const edge = `By=spiffe://cluster.local/ns/edge/sa/gateway;Hash=${'0'.repeat(64)};Subject="CN=gateway,O=Edge, Inc."`;
    const nearest =
      `By=spiffe://cluster.local/ns/tessera/sa/tessera;Hash=${hash};` +
      `Cert="${encodeURIComponent(leaf.certPem)}";Chain="${encodeURIComponent(whole)}";` +
      `Subject="CN=worker,OU=Billing,O=Example Inc,C=US";URI=${SPIFFE}`;
    return { 'x-forwarded-client-cert': `${edge},${nearest}` };
  },
  'ssl-client-cert': (leaf: Issued, chain: Authority[] = []): Record<string, string> => ({
    // nginx: proxy_set_header ssl-client-cert $ssl_client_escaped_cert (the leaf; a chain appended by hand).
    'ssl-client-cert': encodeURIComponent([leaf.certPem, ...chain.map(pemOf)].join('')),
  }),
} as const;

type Format = keyof typeof FORMATS;

/** A POST to the token endpoint from `localAddress` (127.0.0.1 is the trusted proxy), with `headers`. */
function post(
  t: TestServer,
  form: Record<string, string>,
  headers: Record<string, string>,
  localAddress = '127.0.0.1',
): Promise<{ status: number; body: Record<string, unknown> }> {
  const body = new URLSearchParams(form).toString();
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: t.config.port,
        path: '/oauth/token',
        method: 'POST',
        localAddress,
        agent: false,
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode!, body: JSON.parse(text) as Record<string, unknown> }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const asks = (id: string) => ({ grant_type: 'client_credentials', client_id: id, audience: API });

beforeAll(async () => {
  root = await makeCa({ subject: 'CN=Example Client Root' });
  intermediate = await makeCa({ subject: 'CN=Example Client Intermediate', issuer: root });
  const other = await makeCa({ subject: 'CN=Somebody Else Root' });
  worker = await issueCert(root, {
    subject: 'CN=worker,OU=Billing,O=Example Inc,C=US',
    san: { uri: [SPIFFE] },
  });
  batch = await issueCert(intermediate, { subject: 'CN=batch,O=Example Inc,C=US', san: { uri: [SPIFFE] } });
  untrusted = await issueCert(other, {
    subject: 'CN=worker,OU=Billing,O=Example Inc,C=US',
    san: { uri: [SPIFFE] },
  });
  expired = await issueCert(root, {
    subject: 'CN=worker,OU=Billing,O=Example Inc,C=US',
    san: { uri: [SPIFFE] },
    notBefore: new Date(Date.now() - 48 * HOUR),
    notAfter: new Date(Date.now() - 24 * HOUR),
  });
  forged = await issueCert(other, { subject: 'CN=batch,O=Example Inc,C=US', san: { uri: [SPIFFE] } });
  const x = await makeCa({ subject: 'CN=Loop X' });
  const y = await makeCa({ subject: 'CN=Loop Y', issuer: x });
  const xAgain = await makeCa({ subject: 'CN=Loop X', issuer: y, keys: x.cryptoKeys });
  looped = { leaf: await issueCert(y, { subject: 'CN=looped', san: { uri: [SPIFFE] } }), chain: [xAgain, y] };
  caFile = (await writePems({ 'client-ca.pem': root.certPem }))['client-ca.pem']!;
}, 60_000);

describe.each(Object.keys(FORMATS) as Format[])('TESSERA_CLIENT_CERT_HEADER=%s', (format) => {
  let t: TestServer;
  const lines: string[] = [];
  let boundSecret: string;
  const headerOf = FORMATS[format];

  beforeAll(async () => {
    t = await startTestServer(
      {
        ...NO_BLOCKING,
        TESSERA_TRUST_PROXY: '127.0.0.1',
        TESSERA_CLIENT_CERT_HEADER: format,
        TESSERA_TLS_CLIENT_CA: caFile,
        TESSERA_LOG_LEVEL: 'warn',
      },
      (line) => lines.push(line),
    );
    await t.addAudience(API);
    const store = t.server.runtime.store;
    await store.createClient({
      id: 'spiffe',
      name: 'spiffe',
      secretDigest: null,
      authMethod: 'tls_client_auth',
      tlsClientAuth: { kind: 'san_uri', value: SPIFFE },
      tokenTtl: null,
      audiences: [API],
    });
    boundSecret = generateSecret();
    await store.createClient({
      id: 'bound',
      name: 'bound',
      secretDigest: digestSecret(boundSecret),
      certificateBoundAccessTokens: true,
      tokenTtl: null,
      audiences: [API],
    });
    await t.sync();
  });

  afterAll(async () => {
    await t?.close();
  });

  it('discovery offers the certificate methods and the aliases without TLS of its own', async () => {
    const metadata = (await (await fetch(`${t.url}/.well-known/openid-configuration`)).json()) as Record<
      string,
      unknown
    >;
    expect(metadata.token_endpoint_auth_methods_supported).toContain('tls_client_auth');
    expect(metadata.token_endpoint_auth_methods_supported).toContain('self_signed_tls_client_auth');
    expect(metadata.mtls_endpoint_aliases).toEqual({
      token_endpoint: `${t.url}/oauth/token`,
      revocation_endpoint: `${t.url}/oauth/revoke`,
      introspection_endpoint: `${t.url}/oauth/introspect`,
    });
  });

  it('the certificate the proxy forwarded authenticates (a SPIFFE ID as SAN URI)', async () => {
    const answer = await post(t, asks('spiffe'), headerOf(worker));
    expect(answer.status).toBe(200);
    expect(decodeJwt(answer.body.access_token as string).client_id).toBe('spiffe');
    // Again, from memory (the chain's verdict kept by its hash).
    expect((await post(t, asks('spiffe'), headerOf(worker))).status).toBe(200);
  });

  it('through the intermediate the proxy forwarded; without it the chain is not trusted', async () => {
    expect((await post(t, asks('spiffe'), headerOf(batch, [intermediate]))).status).toBe(200);
    const alone = await post(t, asks('spiffe'), headerOf(batch));
    expect([alone.status, alone.body]).toEqual([401, INVALID_CLIENT]);
    expect((await latestAuditEvent(t, 'spiffe'))?.reason).toBe('invalid_client: mtls: chain not trusted');
  });

  it("a leaf of another CA forwarded with the trusted CA's real intermediate is not trusted", async () => {
    const answer = await post(t, asks('spiffe'), headerOf(forged, [intermediate]));
    expect([answer.status, answer.body]).toEqual([401, INVALID_CLIENT]);
    expect((await latestAuditEvent(t, 'spiffe'))?.reason).toBe('invalid_client: mtls: chain not trusted');
  });

  it('certificates that issue each other in a loop are refused at once, and the server goes on', async () => {
    const started = Date.now();
    const answer = await post(t, asks('spiffe'), headerOf(looped.leaf, looped.chain));
    expect([answer.status, answer.body]).toEqual([401, INVALID_CLIENT]);
    expect(Date.now() - started).toBeLessThan(2000);
    expect((await post(t, asks('spiffe'), headerOf(worker))).status).toBe(200);
  });

  it.each([
    ['a certificate of a CA not in TESSERA_TLS_CLIENT_CA', () => untrusted, 'mtls: chain not trusted'],
    ['an expired certificate', () => expired, 'mtls: certificate expired'],
  ])('%s: 401 invalid_client', async (_what, leaf, reason) => {
    const answer = await post(t, asks('spiffe'), headerOf(leaf()));
    expect([answer.status, answer.body]).toEqual([401, INVALID_CLIENT]);
    expect((await latestAuditEvent(t, 'spiffe'))?.reason).toBe(`invalid_client: ${reason}`);
  });

  it('a header from a peer not in TESSERA_TRUST_PROXY is ignored', async () => {
    const answer = await post(t, asks('spiffe'), headerOf(worker), '127.0.0.2');
    expect([answer.status, answer.body]).toEqual([401, INVALID_CLIENT]);
    const event = await latestAuditEvent(t, 'spiffe');
    expect([event?.reason, event?.source]).toEqual(['invalid_client: mtls: no certificate', '127.0.0.2']);
  });

  it('a header that does not parse is ignored with a warning, never a 5xx', async () => {
    lines.length = 0;
    const garbage = {
      [format]: format === 'client-cert' ? ':bm90IGEgY2VydGlmaWNhdGU=:' : 'Cert="%%%garbage"',
    };
    const answer = await post(t, asks('spiffe'), garbage);
    expect([answer.status, answer.body]).toEqual([401, INVALID_CLIENT]);
    expect((await latestAuditEvent(t, 'spiffe'))?.reason).toBe('invalid_client: mtls: no certificate');
    const warned = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(warned.some((line) => line.level === 40 && String(line.msg).includes('does not parse'))).toBe(
      true,
    );
    // The header's value is never logged.
    expect(lines.join('\n')).not.toContain('garbage');
  });

  it('new client CAs are taken without a restart, behind a proxy too', async () => {
    const other = await makeCa({ subject: 'CN=Next Root' });
    const file = (await writePems({ 'ca.pem': root.certPem }))['ca.pem']!;
    const s = await startTestServer({
      ...NO_BLOCKING,
      TESSERA_TRUST_PROXY: '127.0.0.1',
      TESSERA_CLIENT_CERT_HEADER: format,
      TESSERA_TLS_CLIENT_CA: file,
    });
    try {
      await s.addAudience(API);
      await s.server.runtime.store.createClient({
        id: 'spiffe',
        name: 'spiffe',
        secretDigest: null,
        authMethod: 'tls_client_auth',
        tlsClientAuth: { kind: 'san_uri', value: SPIFFE },
        tokenTtl: null,
        audiences: [API],
      });
      await s.sync();
      expect((await post(s, asks('spiffe'), headerOf(worker))).status).toBe(200);
      writeFileSync(file, other.certPem);
      expect(s.server.reloadTls()).toBe(true);
      expect((await post(s, asks('spiffe'), headerOf(worker))).status).toBe(401);
    } finally {
      await s.close();
    }
  });

  it('a certificate-bound token carries the forwarded certificate’s x5t#S256', async () => {
    const answer = await post(t, { ...asks('bound'), client_secret: boundSecret }, headerOf(untrusted));
    expect(answer.status).toBe(200);
    expect(decodeJwt(answer.body.access_token as string).cnf).toEqual({ 'x5t#S256': untrusted.x5t });
  });
});

describe('settings', () => {
  it('TESSERA_CLIENT_CERT_HEADER is read only from trusted proxies, so it needs TESSERA_TRUST_PROXY', () => {
    expect(() => loadConfig({ TESSERA_CLIENT_CERT_HEADER: 'client-cert' })).toThrow(
      'TESSERA_CLIENT_CERT_HEADER needs TESSERA_TRUST_PROXY: the header is read only from the proxies listed there',
    );
    expect(() =>
      loadConfig({ TESSERA_CLIENT_CERT_HEADER: 'x-client-cert', TESSERA_TRUST_PROXY: '10.0.0.1' }),
    ).toThrow(
      'TESSERA_CLIENT_CERT_HEADER must be one of client-cert, x-forwarded-client-cert, ssl-client-cert, got "x-client-cert"',
    );
    expect(() => loadConfig({ TESSERA_TLS_CERT: '/tmp/cert.pem' })).toThrow(
      'TESSERA_TLS_CERT and TESSERA_TLS_KEY go together: set both, or neither',
    );
    expect(() => loadConfig({ TESSERA_MTLS_BASE_URL: 'https://mtls.example.com/path' })).toThrow(
      'TESSERA_MTLS_BASE_URL must be an origin without a path, such as https://auth.example.com',
    );
  });
});
