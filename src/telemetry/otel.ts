import proxyAddr from '@fastify/proxy-addr';
import {
  context,
  diag,
  DiagLogLevel,
  isSpanContextValid,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type TextMapGetter,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { NodeSDK } from '@opentelemetry/sdk-node';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { setClientSpans } from './client-span.js';
import { setLogContext } from './log-context.js';
import type { RequestSpan, Tracing, TracingOptions } from './types.js';

/*
 * The OpenTelemetry SDK for Node, as Tessera runs it (docs/traces.md): NodeSDK configured by the standard OTEL_*
 * variables through its own parsing (the exporter and its protocol, endpoint and headers, the sampler, the batch
 * processor's queue, the resource), with no automatic instrumentation: the SERVER span of each request is made here,
 * around whatever serves the socket (the token lane or Fastify). Imported only when tracing is configured
 * (tracing.ts).
 *
 * Remote context (W3C Trace Context) is the parent only from a TESSERA_TRUST_PROXY peer or with
 * TESSERA_OTEL_TRUST_REMOTE=true; from anyone else the trace starts here, sampled by Tessera's own sampler whatever
 * the remote flags say, and the remote context is a link (INTERFACE.md: an internet caller does not choose what is
 * sampled).
 */

/**
 * The batch processor's report of the spans it dropped, its queue full (sdk-trace's BatchSpanProcessorBase: "Dropped
 * N spans because maxQueueSize reached", when the queue next has room). The SDK's own counter of them
 * (otel.sdk.processor.span.processed with error.type queue_full) is kept only with its experimental self-metrics,
 * which cost every span — sampled or not — a metric record: a tenth of the token rate at a 1 % sampler.
 */
const DROPPED = /^Dropped (\d+) spans? because maxQueueSize reached/;

/** W3C Trace Context's headers, as Node gives them (lower-case names). */
const headers: TextMapGetter<IncomingHttpHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};

/** `host[:port]` of a Host header, as server.address and server.port. */
function hostOf(host: string | undefined): Attributes {
  if (host === undefined || host === '') return {};
  const match = /^(\[[^\]]*\]|[^:]*)(?::(\d{1,5}))?$/.exec(host);
  if (!match) return {};
  return {
    'server.address': match[1]!,
    ...(match[2] === undefined ? {} : { 'server.port': Number(match[2]) }),
  };
}

class Handle implements RequestSpan {
  private template: string | undefined;
  private ended = false;

  constructor(
    readonly span: Span,
    private readonly method: string,
  ) {}

  set(name: string, value: string): void {
    this.span.setAttribute(name, value);
  }

  route(template: string): void {
    this.template = template;
  }

  end(status: number): void {
    if (this.ended) return;
    this.ended = true;
    const span = this.span;
    if (this.template !== undefined) {
      span.setAttribute('http.route', this.template);
      span.updateName(`${this.method} ${this.template}`);
    }
    span.setAttribute('http.response.status_code', status);
    // The HTTP conventions for a SERVER span: a 5xx is an error, a 4xx is the client's.
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }
}

