/**
 * Traces in each OTLP protocol the SDK speaks (INTERFACE.md, "Traces": `http/protobuf`, the default, and `grpc`;
 * `http/json` is traces.test.ts's), to a real receiver in the test (helpers/otlp.ts); and an exporter that is down or
 * hangs, which never delays an answer: the spans past the queue are dropped and counted on /metrics.
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does).
 */
import { writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { otlpGrpcReceiver, otlpHttpReceiver, type Receiver } from '../helpers/otlp.js';
import { issueCert, makeCa, writePems } from '../helpers/pki.js';
import { dropPrefix, REDIS_URL, testPrefix } from '../helpers/redis.js';
import { startServe, tesseraEnv, tesseraOk, type Serve } from '../helpers/process.js';
import { freePort, tempDir } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const API = 'https://api.example.com';

const started: Serve[] = [];
const closers: (() => Promise<void>)[] = [];

afterAll(async () => {
  await Promise.all(started.map((s) => s.stop('SIGKILL')));
  for (const close of closers) await close();
});

/** A server with these OpenTelemetry settings and a client granted API; its form. */
async function tessera(otel: Record<string, string>) {
  const env = tesseraEnv({
    TESSERA_DATA_DIR: tempDir('tessera-traces-'),
    TESSERA_PORT: String(await freePort()),
    TESSERA_HOST: '127.0.0.1',
    TESSERA_LOG_LEVEL: 'warn',
    OTEL_TRACES_SAMPLER: 'always_on',
    ...otel,
  });
  await tesseraOk(env, 'audience', 'add', API);
  const created = await tesseraOk(env, 'client', 'create', '--name', 'traced', '--grant', API, '--json');
  const serve = await startServe(env);
  started.push(serve);
  const form = new URLSearchParams({
    grant_type: 'client_credentials',
    client_id: created.json.client_id as string,
    client_secret: created.json.client_secret as string,
    audience: API,
  }).toString();
  const token = async () =>
    (
      await fetch(`${serve.url}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: form,
      })
    ).status;
  return { serve, token, clientId: created.json.client_id as string };
}

describe.each([
  ['http/protobuf (the default)', {}, otlpHttpReceiver],
  ['grpc', { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, otlpGrpcReceiver],
] as const)('OTLP %s', (_name, protocol, receiverOf) => {
  let receiver: Receiver;

  it('exports the token endpoint’s SERVER span with its attributes', async () => {
    receiver = await receiverOf();
    closers.push(() => receiver.close());
    const { token, clientId } = await tessera({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      ...protocol,
    });
    expect(await token()).toBe(200);
    await waitFor(
      () => receiver.spans().some((s) => s.attributes['oauth.client_id'] === clientId),
      10_000,
      50,
    );
    const span = receiver.spans().find((s) => s.attributes['oauth.client_id'] === clientId)!;
    expect(span.name).toBe('POST /oauth/token');
    expect(span.kind).toBe(2);
    expect(span.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/oauth/token',
      'http.response.status_code': 200,
      'oauth.grant_type': 'client_credentials',
      'oauth.client.auth_method': 'client_secret_post',
      'oauth.audience': API,
    });
    expect(span.traceId).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe('the resource', () => {
  it.each([
    ['service.name is tessera by default', {}, { 'service.name': 'tessera' }],
    [
      'OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES as the specification defines them',
      {
        OTEL_SERVICE_NAME: 'auth-prod',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,team=platform',
      },
      { 'service.name': 'auth-prod', 'deployment.environment.name': 'prod', team: 'platform' },
    ],
  ])('%s', async (_what, settings, expected) => {
    const receiver = await otlpHttpReceiver();
    closers.push(() => receiver.close());
    const { token } = await tessera({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      ...settings,
    });
    expect(await token()).toBe(200);
    await waitFor(() => receiver.resources().length > 0, 10_000, 50);
    expect(receiver.resources()[0]).toMatchObject(expected);
  });
});

describe('a secret of the exporter from a file', () => {
  it('OTEL_EXPORTER_OTLP_HEADERS_FILE: the headers of every export, read from a mounted secret', async () => {
    const receiver = await otlpHttpReceiver();
    closers.push(() => receiver.close());
    const file = path.join(tempDir('tessera-otel-secret-'), 'headers');
    writeFileSync(file, 'x-api-key=k3y-from-a-file,x-tenant=acme\n');
    const { token } = await tessera({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_EXPORTER_OTLP_HEADERS_FILE: file,
    });
    expect(await token()).toBe(200);
    await waitFor(() => receiver.headers.length > 0, 10_000, 50);
    expect(receiver.headers[0]).toMatchObject({ 'x-api-key': 'k3y-from-a-file', 'x-tenant': 'acme' });
  });
});

describe('shutdown', () => {
  it('SIGTERM exports the spans still queued before the process exits', async () => {
    const receiver = await otlpHttpReceiver();
    closers.push(() => receiver.close());
    const { serve, token, clientId } = await tessera({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      // No export before the shutdown's.
      OTEL_BSP_SCHEDULE_DELAY: '600000',
      TESSERA_SHUTDOWN_DELAY: '0',
    });
    expect(await token()).toBe(200);
    expect(receiver.bodies).toEqual([]);
    expect((await serve.stop('SIGTERM')).code).toBe(0);
    expect(receiver.spans().some((s) => s.attributes['oauth.client_id'] === clientId)).toBe(true);
  });
});

describe('mutual TLS', () => {
  it('tls_client_auth behind a proxy: the method and the certificate binding', async () => {
    const root = await makeCa({ subject: 'CN=Traced Root' });
    const leaf = await issueCert(root, { subject: 'CN=worker', san: { uri: ['spiffe://traced/worker'] } });
    const files = await writePems({ 'ca.pem': root.certPem });
    const receiver = await otlpHttpReceiver();
    closers.push(() => receiver.close());
    const env = tesseraEnv({
      TESSERA_DATA_DIR: tempDir('tessera-traces-'),
      TESSERA_PORT: String(await freePort()),
      TESSERA_HOST: '127.0.0.1',
      TESSERA_LOG_LEVEL: 'warn',
      TESSERA_TRUST_PROXY: '127.0.0.1',
      TESSERA_CLIENT_CERT_HEADER: 'client-cert',
      TESSERA_TLS_CLIENT_CA: files['ca.pem']!,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_TRACES_SAMPLER: 'always_on',
    });
    await tesseraOk(env, 'audience', 'add', API);
    const created = await tesseraOk(
      env,
      'client',
      'create',
      '--name',
      'worker',
      '--auth-method',
      'tls_client_auth',
      '--tls-san-uri',
      'spiffe://traced/worker',
      '--cert-bound-tokens',
      '--grant',
      API,
      '--json',
    );
    const serve = await startServe(env);
    started.push(serve);
    const answer = await fetch(`${serve.url}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'client-cert': `:${leaf.der.toString('base64')}:`,
      },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: created.json.client_id as string,
        audience: API,
      }).toString(),
    });
    expect(answer.status).toBe(200);
    await waitFor(
      () => receiver.spans().some((s) => s.attributes['oauth.token.binding'] === 'mtls'),
      10_000,
      50,
    );
    const span = receiver.spans().find((s) => s.attributes['oauth.token.binding'] === 'mtls')!;
    expect(span.attributes['oauth.client.auth_method']).toBe('tls_client_auth');
    // The certificate is nowhere in what was exported.
    expect(Buffer.concat(receiver.bodies).includes(leaf.der.subarray(0, 64))).toBe(false);
    expect(Buffer.concat(receiver.bodies).toString('latin1')).not.toContain(
      leaf.der.toString('base64').slice(0, 40),
    );
  });
});

