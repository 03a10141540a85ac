/**
 * GET /metrics: Prometheus text exposition (prom-client), read back with a parser of the text format, so the
 * assertions are on the exact series and values a Prometheus server would store.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postToken, startTestServer, type TestClient, type TestServer } from '../helpers/server.js';

const API = 'https://api.example.com';
const OTHER = 'https://other.example.com';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a text exposition (version 0.0.4); every family with a TYPE must have its HELP. */
function parseExposition(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  const helps = new Set<string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) {
      types.set(type[1]!, type[2]!);
      continue;
    }
    const help = /^# HELP (\S+) \S/.exec(line);
    if (help) {
      helps.add(help[1]!);
      continue;
    }
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not an exposition line: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    for (const [, name, value] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[name!] = value!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  for (const family of types.keys())
    if (!helps.has(family)) throw new Error(`metric family ${family} has a TYPE but no HELP`);
  return { samples, types };
}

let t: TestServer;
let client: TestClient;

async function scrape() {
  const response = await fetch(`${t.url}/metrics`);
  expect(response.status).toBe(200);
  return parseExposition(await response.text());
}

function value(samples: Sample[], name: string, labels: Record<string, string>): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    ?.value;
}

const form = (overrides: Record<string, string> = {}) => ({
  grant_type: 'client_credentials',
  client_id: client.id,
  client_secret: client.secret,
  audience: API,
  ...overrides,
});

beforeAll(async () => {
  t = await startTestServer();
  await t.addAudience(API);
  await t.addAudience(OTHER);
  client = await t.createClient([API]);
});

afterAll(async () => {
  await t.close();
});

