/**
 * The exposition of Metrics (src/metrics/metrics.ts): the same text prom-client's registry writes, written a
 * slice at a time with the event loop let in between, one scrape after another.
 */
import { Gauge } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics/metrics.js';

let metrics: Metrics | undefined;
afterEach(() => metrics?.close());

/** Metrics with request and store durations observed under awkward labels and values. */
function observed(): Metrics {
  const m = new Metrics({ defaultMetrics: false });
  m.observeRequest('POST', '/oauth/token', 200, 0.0004);
  m.observeRequest('POST', '/oauth/token', 200, 0.003);
  m.observeRequest('POST', '/oauth/token', 401, 1e-7);
  m.observeRequest('GET', '/a "quoted" \\ route\nwith a newline', 404, 12);
  m.observeRequest('GET', '/metrics', 200, 0.25);
  m.observeRequest('GET', '/nothing', 200, NaN);
  const store = m.timedStore({
    findClient: (id: string) => (id === 'missing' ? Promise.reject(new Error('no')) : Promise.resolve(id)),
    countClients: () => 3,
  } as never) as unknown as { findClient(id: string): Promise<string>; countClients(): number };
  return Object.assign(m, { store });
}

/**
 * Stops the loop delay's sampler and takes what it sampled (one scrape): the scrapes after see no new samples
 * and a window maximum of 0, so their texts can be compared.
 */
async function closedAndTaken(m: Metrics): Promise<void> {
  m.close();
  await m.exposition();
}

/**
 * `count` gauges `slow_<i>` of value i, each keeping the thread busy `ms` milliseconds when it is collected and
 * then telling `collected`.
 */
function slowGauges(m: Metrics, count: number, ms: number, collected?: (i: number) => void): void {
  for (let i = 0; i < count; i++)
    new Gauge({
      name: `slow_${i}`,
      help: `takes ${ms} ms to collect`,
      registers: [m.registry],
      collect() {
        busy(ms);
        this.set(i);
        collected?.(i);
      },
    });
}

/** Keeps the thread busy for `ms` milliseconds. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe('the exposition', () => {
  it("is prom-client's text of the same registry, line for line, the keyed histograms included", async () => {
    const m = (metrics = observed());
    const { store } = m as unknown as { store: { findClient(id: string): Promise<string> } };
    await store.findClient('a');
    await store.findClient('b');
    await expect(store.findClient('missing')).rejects.toThrow('no');
    m.tokenOutcome(
      {
        type: 'token.refused',
        clientId: 'c',
        audience: 'https://api.example.com',
        reason: 'invalid_client',
      } as never,
      () => true,
    );
    await closedAndTaken(m);

    const text = (await m.exposition()).text;
    expect(text).toBe(await m.registry.metrics());
    expect(text).toContain(
      'tessera_http_request_duration_seconds_bucket{method="GET",route="/a \\"quoted\\" \\\\ route\\nwith a newline",status_code="404",le="10"} 0\n',
    );
    expect(text).toContain(
      'tessera_http_request_duration_seconds_bucket{method="POST",route="/oauth/token",status_code="401",le="0.0005"} 1\n',
    );
    expect(text).toContain(
      'tessera_http_request_duration_seconds_sum{method="POST",route="/oauth/token",status_code="401"} 1e-7\n',
    );
    expect(text).toContain(
      'tessera_store_operation_duration_seconds_count{operation="findClient",outcome="error"} 1\n',
    );
    expect(text).toContain(
      'tessera_store_operation_duration_seconds_bucket{operation="findClient",outcome="ok",le="+Inf"} 2\n',
    );
    expect(text).toContain(
      'tessera_http_request_duration_seconds_sum{method="GET",route="/nothing",status_code="200"} Nan\n',
    );
    expect(text.endsWith('\n')).toBe(true);
  });

  it("is prom-client's text with histograms that have no series yet", async () => {
    const m = (metrics = new Metrics({ defaultMetrics: false }));
    await closedAndTaken(m);
    const text = (await m.exposition()).text;
    expect(text).toBe(await m.registry.metrics());
    expect(text).toContain(
      '# TYPE tessera_store_operation_duration_seconds histogram\n\n# HELP tessera_issuer_key_fetches_total',
    );
  });

  it('a series observed after a scrape is in the next one, and so are the new counts of the others', async () => {
    const m = (metrics = new Metrics({ defaultMetrics: false }));
    m.observeRequest('POST', '/oauth/token', 200, 0.002);
    const first = (await m.exposition()).text;
    expect(first).toContain(
      'tessera_http_request_duration_seconds_count{method="POST",route="/oauth/token",status_code="200"} 1\n',
    );
    m.observeRequest('POST', '/oauth/token', 200, 0.002);
    m.observeRequest('POST', '/oauth/revoke', 200, 0.002);
    const second = (await m.exposition()).text;
    expect(second).toContain(
      'tessera_http_request_duration_seconds_count{method="POST",route="/oauth/token",status_code="200"} 2\n',
    );
    expect(second).toContain(
      'tessera_http_request_duration_seconds_bucket{method="POST",route="/oauth/revoke",status_code="200",le="0.0025"} 1\n',
    );
    expect(second).toContain(
      'tessera_http_request_duration_seconds_sum{method="POST",route="/oauth/token",status_code="200"} 0.004\n',
    );
  });

  it('lets the event loop in while it is written: 40 metrics of half a millisecond each are not one stall', async () => {
    const m = (metrics = new Metrics({ defaultMetrics: false }));
    slowGauges(m, 40, 0.5);
    let turns = 0;
    let writing = true;
    const tick = (): void => {
      turns++;
      if (writing) setImmediate(tick);
    };
    setImmediate(tick);
    const text = (await m.exposition()).text;
    writing = false;
    // 20 ms of collection in slices of about a millisecond: written in one go, the loop would turn not once.
    expect(turns).toBeGreaterThanOrEqual(5);
    expect(text).toContain('slow_39 39\n');
  });

  it('scrapes at the same time take turns: one collects all its metrics before the next begins', async () => {
    const m = (metrics = new Metrics({ defaultMetrics: false }));
    const order: string[] = [];
    slowGauges(m, 6, 0.6, (i) => order.push(`slow_${i}`));
    await closedAndTaken(m);
    order.length = 0; // what that scrape collected
    const [a, b] = await Promise.all([m.exposition(), m.exposition()]);
    const steps = ['slow_0', 'slow_1', 'slow_2', 'slow_3', 'slow_4', 'slow_5'];
    expect(order).toEqual([...steps, ...steps]);
    expect(a.text).toBe(b.text);
    expect(a.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
  });
});
