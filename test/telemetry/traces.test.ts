/**
 * Traces (INTERFACE.md, "Traces (OpenTelemetry)"), from a real `tessera serve` to a real OTLP/HTTP receiver in the
 * test (JSON, as OTEL_EXPORTER_OTLP_PROTOCOL=http/json sends it): one SERVER span per request with the stable HTTP
 * conventions and Tessera's oauth.* attributes, for a granted and a refused token request; never a secret or a token
 * in any byte exported; remote context trusted only from a trusted proxy (else a link); the trace and span ids in the
 * request's log lines; and no tracing, nor the SDK, when the variables do not ask for it.
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ATTRIBUTES,
  CLIENT_ATTRIBUTES,
  HTTP_ATTRIBUTES,
  OAUTH_ATTRIBUTES,
} from '../../src/telemetry/attributes.js';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { tracingConfigured } from '../../src/telemetry/tracing.js';
import { holder, signProof } from '../helpers/dpop.js';
import { startServe, tesseraEnv, tesseraOk, type Serve } from '../helpers/process.js';
import { freePort, tempDir } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const API = 'https://api.example.com';
const REMOTE_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const REMOTE_SPAN = '00f067aa0ba902b7';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: Record<string, unknown> }[];
  links?: { traceId: string; spanId: string }[];
  status?: { code?: number };
}

let receiver: Server;
const bodies: string[] = [];
let serve: Serve;
let env: NodeJS.ProcessEnv;
let clientId: string;
let clientSecret: string;
let keySet: { keys: unknown[] } = { keys: [] };
let signingKey: CryptoKey;
let keyClientId: string;
let service: { id: string; secret: string };
const DOWNSTREAM = 'https://ledger.example.com';

const spans = (): OtlpSpan[] =>
  bodies.flatMap((body) => {
    const request = JSON.parse(body) as {
      resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[];
    };
    return request.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
  });

const attributes = (span: OtlpSpan): Record<string, unknown> =>
  Object.fromEntries(
    span.attributes.map(({ key, value }) => [key, value.stringValue ?? value.intValue ?? value.boolValue]),
  );

/** The exported span of the request whose response carried… the only way to find it: by an attribute. */
async function spanWhere(check: (a: Record<string, unknown>, s: OtlpSpan) => boolean): Promise<OtlpSpan> {
  let found: OtlpSpan | undefined;
  await waitFor(() => (found = spans().find((s) => check(attributes(s), s))) !== undefined, 10_000, 50);
  return found!;
}