describe('GET /metrics', () => {
  it('answers 200 in the Prometheus text format, not cached, with process and Node figures', async () => {
    const response = await fetch(`${t.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    const { samples, types } = parseExposition(await response.text());
    expect(types.get('process_resident_memory_bytes')).toBe('gauge');
    expect(value(samples, 'process_resident_memory_bytes', {})).toBeGreaterThan(10_000_000);
    expect(types.get('nodejs_eventloop_lag_p99_seconds')).toBe('gauge');
    expect(types.get('tessera_http_request_duration_seconds')).toBe('histogram');
    expect(types.get('tessera_tokens_issued_total')).toBe('counter');
    expect(types.get('tessera_token_failures_total')).toBe('counter');
    expect(types.get('tessera_client_cache_lookups_total')).toBe('counter');
    expect(types.get('tessera_client_cache_hit_ratio')).toBe('gauge');
    expect(types.get('tessera_store_operation_duration_seconds')).toBe('histogram');
    expect(types.get('tessera_audit_events_queued')).toBe('gauge');
    // Only with TESSERA_REDIS_URL (test/security/redis-outage.test.ts).
    expect(types.get('tessera_redis_up')).toBeUndefined();
    expect(types.get('tessera_http_connections')).toBe('gauge');
    // At least the connection this scrape came on.
    expect(value(samples, 'tessera_http_connections', {})).toBeGreaterThanOrEqual(1);
    expect(types.get('tessera_http_connections_closed_total')).toBe('counter');
    expect(value(samples, 'tessera_http_connections_closed_total', { reason: 'cap_idle' })).toBe(0);
    expect(value(samples, 'tessera_http_connections_closed_total', { reason: 'cap_refused' })).toBe(0);
  });

  it('is 405 for POST, with Allow', async () => {
    const response = await fetch(`${t.url}/metrics`, { method: 'POST' });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, HEAD');
  });

  it('counts issued tokens by audience, and refusals by OAuth error code and registered audience', async () => {
    const before = (await scrape()).samples;
    const issued = (s: Sample[]) => value(s, 'tessera_tokens_issued_total', { audience: API }) ?? 0;
    const failed = (s: Sample[], reason: string, audience: string) =>
      value(s, 'tessera_token_failures_total', { reason, audience }) ?? 0;

    for (let i = 0; i < 3; i++) expect((await postToken(t.url, form())).status).toBe(200);
    expect((await postToken(t.url, form({ client_secret: 'wrong' }))).status).toBe(401);
    expect((await postToken(t.url, form({ audience: OTHER }))).status).toBe(400); // registered, not granted
    expect((await postToken(t.url, form({ audience: 'https://made-up.example/\u0000x' }))).status).toBe(400);
    expect((await postToken(t.url, form({ grant_type: 'password' }))).status).toBe(400);

    const { samples } = await scrape();
    expect(issued(samples) - issued(before)).toBe(3);
    expect(failed(samples, 'invalid_client', API) - failed(before, 'invalid_client', API)).toBe(1);
    expect(failed(samples, 'invalid_target', OTHER) - failed(before, 'invalid_target', OTHER)).toBe(1);
    expect(
      failed(samples, 'invalid_target', '(unregistered)') -
        failed(before, 'invalid_target', '(unregistered)'),
    ).toBe(1);
    expect(
      failed(samples, 'unsupported_grant_type', API) - failed(before, 'unsupported_grant_type', API),
    ).toBe(1);
    // What a caller typed never becomes a label value: no client id, no unregistered audience.
    const text = await (await fetch(`${t.url}/metrics`)).text();
    expect(text).not.toContain('made-up');
    expect(text).not.toContain(client.id);
  });

  it('observes request durations by method, declared route and status; unknown paths share one label', async () => {
    const count = (s: Sample[], labels: Record<string, string>) =>
      value(s, 'tessera_http_request_duration_seconds_count', labels) ?? 0;
    const ok = { method: 'POST', route: '/oauth/token', status_code: '200' };
    const unmatched = { method: 'GET', route: '(unmatched)', status_code: '404' };
    const before = (await scrape()).samples;

    expect((await postToken(t.url, form())).status).toBe(200);
    expect((await postToken(t.url, form())).status).toBe(200);
    expect((await fetch(`${t.url}/no/such/path-${'x'.repeat(40)}`)).status).toBe(404);

    const { samples } = await scrape();
    expect(count(samples, ok) - count(before, ok)).toBe(2);
    expect(count(samples, unmatched) - count(before, unmatched)).toBe(1);
    // Buckets are cumulative and end with +Inf = count; the sum is a plausible duration.
    const buckets = samples.filter(
      (s) =>
        s.name === 'tessera_http_request_duration_seconds_bucket' &&
        s.labels.route === '/oauth/token' &&
        s.labels.status_code === '200',
    );
    expect(buckets.at(-1)!.labels.le).toBe('+Inf');
    expect(buckets.at(-1)!.value).toBe(count(samples, ok));
    for (let i = 1; i < buckets.length; i++)
      expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value);
    const sum = value(samples, 'tessera_http_request_duration_seconds_sum', ok)!;
    expect(sum).toBeGreaterThan(0);
    expect(sum / count(samples, ok)).toBeLessThan(1);
    expect(samples.some((s) => s.labels.route?.includes('path-'))).toBe(false);
  });

  it('counts client cache hits, misses and unregistered ids, and the hit ratio follows', async () => {
    const lookups = (s: Sample[], result: string) =>
      value(s, 'tessera_client_cache_lookups_total', { result }) ?? 0;
    const fresh = await t.createClient([API]);
    const before = (await scrape()).samples;

    const request = { ...form(), client_id: fresh.id, client_secret: fresh.secret };
    expect((await postToken(t.url, request)).status).toBe(200); // first use: a miss
    expect((await postToken(t.url, request)).status).toBe(200); // then hits
    expect((await postToken(t.url, request)).status).toBe(200);
    const unknown = { ...request, client_id: 'c0ffee00c0ffee00c0ffee00c0ffee00' };
    // Not in the set of client ids: no lookup, one read of the change feed.
    expect((await postToken(t.url, unknown)).status).toBe(401);
    expect((await postToken(t.url, unknown)).status).toBe(401); // known not to exist

    const { samples } = await scrape();
    expect(lookups(samples, 'miss') - lookups(before, 'miss')).toBe(1);
    expect(lookups(samples, 'hit') - lookups(before, 'hit')).toBe(2);
    expect(lookups(samples, 'unregistered') - lookups(before, 'unregistered')).toBe(1);
    expect(lookups(samples, 'unknown_hit') - lookups(before, 'unknown_hit')).toBe(1);
    const all = ['hit', 'unknown_hit', 'miss', 'unregistered'].map((r) => lookups(samples, r));
    expect(value(samples, 'tessera_client_cache_hit_ratio', {})).toBeCloseTo(
      (all[0]! + all[1]!) / (all[0]! + all[1]! + all[2]! + all[3]!),
      10,
    );
  });

  it('times store operations by name: the client lookups of cache misses, the change feed', async () => {
    const fresh = await t.createClient([API]);
    const lookups = (s: Sample[]) =>
      value(s, 'tessera_store_operation_duration_seconds_count', {
        operation: 'findClients',
        outcome: 'ok',
      }) ?? 0;
    const before = (await scrape()).samples;
    expect(
      (await postToken(t.url, { ...form(), client_id: fresh.id, client_secret: fresh.secret })).status,
    ).toBe(200);
    const { samples } = await scrape();
    expect(lookups(samples) - lookups(before)).toBe(1);
    expect(
      value(samples, 'tessera_store_operation_duration_seconds_count', {
        operation: 'changesSince',
        outcome: 'ok',
      }),
    ).toBeGreaterThan(0);
  });
});

describe('the event loop delay', () => {
  const buckets = (samples: Sample[]) =>
    samples
      .filter((s) => s.name === 'tessera_event_loop_delay_seconds_bucket')
      .map((s) => [s.labels.le!, s.value] as const);

  it('a stall of the thread shows in the histogram and, until the next scrape, as the max', async () => {
    const first = await scrape();
    expect(first.types.get('tessera_event_loop_delay_seconds')).toBe('histogram');
    expect(first.types.get('tessera_event_loop_delay_max_seconds')).toBe('gauge');
    expect(buckets(first.samples).map(([le]) => le)).toEqual([
      '0.001',
      '0.002',
      '0.005',
      '0.01',
      '0.02',
      '0.05',
      '0.1',
      '0.25',
      '0.5',
      '1',
      '2.5',
      '5',
      '+Inf',
    ]);
    // The server runs in this process: 80 ms of synchronous work here stops its thread too.
    await new Promise((resolve) => setTimeout(resolve, 20));
    const until = performance.now() + 80;
    while (performance.now() < until);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const { samples } = await scrape();
    const stalled = value(samples, 'tessera_event_loop_delay_max_seconds', {})!;
    expect(stalled).toBeGreaterThanOrEqual(0.07);
    expect(stalled).toBeLessThan(1);
    const counts = buckets(samples).map(([, count]) => count);
    // Cumulative, and the stall's sample is above 50 ms: counted in +Inf and 0.1 but not in 0.05.
    for (let i = 1; i < counts.length; i++) expect(counts[i]!).toBeGreaterThanOrEqual(counts[i - 1]!);
    const at = (le: string) => buckets(samples).find(([bound]) => bound === le)![1];
    const before = (le: string) => buckets(first.samples).find(([bound]) => bound === le)![1];
    expect(at('+Inf') - at('0.05')).toBeGreaterThan(before('+Inf') - before('0.05'));
    expect(value(samples, 'tessera_event_loop_delay_seconds_count', {})).toBe(at('+Inf'));
    expect(value(samples, 'tessera_event_loop_delay_seconds_sum', {})).toBeGreaterThanOrEqual(0.07);
    // The max is the window's since the previous scrape: the stall is behind it now.
    const { samples: after } = await scrape();
    expect(value(after, 'tessera_event_loop_delay_max_seconds', {})).toBeLessThan(stalled);
  });
});

describe('TESSERA_METRICS=false', () => {
  it('has no /metrics: a 404 like any unknown path', async () => {
    const off = await startTestServer({ TESSERA_METRICS: 'false' });
    try {
      const response = await fetch(`${off.url}/metrics`);
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({ error: 'not_found', error_description: 'no such endpoint' });
    } finally {
      await off.close();
    }
  });
});