describe('a failed request', () => {
  it('a 5xx (readiness while draining) is a span with the error status', async () => {
    const receiver = await otlpHttpReceiver();
    closers.push(() => receiver.close());
    const { serve } = await tessera({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      TESSERA_SHUTDOWN_DELAY: '2',
    });
    const stopping = serve.stop('SIGTERM');
    // Draining: /readyz answers 503 for TESSERA_SHUTDOWN_DELAY while every other request is still served.
    await waitFor(async () => (await fetch(`${serve.url}/readyz`)).status === 503, 1800, 20);
    expect((await stopping).code).toBe(0);
    const span = receiver
      .spans()
      .find((s) => s.name === 'GET /readyz' && s.attributes['http.response.status_code'] === 503);
    expect(span?.statusCode).toBe(2); // STATUS_CODE_ERROR
    // A 4xx is the caller's: no error status (traces.test.ts's refusal).
  });
});

describe('Redis', () => {
  it('a count in Redis is a CLIENT span of the request it counts', async () => {
    const prefix = testPrefix();
    closers.push(() => dropPrefix(prefix));
    const receiver = await otlpHttpReceiver();
    closers.push(() => receiver.close());
    const { serve, clientId } = await tessera({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      TESSERA_REDIS_URL: REDIS_URL,
      TESSERA_REDIS_PREFIX: prefix,
    });
    // A wrong secret: a failed attempt, counted in Redis.
    const refused = await fetch(`${serve.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: clientId,
        client_secret: 'wrong',
        audience: API,
      }).toString(),
    });
    expect(refused.status).toBe(401);
    await waitFor(() => receiver.spans().some((s) => s.name === 'consume'), 10_000, 50);
    const count = receiver.spans().find((s) => s.name === 'consume')!;
    expect([count.kind, count.attributes['db.system.name'], count.attributes['db.operation.name']]).toEqual([
      3,
      'redis',
      'consume',
    ]);
    const parent = receiver.spans().find((s) => s.spanId === count.parentSpanId);
    expect(parent?.name).toBe('POST /oauth/token');
  });
});

describe('remote trace context', () => {
  const REMOTE_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
  const REMOTE_SPAN = '00f067aa0ba902b7';

  it.each([
    ['from a peer in TESSERA_TRUST_PROXY', { TESSERA_TRUST_PROXY: '127.0.0.1' }],
    ['from anyone with TESSERA_OTEL_TRUST_REMOTE=true', { TESSERA_OTEL_TRUST_REMOTE: 'true' }],
  ])('a traceparent %s is the parent of the span', async (_from, trusting) => {
    const receiver = await otlpHttpReceiver();
    closers.push(() => receiver.close());
    const { serve } = await tessera({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      ...trusting,
    });
    await fetch(`${serve.url}/healthz`, { headers: { traceparent: `00-${REMOTE_TRACE}-${REMOTE_SPAN}-01` } });
    await waitFor(() => receiver.spans().some((s) => s.name === 'GET /healthz'), 10_000, 50);
    const span = receiver.spans().find((s) => s.name === 'GET /healthz')!;
    expect([span.traceId, span.parentSpanId, span.links]).toEqual([REMOTE_TRACE, REMOTE_SPAN, []]);
  });
});

describe('an exporter that is down or hangs', () => {
  it.each([
    ['refuses connections', 'refused'],
    ['accepts and never answers', 'hangs'],
  ] as const)('one that %s delays no answer; the spans past the queue are counted', async (_what, kind) => {
    let endpoint: string;
    if (kind === 'refused') endpoint = `http://127.0.0.1:${await freePort()}`;
    else {
      const sockets: Socket[] = [];
      const silent: Server = createServer((socket) => void sockets.push(socket));
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      closers.push(
        () =>
          new Promise((resolve) => {
            for (const socket of sockets) socket.destroy();
            silent.close(() => resolve());
          }),
      );
      endpoint = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    }
    const { serve, token } = await tessera({
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_BSP_MAX_QUEUE_SIZE: '4',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '2',
      OTEL_BSP_SCHEDULE_DELAY: '50',
      // The drops are reported once the queue has room again: here when the hung export times out.
      OTEL_BSP_EXPORT_TIMEOUT: '1000',
    });
    const began = Date.now();
    const statuses = await Promise.all(Array.from({ length: 40 }, () => token()));
    expect(statuses.every((status) => status === 200)).toBe(true);
    // Forty tokens on a loopback connection each: well under what one export's timeout would cost.
    expect(Date.now() - began).toBeLessThan(5000);
    let dropped = 0;
    await waitFor(
      async () => {
        const metrics = await (await fetch(`${serve.url}/metrics`)).text();
        dropped = Number(/^tessera_otel_spans_dropped_total (\d+)$/m.exec(metrics)?.[1] ?? 0);
        return dropped > 0;
      },
      10_000,
      100,
    );
    expect(dropped).toBeGreaterThan(0);
  });
});