async function token(form: Record<string, string>, headers: Record<string, string> = {}) {
  const response = await fetch(`${serve.url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(form).toString(),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  receiver = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      if (request.url === '/v1/traces') bodies.push(body);
      // The key set of the private_key_jwt client (its jwks_uri), on the same loopback server.
      if (request.url?.startsWith('/jwks.json')) return response.writeHead(200).end(JSON.stringify(keySet));
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const port = await freePort();
  env = tesseraEnv({
    TESSERA_DATA_DIR: tempDir('tessera-traces-'),
    TESSERA_PORT: String(port),
    TESSERA_HOST: '127.0.0.1',
    TESSERA_LOG_LEVEL: 'debug',
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '100',
    OTEL_TRACES_SAMPLER: 'always_on',
    TESSERA_JWKS_ALLOW_PRIVATE: 'true',
  });
  const pair = await generateKeyPair('ES256', { extractable: true });
  signingKey = pair.privateKey as CryptoKey;
  keySet = { keys: [{ ...(await exportJWK(pair.publicKey)), alg: 'ES256', kid: 'k1' }] };
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  await tesseraOk(env, 'audience', 'add', API);
  const created = await tesseraOk(env, 'client', 'create', '--name', 'traced', '--grant', API, '--json');
  clientId = created.json.client_id as string;
  clientSecret = created.json.client_secret as string;
  const keyed = await tesseraOk(
    env,
    'client',
    'create',
    '--name',
    'keyed',
    '--auth-method',
    'private_key_jwt',
    '--jwks-uri',
    `${receiverUrl}/jwks.json?tenant=secret-looking`,
    '--grant',
    API,
    '--json',
  );
  keyClientId = keyed.json.client_id as string;
  // Token exchange: a service, resource server of API, may exchange its callers' tokens for DOWNSTREAM's.
  await tesseraOk(env, 'audience', 'add', DOWNSTREAM);
  const made = await tesseraOk(env, 'client', 'create', '--name', 'service', '--grant', DOWNSTREAM, '--json');
  service = { id: made.json.client_id as string, secret: made.json.client_secret as string };
  await tesseraOk(env, 'grant', 'add', service.id, DOWNSTREAM, '--token-exchange');
  await tesseraOk(env, 'audience', 'update', API, '--resource-server', service.id);
  serve = await startServe(env);
}, 60_000);

afterAll(async () => {
  await serve?.stop('SIGKILL');
  receiver?.close();
});

describe('traces over OTLP/HTTP (JSON)', () => {
  it('a granted token: a SERVER span named by its route, the HTTP conventions and the oauth attributes', async () => {
    const issued = await token({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
      audience: API,
    });
    expect(issued.status).toBe(200);
    const span = await spanWhere(
      (a) => a['oauth.client_id'] === clientId && a['oauth.token.id'] !== undefined,
    );
    expect(span.name).toBe('POST /oauth/token');
    expect(span.kind).toBe(2); // SPAN_KIND_SERVER
    const a = attributes(span);
    expect(a).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/oauth/token',
      'url.scheme': 'http',
      'url.path': '/oauth/token',
      'server.address': '127.0.0.1',
      'client.address': '127.0.0.1',
      'network.protocol.version': '1.1',
      'oauth.grant_type': 'client_credentials',
      'oauth.client.auth_method': 'client_secret_post',
      'oauth.audience': API,
    });
    expect(Number(a['http.response.status_code'])).toBe(200);
    expect(Number(a['server.port'])).toBe(serve.port);
    expect(a['oauth.error']).toBeUndefined();
    expect(span.status?.code ?? 0).toBe(0);
  });

  it('a refusal: oauth.error and the audit reason, no client id; a 4xx is not an error', async () => {
    const refused = await token({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: 'not-the-secret',
      audience: API,
    });
    expect(refused.status).toBe(401);
    const span = await spanWhere((a) => a['tessera.refusal_reason'] === 'invalid_client: wrong secret');
    const a = attributes(span);
    expect([a['oauth.error'], a['oauth.client_id'], Number(a['http.response.status_code'])]).toEqual([
      'invalid_client',
      undefined,
      401,
    ]);
    expect(span.status?.code ?? 0).toBe(0);
  });

  it('a remote traceparent from an untrusted caller starts a new trace, linked to it', async () => {
    await token(
      { grant_type: 'client_credentials', client_id: 'linked', client_secret: 'x', audience: API },
      { traceparent: `00-${REMOTE_TRACE}-${REMOTE_SPAN}-01` },
    );
    const span = await spanWhere((a, s) => s.links?.length === 1 && a['url.path'] === '/oauth/token');
    expect(span.traceId).not.toBe(REMOTE_TRACE);
    expect(span.parentSpanId ?? '').toBe('');
    expect(span.links).toMatchObject([{ traceId: REMOTE_TRACE, spanId: REMOTE_SPAN }]);
  });

  it('every route has its span: the admin API by its template, the probes, the metrics', async () => {
    await fetch(`${serve.url}/admin/v1/clients/${clientId}`);
    await fetch(`${serve.url}/healthz`);
    const admin = await spanWhere((a) => String(a['url.path']).startsWith('/admin/v1/clients/'));
    // The route's template, not the path; the management operation; a 401 is the caller's, not an error.
    expect(admin.name).toBe('GET /admin/v1/clients/:id');
    expect(attributes(admin)).toMatchObject({
      'http.route': '/admin/v1/clients/:id',
      'tessera.operation': 'client.get',
      'url.path': `/admin/v1/clients/${clientId}`,
    });
    expect(Number(attributes(admin)['http.response.status_code'])).toBe(401);
    const health = await spanWhere((a) => a['url.path'] === '/healthz');
    expect(health.name).toBe('GET /healthz');
  });

  it('the spans dropped for a full queue are counted on /metrics (none here)', async () => {
    const metrics = await (await fetch(`${serve.url}/metrics`)).text();
    expect(metrics).toMatch(/^tessera_otel_spans_dropped_total 0$/m);
  });

  it('a store query on a cache miss is a CLIENT span of the request that asked', async () => {
    const lookup = await spanWhere((a, s) => s.name === 'SELECT clients');
    expect(lookup.kind).toBe(3); // SPAN_KIND_CLIENT
    expect(attributes(lookup)).toMatchObject({
      'db.system.name': 'sqlite',
      'db.collection.name': 'clients',
      'db.operation.name': 'SELECT',
    });
    const parent = spans().find((s) => s.spanId === lookup.parentSpanId);
    expect(parent?.name).toBe('POST /oauth/token');
    expect(parent?.traceId).toBe(lookup.traceId);
  });

  it('a key set fetch is a CLIENT span, its URL without the query', async () => {
    const now = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({ jti: `traced-${now}` })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer(keyClientId)
      .setSubject(keyClientId)
      .setAudience(`${serve.url.replace('127.0.0.1', 'localhost')}/oauth/token`)
      .setIssuedAt(now)
      .setExpirationTime(now + 60)
      .sign(signingKey);
    const issued = await token({
      grant_type: 'client_credentials',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: assertion,
      audience: API,
    });
    expect(issued.status).toBe(200);
    const fetch = await spanWhere((a, s) => s.name === 'GET' && String(a['url.full']).endsWith('/jwks.json'));
    expect(fetch.kind).toBe(3);
    expect(String(attributes(fetch)['url.full'])).not.toContain('?');
    expect(Number(attributes(fetch)['http.response.status_code'])).toBe(200);
    const parent = spans().find((s) => s.spanId === fetch.parentSpanId);
    expect(parent?.name).toBe('POST /oauth/token');
  });

  it('each method, a DPoP-bound token and a token exchange have their attributes', async () => {
    const basic = `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`;
    const key = await holder();
    const now = Math.floor(Date.now() / 1000);
    const proof = await signProof(key, {
      htm: 'POST',
      htu: `${serve.url.replace('127.0.0.1', 'localhost')}/oauth/token`,
      iat: now,
      jti: `traced-dpop-${now}`,
    });
    const bound = await token(
      { grant_type: 'client_credentials', audience: API },
      { authorization: basic, dpop: proof },
    );
    expect([bound.status, bound.body.token_type]).toEqual([200, 'DPoP']);
    const dpopSpan = await spanWhere((a) => a['oauth.token.binding'] === 'dpop');
    expect(attributes(dpopSpan)).toMatchObject({
      'oauth.client_id': clientId,
      'oauth.client.auth_method': 'client_secret_basic',
    });
    const subject = await token({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
      audience: API,
    });
    const exchanged = await token({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      client_id: service.id,
      client_secret: service.secret,
      subject_token: subject.body.access_token as string,
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      audience: DOWNSTREAM,
    });
    expect(exchanged.status).toBe(200);
    const exchange = await spanWhere((a) => a['oauth.audience'] === DOWNSTREAM);
    expect(attributes(exchange)).toMatchObject({
      'oauth.grant_type': 'urn:ietf:params:oauth:grant-type:token-exchange',
      'oauth.client_id': service.id,
      'oauth.client.auth_method': 'client_secret_post',
    });
  });

  it('every attribute exported is one of the table (attributes.ts, docs/traces.md)', () => {
    const table = new Set<string>(
      [...HTTP_ATTRIBUTES, ...OAUTH_ATTRIBUTES, ...ADMIN_ATTRIBUTES, ...CLIENT_ATTRIBUTES].map(
        (row) => row.name,
      ),
    );
    const exported = new Set(spans().flatMap((span) => span.attributes.map(({ key }) => key)));
    expect([...exported].filter((name) => !table.has(name))).toEqual([]);
  });

  it('no secret, token or assertion in any byte exported', () => {
    const everything = bodies.join('\n');
    expect(everything).not.toContain(clientSecret);
    expect(everything).not.toContain('not-the-secret');
    expect(everything).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\./);
    expect(everything.toLowerCase()).not.toContain('authorization');
    expect(everything).not.toContain('secret-looking');
    expect(everything).not.toContain(service.secret);
  });

  it('the log lines of a traced request carry its trace_id and span_id', async () => {
    await token({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: 'wrong',
      audience: API,
    });
    const span = await spanWhere(
      (a, s) => a['tessera.refusal_reason'] === 'invalid_client: wrong secret' && s.spanId !== undefined,
    );
    await waitFor(() => serve.logs.some((line) => line.trace_id !== undefined), 5000, 50);
    const traced = serve.logs.filter((line) => line.trace_id !== undefined);
    expect(traced.length).toBeGreaterThan(0);
    expect(traced.every((line) => typeof line.span_id === 'string')).toBe(true);
    expect(spans().some((s) => s.traceId === span.traceId)).toBe(true);
  });
});

describe('when tracing is off', () => {
  it('only the OpenTelemetry variables turn it on', () => {
    expect(tracingConfigured({})).toBe(false);
    expect(tracingConfigured({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(
      true,
    );
    expect(
      tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }),
    ).toBe(false);
    expect(
      tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }),
    ).toBe(false);
  });

  it('the attribute table names each attribute once', () => {
    const names = [...HTTP_ATTRIBUTES, ...OAUTH_ATTRIBUTES, ...ADMIN_ATTRIBUTES, ...CLIENT_ATTRIBUTES].map(
      (row) => row.name,
    );
    expect(new Set(names).size).toBe(names.length);
  });
});
