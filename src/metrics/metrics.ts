import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { collectDefaultMetrics, Counter, Gauge, Registry, type Metric } from 'prom-client';
import type { AuditEntry } from '../domain/token-events.js';
import type { Store } from '../store/types.js';

/** Seconds: a warm token answer takes well under a millisecond, a cold one a store round trip. */
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const STORE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/**
 * Seconds: how late the event loop ran a timer. Anything over a millisecond or two is a request held up by
 * synchronous work (a store call, a big JSON document, a garbage collection) of another.
 */
const LOOP_DELAY_BUCKETS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
/** Milliseconds between two samples of the event loop's delay (a timer of libuv's own, not of JavaScript). */
const LOOP_DELAY_RESOLUTION_MS = 1;

/** Milliseconds of the thread an exposition takes before it lets the event loop in (see Metrics.exposition). */
const EXPOSITION_SLICE_MS = 1;

/** A Prometheus text exposition and its content type. */
export interface Exposition {
  contentType: string;
  text: string;
}

/** The refusal label for an audience that is not registered: request text never becomes a label value. */
const UNREGISTERED = '(unregistered)';

/**
 * Issuers labelled one by one, at most: they are only those a federated credential names (the token path
 * fetches no other), and past this many the rest share one label value.
 */
const MAX_ISSUER_LABELS = 1000;
const OTHER_ISSUERS = '(other)';

/** Counts the client cache keeps as plain numbers (no metrics dependency in the store layer). */
export interface CacheStats {
  /** A known client answered from memory. */
  hits: number;
  /** An id already known not to exist, answered from memory. */
  unknownHits: number;
  /** Lookups that went to the store. */
  misses: number;
  /** Ids that the set of every client id lacks: answered after a read of the change feed, not a lookup. */
  unregistered: number;
}

type Labels = Record<string, string | number>;

/** One label set's counts in a KeyedHistogram: per-bucket (not cumulative) counts, sum and count. */
interface Series {
  labels: Labels;
  buckets: number[];
  sum: number;
  count: number;
  /** The series' lines up to their values, made once: `…_bucket{labels,le="` and `…_sum{labels} `, `…_count…`. */
  text?: { bucket: string; sum: string; count: string };
}

/**
 * A histogram for the request path. prom-client's Histogram validates and hashes the labels on every
 * observation (about a microsecond, more than anything else Tessera adds to a token request besides the
 * audit row); this one finds its series by a key the caller builds, and an observation is a few array
 * increments. The registry reads it like any prom-client metric (`get()` in prom-client's format, summed
 * across workers by the cluster aggregator).
 */
class KeyedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
  ) {}

  /** The series of a key, made with these labels on first use. */
  seriesFor(key: string, labels: () => Labels): Series {
    let series = this.series.get(key);
    if (series === undefined) {
      series = {
        labels: labels(),
        buckets: new Array<number>(this.bounds.length + 1).fill(0),
        sum: 0,
        count: 0,
      };
      this.series.set(key, series);
    }
    return series;
  }

  observe(series: Series, value: number): void {
    let i = 0;
    while (i < this.bounds.length && value > this.bounds[i]!) i++;
    series.buckets[i]!++;
    series.sum += value;
    series.count++;
  }

  get() {
    const values: { labels: Labels; value: number; metricName: string }[] = [];
    for (const { labels, buckets, sum, count } of this.series.values()) {
      let cumulative = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += buckets[i]!;
        const le = i < this.bounds.length ? this.bounds[i]! : '+Inf';
        values.push({ labels: { ...labels, le }, value: cumulative, metricName: `${this.name}_bucket` });
      }
      values.push({ labels, value: sum, metricName: `${this.name}_sum` });
      values.push({ labels, value: count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /**
   * The exposition text of the histogram, as prom-client's registry writes it from `get()` (the same lines,
   * labels and numbers, `test/metrics/exposition.test.ts`), with each series' label text made once instead of
   * at every scrape: prom-client formats a label set per line, ~6 µs, and the store's histogram has hundreds.
   */
  text(): string {
    const lines = [`# HELP ${this.name} ${escapeText(this.help)}`, `# TYPE ${this.name} ${this.type}`];
    const bounds = this.bounds;
    for (const series of this.series.values()) {
      const text = (series.text ??= seriesText(this.name, series.labels));
      const { buckets } = series;
      let cumulative = 0;
      for (let i = 0; i < bounds.length; i++) {
        cumulative += buckets[i]!;
        lines.push(`${text.bucket}${bounds[i]}"} ${cumulative}`);
      }
      lines.push(`${text.bucket}+Inf"} ${cumulative + buckets[bounds.length]!}`);
      lines.push(`${text.sum}${numberText(series.sum)}`, `${text.count}${series.count}`);
    }
    return lines.join('\n');
  }
}

/** A series' line beginnings (see Series.text). */
function seriesText(name: string, labels: Labels): { bucket: string; sum: string; count: string } {
  const pairs = Object.entries(labels).map(([label, value]) => `${label}="${escapeLabel(value)}"`);
  const own = pairs.length === 0 ? '' : `{${pairs.join(',')}}`;
  return {
    bucket: `${name}_bucket{${pairs.map((pair) => `${pair},`).join('')}le="`,
    sum: `${name}_sum${own} `,
    count: `${name}_count${own} `,
  };
}

/** Prometheus' escaping of help text (backslash, newline), and of a label value (also the double quote). */
function escapeText(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function escapeLabel(value: string | number): string | number {
  return typeof value === 'string' ? escapeText(value).replace(/"/g, '\\"') : value;
}

/** A sample's value as Prometheus' text format writes it (prom-client's `getValueAsString`). */
function numberText(value: number): string {
  if (Number.isNaN(value)) return 'Nan';
  if (!Number.isFinite(value)) return value < 0 ? '-Inf' : '+Inf';
  return `${value}`;
}

/**
 * The event loop's delay (perf_hooks.monitorEventLoopDelay: how late a timer sampled every millisecond ran), as a
 * Prometheus histogram, and the longest delay since the previous scrape as a gauge: every stall of the thread
 * that answers requests, whatever caused it. At each scrape the samples since the last one are added to the
 * buckets (the count of samples at or under each bound, read from the sampler's own histogram) and the sampler
 * starts over.
 */
class LoopDelay {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name = 'tessera_event_loop_delay_seconds';
  readonly help =
    'How late the event loop ran a timer sampled every millisecond: each stall of the thread that answers requests (synchronous work, garbage collection).';
  private readonly sampler: IntervalHistogram = monitorEventLoopDelay({
    resolution: LOOP_DELAY_RESOLUTION_MS,
  });
  private readonly cumulative = new Array<number>(LOOP_DELAY_BUCKETS.length).fill(0);
  private count = 0;
  private sum = 0;
  /** Seconds: the longest delay sampled since the previous scrape. */
  windowMax = 0;

  constructor() {
    this.sampler.enable();
  }

  /** Moves the samples taken since the last call into the buckets, and starts the sampler over. */
  private take(): void {
    const h = this.sampler;
    const count = h.count;
    this.windowMax = count === 0 ? 0 : h.max / 1e9;
    if (count > 0) {
      for (let i = 0; i < LOOP_DELAY_BUCKETS.length; i++)
        this.cumulative[i]! += Math.round((count * atOrUnder(h, LOOP_DELAY_BUCKETS[i]! * 1e9)) / 100);
      this.count += count;
      this.sum += (h.mean * count) / 1e9;
    }
    h.reset();
  }

  get() {
    this.take();
    const values: { labels: Labels; value: number; metricName: string }[] = [];
    LOOP_DELAY_BUCKETS.forEach((le, i) =>
      values.push({ labels: { le }, value: this.cumulative[i]!, metricName: `${this.name}_bucket` }),
    );
    values.push({ labels: { le: '+Inf' }, value: this.count, metricName: `${this.name}_bucket` });
    values.push({ labels: {}, value: this.sum, metricName: `${this.name}_sum` });
    values.push({ labels: {}, value: this.count, metricName: `${this.name}_count` });
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  close(): void {
    this.sampler.disable();
  }
}

/** The percentage of a histogram's samples at or under `bound` (nanoseconds), found by bisection. */
function atOrUnder(h: IntervalHistogram, bound: number): number {
  if (h.max <= bound) return 100;
  if (h.min > bound) return 0;
  let low = 0;
  let high = 100;
  for (let i = 0; i < 24; i++) {
    const mid = (low + high) / 2;
    if (h.percentile(mid) <= bound) low = mid;
    else high = mid;
  }
  return low;
}

/**
 * Tessera's Prometheus metrics (prom-client), in a registry of their own (one per server, so tests running
 * several servers in one process do not share counters). Label values are bounded: routes as declared,
 * methods Node's parser accepts, OAuth error codes, registered audiences only, store operation names;
 * never a client id or request text.
 *
 * The request path only bumps plain numbers (a keyed histogram, counts in maps); prom-client's counters are
 * filled from them when Prometheus scrapes.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly requestDuration = new KeyedHistogram(
    'tessera_http_request_duration_seconds',
    'Time from the start of a request until its answer is handed to the socket, by method, route and status.',
    REQUEST_BUCKETS,
  );
  private readonly storeDuration = new KeyedHistogram(
    'tessera_store_operation_duration_seconds',
    'Latency of store operations (client lookups on a cache miss, change feed reads, audit writes, …).',
    STORE_BUCKETS,
  );
  private readonly issued = new Map<string, number>();
  private readonly failures = new Map<
    string,
    { labels: { reason: string; audience: string }; count: number }
  >();

  private readonly loopDelay = new LoopDelay();

  /** Fetches of issuers' keys, by issuer: how many, how many failed. */
  private readonly issuerFetches = new Map<string, { fetches: number; failures: number }>();

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry });
    this.registry.registerMetric(this.requestDuration as unknown as Metric);
    const loopDelay = this.loopDelay;
    this.registry.registerMetric(loopDelay as unknown as Metric);
    new Gauge({
      name: 'tessera_event_loop_delay_max_seconds',
      // Under --workers, the cluster figure is the worst worker's.
      aggregator: 'max',
      help: 'The longest event loop delay since the previous scrape (see tessera_event_loop_delay_seconds).',
      registers,
      collect() {
        // Exposed after the histogram, which moved the window's samples and measured this.
        this.set(loopDelay.windowMax);
      },
    });

    const issued = this.issued;
    new Counter({
      name: 'tessera_tokens_issued_total',
      help: 'Access tokens issued, by audience.',
      labelNames: ['audience'],
      registers,
      collect() {
        this.reset();
        for (const [audience, count] of issued) this.inc({ audience }, count);
      },
    });
    const failures = this.failures;
    new Counter({
      name: 'tessera_token_failures_total',
      help: `Token requests refused, by OAuth error code and requested audience ("${UNREGISTERED}" if none or not registered).`,
      labelNames: ['reason', 'audience'],
      registers,
      collect() {
        this.reset();
        for (const { labels, count } of failures.values()) this.inc(labels, count);
      },
    });
    this.registry.registerMetric(this.storeDuration as unknown as Metric);
    const issuerFetches = this.issuerFetches;
    new Counter({
      name: 'tessera_issuer_key_fetches_total',
      help: "Fetches of a federated credential's issuer's keys (its key set, after its OpenID metadata when found by discovery), by issuer.",
      labelNames: ['issuer'],
      registers,
      collect() {
        this.reset();
        for (const [issuer, { fetches }] of issuerFetches) this.inc({ issuer }, fetches);
      },
    });
    new Counter({
      name: 'tessera_issuer_key_fetch_failures_total',
      help: "Fetches of a federated credential's issuer's keys that gave none (unreachable, refused, not a key set), by issuer.",
      labelNames: ['issuer'],
      registers,
      collect() {
        this.reset();
        for (const [issuer, { failures }] of issuerFetches) this.inc({ issuer }, failures);
      },
    });
  }

  /** Stops what samples on its own (the event loop's delay). */
  close(): void {
    this.loopDelay.close();
  }

  /** One fetch of an issuer's keys (keys/jwks-fetcher.ts) and whether it gave keys. */
  issuerKeyFetch(issuer: string, ok: boolean): void {
    let counts = this.issuerFetches.get(issuer);
    if (counts === undefined) {
      const label = this.issuerFetches.size < MAX_ISSUER_LABELS ? issuer : OTHER_ISSUERS;
      counts = this.issuerFetches.get(label);
      if (counts === undefined) {
        counts = { fetches: 0, failures: 0 };
        this.issuerFetches.set(label, counts);
      }
    }
    counts.fetches++;
    if (!ok) counts.failures++;
  }

  /** Client cache lookups, read at scrape time from the directory's plain counters. */
  watchCache(cache: () => CacheStats): void {
    const registers = [this.registry];
    const seen = { hits: 0, unknownHits: 0, misses: 0, unregistered: 0 };
    new Counter({
      name: 'tessera_client_cache_lookups_total',
      help: 'Client lookups on the token path: "hit" (known client in memory), "unknown_hit" (id known not to exist), "miss" (asked the store), "unregistered" (an id no client has, by the in-memory set of client ids: no lookup, one read of the change feed).',
      labelNames: ['result'],
      registers,
      collect() {
        const now = cache();
        this.inc({ result: 'hit' }, now.hits - seen.hits);
        this.inc({ result: 'unknown_hit' }, now.unknownHits - seen.unknownHits);
        this.inc({ result: 'miss' }, now.misses - seen.misses);
        this.inc({ result: 'unregistered' }, now.unregistered - seen.unregistered);
        Object.assign(seen, now);
      },
    });
    new Gauge({
      name: 'tessera_client_cache_hit_ratio',
      // Under --workers, the cluster figure is the workers' mean, not their sum.
      aggregator: 'average',
      help: 'Share of client lookups answered from memory since the process started (hits and unknown hits over all lookups).',
      registers,
      collect() {
        const { hits, unknownHits, misses, unregistered } = cache();
        // An unregistered id waited for a read of the feed: not answered from memory alone.
        const total = hits + unknownHits + misses + unregistered;
        this.set(total === 0 ? 0 : (hits + unknownHits) / total);
      },
    });
  }

  /** The audit trail's spool, read at scrape time. */
  /** Traces (docs/traces.md): the spans the SDK's batch processor dropped, its export queue full. */
  watchTracing(dropped: () => Promise<number>): void {
    let seen = 0;
    new Counter({
      name: 'tessera_otel_spans_dropped_total',
      help: 'Spans dropped because the export queue was full (the exporter slow, down or refusing): never a delayed answer.',
      registers: [this.registry],
      async collect() {
        const now = await dropped();
        this.inc(now - seen);
        seen = now;
      },
    });
  }

  /** TESSERA_APPLY_FILE: 1 while its last reading is applied, 0 while it is refused (the running one kept). */
  watchApplyFile(ok: () => boolean): void {
    new Gauge({
      name: 'tessera_apply_file_ok',
      help: 'Whether the last reading of TESSERA_APPLY_FILE was applied (1) or refused, the configuration before it kept (0).',
      registers: [this.registry],
      collect() {
        this.set(ok() ? 1 : 0);
      },
    });
  }

  watchAudit(audit: () => { queued: number; spoolBytes: number; dropped: number }): void {
    const registers = [this.registry];
    new Gauge({
      name: 'tessera_audit_events_queued',
      help: 'Audit events on the spool, not yet written to the store.',
      registers,
      collect() {
        this.set(audit().queued);
      },
    });
    new Gauge({
      name: 'tessera_audit_spool_bytes',
      help: 'Bytes the audit spool holds on disk (bounded by TESSERA_AUDIT_SPOOL_MAX).',
      registers,
      collect() {
        this.set(audit().spoolBytes);
      },
    });
    let seen = 0;
    new Counter({
      name: 'tessera_audit_events_dropped_total',
      help: 'Audit events that could not be spooled (the spool full, or the disk refusing the write).',
      registers,
      collect() {
        const now = audit().dropped;
        this.inc(now - seen);
        seen = now;
      },
    });
  }

  /** Whether this process counts failed attempts and quotas in Redis (its breaker closed), read at scrape time. */
  watchRedis(up: () => boolean): void {
    new Gauge({
      name: 'tessera_redis_up',
      // Under --workers, 1 only if every worker counts in Redis.
      aggregator: 'min',
      help: 'Whether failed attempts and quotas are counted in Redis (1), or in memory because Redis failed or hung and has not answered a probe since (0).',
      registers: [this.registry],
      collect() {
        this.set(up() ? 1 : 0);
      },
    });
  }

  /** The HTTP server's connections (src/http/connections.ts), read at scrape time. */
  watchConnections(connections: () => { open: number; closedIdleAtCap: number; refusedAtCap: number }): void {
    const registers = [this.registry];
    new Gauge({
      name: 'tessera_http_connections',
      help: 'HTTP connections open now (under --workers, summed over the workers).',
      registers,
      collect() {
        this.set(connections().open);
      },
    });
    const seen = { closedIdleAtCap: 0, refusedAtCap: 0 };
    new Counter({
      name: 'tessera_http_connections_closed_total',
      help: 'Connections closed by the server because TESSERA_MAX_CONNECTIONS was reached: "cap_idle" (an idle one, to make room for a new one), "cap_refused" (the new one, when none was idle).',
      labelNames: ['reason'],
      registers,
      collect() {
        const now = connections();
        this.inc({ reason: 'cap_idle' }, now.closedIdleAtCap - seen.closedIdleAtCap);
        this.inc({ reason: 'cap_refused' }, now.refusedAtCap - seen.refusedAtCap);
        seen.closedIdleAtCap = now.closedIdleAtCap;
        seen.refusedAtCap = now.refusedAtCap;
      },
    });
  }

  /** One answered request. `route` is the declared route, or "(unmatched)" for a 404. */
  observeRequest(method: string, route: string, statusCode: number, seconds: number): void {
    const series = this.requestDuration.seriesFor(`${method} ${route} ${statusCode}`, () => ({
      method,
      route,
      status_code: statusCode,
    }));
    this.requestDuration.observe(series, seconds);
  }

  /**
   * One token request's outcome, from the token service's audit entry. `registered` tells whether the
   * requested audience is a registered one, so that made-up audiences collapse into one label value.
   */
  tokenOutcome(entry: AuditEntry, registered: (audience: string) => boolean): void {
    if (entry.type === 'token.issued' || entry.type === 'token.exchanged') {
      const audience = entry.audience ?? UNREGISTERED;
      this.issued.set(audience, (this.issued.get(audience) ?? 0) + 1);
      return;
    }
    // The reason is "<OAuth error code>: <detail>"; the code is one of a handful.
    const reason = entry.reason?.split(':', 1)[0] ?? 'server_error';
    const audience = entry.audience !== null && registered(entry.audience) ? entry.audience : UNREGISTERED;
    const key = `${reason} ${audience}`;
    const failure = this.failures.get(key);
    if (failure) failure.count++;
    else this.failures.set(key, { labels: { reason, audience }, count: 1 });
  }

  /**
   * The store, with every method's latency observed under its name. Only calls from outside the store are
   * timed (its own internal calls bypass the wrapper).
   */
  timedStore<S extends Store>(store: S): S {
    const wrappers = new Map<PropertyKey, unknown>();
    const histogram = this.storeDuration;
    return new Proxy(store, {
      get(target, property, receiver) {
        const value: unknown = Reflect.get(target, property, receiver);
        if (typeof value !== 'function' || typeof property !== 'string') return value;
        let wrapper = wrappers.get(property);
        if (wrapper === undefined) {
          const ok = histogram.seriesFor(`${property} ok`, () => ({ operation: property, outcome: 'ok' }));
          const failed = histogram.seriesFor(`${property} error`, () => ({
            operation: property,
            outcome: 'error',
          }));
          wrapper = function (this: unknown, ...args: unknown[]): unknown {
            const started = performance.now();
            const result: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
            if (!(result instanceof Promise)) return result;
            return result.then(
              (answer: unknown) => {
                histogram.observe(ok, (performance.now() - started) / 1000);
                return answer;
              },
              (error: unknown) => {
                histogram.observe(failed, (performance.now() - started) / 1000);
                throw error;
              },
            );
          };
          wrappers.set(property, wrapper);
        }
        return wrapper;
      },
    });
  }

  /** The exposition under way, which a scrape that comes meanwhile waits for (see exposition()). */
  private exposing: Promise<unknown> = Promise.resolve();

  /**
   * The exposition text and its content type: the text prom-client's `registry.metrics()` gives, written a
   * metric at a time, the event loop let in whenever about a millisecond of the thread has gone (one metric is
   * never split). Written in one go it held the thread 6–10 ms at every scrape (~800 lines). The metrics of one
   * scrape are thus collected a few milliseconds apart, which Prometheus does not mind. Scrapes take turns, so
   * that one's collection never runs between the parts of another's (the loop delay's window and its maximum).
   * Under --workers the primary writes the cluster's text from each worker's `get()` (metrics/cluster.ts).
   */
  exposition(): Promise<Exposition> {
    const next = this.exposing.then(() => this.expose());
    this.exposing = next.catch(() => undefined);
    return next;
  }

  private async expose(): Promise<Exposition> {
    const parts: string[] = [];
    let slice = performance.now();
    // prom-client's type of a registered metric does not allow for metrics of other classes (KeyedHistogram).
    for (const metric of this.registry.getMetricsAsArray() as unknown[]) {
      parts.push(
        metric instanceof KeyedHistogram
          ? metric.text()
          : await this.registry.getSingleMetricAsString((metric as { name: string }).name),
      );
      if (performance.now() - slice >= EXPOSITION_SLICE_MS) {
        await new Promise(setImmediate);
        slice = performance.now();
      }
    }
    return { contentType: this.registry.contentType, text: `${parts.join('\n\n')}\n` };
  }
}