export function startTracing(options: TracingOptions): Tracing {
  const { env, logger } = options;
  const sdk = new NodeSDK({
    // OpenTelemetry's default service name is unknown_service; Tessera's is tessera, unless OTEL_SERVICE_NAME says.
    ...((env.OTEL_SERVICE_NAME ?? '').trim() === '' ? { serviceName: 'tessera' } : {}),
    // Traces only (INTERFACE.md): no automatic instrumentation, and none of the SDK's metrics or logs (its default
    // OTLP metric reader would post to a collector that may take only traces, /metrics is Prometheus's).
    instrumentations: [],
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  // The SDK's diagnostics in Tessera's log (an export that fails, a setting it refuses), its reports of dropped
  // spans counted; at OTEL_LOG_LEVEL when that is more verbose than warn.
  let dropped = 0;
  const forward =
    (level: 'error' | 'warn' | 'info' | 'debug') =>
    (message: string): void => {
      const match = DROPPED.exec(message);
      if (match) dropped += Number(match[1]);
      else logger[level]({ otel: message.slice(0, 500) }, 'OpenTelemetry SDK');
    };
  const verbose = ['all', 'verbose', 'debug', 'info'].includes(
    (env.OTEL_LOG_LEVEL ?? '').trim().toLowerCase(),
  );
  diag.setLogger(
    {
      error: forward('error'),
      warn: forward('warn'),
      info: forward('info'),
      debug: forward('debug'),
      verbose: forward('debug'),
    },
    { logLevel: verbose ? DiagLogLevel.DEBUG : DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const tracer = trace.getTracer('tessera');
  const propagator = new W3CTraceContextPropagator();
  const trust = options.trustProxy === false ? undefined : proxyAddr.compile(options.trustProxy);
  const spans = new WeakMap<IncomingMessage, Handle>();
  setClientSpans((name, attributes) => {
    const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes });
    return {
      set: (key, value) => span.setAttribute(key, value),
      end(error?: unknown) {
        if (error !== undefined) {
          span.setStatus({ code: SpanStatusCode.ERROR });
          span.setAttribute('error.type', (error as Error)?.name ?? 'Error');
        }
        span.end();
      },
    };
  });
  setLogContext(() => {
    const active = trace.getActiveSpan()?.spanContext();
    return active === undefined ? undefined : { trace_id: active.traceId, span_id: active.spanId };
  });

  const clientAddress = (request: IncomingMessage): string =>
    trust === undefined ? (request.socket.remoteAddress ?? '') : proxyAddr(request, trust);

  return {
    serve(request: IncomingMessage, response: ServerResponse, handle: () => void): void {
      const method = request.method ?? 'GET';
      let parent: Context = ROOT_CONTEXT;
      let links: Link[] | undefined;
      if (request.headers.traceparent !== undefined) {
        const extracted = propagator.extract(ROOT_CONTEXT, request.headers, headers);
        const remote = trace.getSpanContext(extracted);
        if (remote !== undefined && isSpanContextValid(remote)) {
          const peer = request.socket.remoteAddress ?? '';
          if (options.trustRemote || trust?.(peer, 0) === true) parent = extracted;
          else links = [{ context: remote }];
        }
      }
      const span = tracer.startSpan(
        method,
        {
          kind: SpanKind.SERVER,
          root: parent === ROOT_CONTEXT,
          ...(links === undefined ? {} : { links }),
          attributes: { 'http.request.method': method },
        },
        parent,
      );
      // A request not sampled costs nothing more: the other attributes are read only for a recorded span.
      if (!span.isRecording()) return handle();
      const url = request.url ?? '/';
      const query = url.indexOf('?');
      span.setAttributes({
        'url.scheme': (request.socket as TLSSocket).encrypted === true ? 'https' : 'http',
        'url.path': query < 0 ? url : url.slice(0, query),
        ...hostOf(request.headers.host),
        'client.address': clientAddress(request),
        'network.protocol.version': request.httpVersion,
      });
      const handled = new Handle(span, method);
      spans.set(request, handled);
      const end = () => handled.end(response.statusCode);
      response.once('finish', end);
      response.once('close', end);
      context.with(trace.setSpan(parent, span), handle);
    },
    spanOf: (request) => spans.get(request),
    bind(request: IncomingMessage, response: ServerResponse): void {
      if (!spans.has(request)) return;
      const active = context.active();
      context.bind(active, request);
      context.bind(active, response);
    },
    droppedSpans: () => Promise.resolve(dropped),
    async shutdown(timeoutMs: number): Promise<void> {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      });
      try {
        await Promise.race([sdk.shutdown().catch(() => undefined), deadline]);
      } finally {
        clearTimeout(timer);
        setLogContext(undefined);
        setClientSpans(undefined);
      }
    },
  };
}
