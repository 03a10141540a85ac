/*
 * CLIENT spans (docs/traces.md): whatever leaves the process on a request's behalf — a store query on a cache miss,
 * a key set or discovery fetch — in the request's own trace. The parts that do such work call clientSpan; it costs a
 * test of one variable when tracing is off, and imports nothing of OpenTelemetry: the SDK (otel.ts) gives it the
 * function that starts a span in the active context, when tracing is on.
 */

/** A started CLIENT span: ended with the outcome, and given attributes known only then. */
export interface StartedSpan {
  set(name: string, value: string | number): void;
  end(error?: unknown): void;
}

type Start = (name: string, attributes: Record<string, string | number>) => StartedSpan;

let start: Start | undefined;

/** The SDK's span starter (undefined: tracing stopped). */
export function setClientSpans(starter: Start | undefined): void {
  start = starter;
}

/** A CLIENT span around `work`, when tracing is on; `work` alone otherwise. `onValue` reads attributes off the result. */
export function clientSpan<T>(
  name: string,
  attributes: Record<string, string | number>,
  work: () => Promise<T>,
  onValue?: (span: StartedSpan, value: T) => void,
): Promise<T> {
  if (start === undefined) return work();
  const span = start(name, attributes);
  return work().then(
    (value) => {
      onValue?.(span, value);
      span.end();
      return value;
    },
    (error: unknown) => {
      span.end(error);
      throw error;
    },
  );
}
