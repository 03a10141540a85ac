import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';

/* What the rest of Tessera sees of tracing (tracing.ts): the interfaces, apart from the SDK that implements them. */

/** The span of one request, as the code that answers it sees it. */
export interface RequestSpan {
  /** One of Tessera's own attributes (attributes.ts). */
  set(name: string, value: string): void;
  /** The route's template, once known: the span is named `<method> <route>`. */
  route(template: string): void;
}

export interface Tracing {
  /**
   * Runs `handle` for the request within its SERVER span (its context active, so that the log lines of the request
   * carry the span's ids), and ends the span when the answer is written or the connection closes.
   */
  serve(request: IncomingMessage, response: ServerResponse, handle: () => void): void;
  /**
   * Binds the request's and the response's event listeners to its span's context (the request's body arrives in
   * events of its socket's parser, made before that context), for a request served by Fastify: its log lines then
   * carry the span's ids. The token lane binds its one listener itself, more cheaply.
   */
  bind(request: IncomingMessage, response: ServerResponse): void;
  /** The request's span, if it has one (a sampled-out request has none). */
  spanOf(request: IncomingMessage): RequestSpan | undefined;
  /** Spans dropped because the export queue was full (tessera_otel_spans_dropped_total). */
  droppedSpans(): Promise<number>;
  /** Exports what it can within `timeoutMs`, then stops. */
  shutdown(timeoutMs: number): Promise<void>;
}

export interface TracingOptions {
  env: NodeJS.ProcessEnv;
  /** TESSERA_TRUST_PROXY: from these peers an incoming traceparent is the parent of the span. */
  trustProxy: false | string[];
  /** TESSERA_OTEL_TRUST_REMOTE: every caller's traceparent is the parent. */
  trustRemote: boolean;
  logger: Logger;
}
