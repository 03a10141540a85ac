/*
 * The trace and span ids of the request being served, for its log lines (INTERFACE.md, "Traces": every JSON log line
 * written for a request carries `trace_id` and `span_id`). The logger asks this module, which imports nothing of
 * OpenTelemetry: the SDK (otel.ts) gives it the function that reads the active span, when tracing is on.
 */

type Ids = { trace_id: string; span_id: string } | undefined;

let current: (() => Ids) | undefined;

/** The function that gives the active span's ids (undefined: tracing stopped). */
export function setLogContext(ids: (() => Ids) | undefined): void {
  current = ids;
}

/** The ids of the span active now, for a log line; none outside a request or without tracing. */
export function logContext(): object {
  return current?.() ?? {};
}
