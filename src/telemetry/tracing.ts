/*
 * Traces (docs/traces.md): off unless the standard OpenTelemetry variables ask for them, and then the
 * OpenTelemetry SDK for Node, loaded only then (otel.ts: a server without tracing does not even import it). What the
 * rest of Tessera sees is this small interface: the SERVER span of each request (made by Tessera itself, because
 * the token endpoint bypasses Fastify on its fast path), which the token endpoint and the admin API give their
 * attributes (attributes.ts).
 */

import { secretSetting } from '../config/index.js';

export type { RequestSpan, Tracing, TracingOptions } from './types.js';
import type { Tracing, TracingOptions } from './types.js';

const truthy = (value: string | undefined): boolean => value?.trim().toLowerCase() === 'true';

/**
 * Whether the OpenTelemetry variables ask for traces (INTERFACE.md, "Traces"): OTEL_TRACES_EXPORTER naming otlp, or
 * an OTLP endpoint set (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); never with
 * OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
 */
export function tracingConfigured(env: NodeJS.ProcessEnv): boolean {
  if (truthy(env.OTEL_SDK_DISABLED)) return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  if (exporters.includes('none')) return false;
  if (exporters.includes('otlp')) return true;
  return (
    (env.OTEL_EXPORTER_OTLP_ENDPOINT ?? '').trim() !== '' ||
    (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? '').trim() !== ''
  );
}

/** The OpenTelemetry settings that may hold a secret (a vendor's API key): each has a `_FILE` form, as Tessera's do. */
const SECRET_SETTINGS = ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'] as const;

/**
 * `OTEL_EXPORTER_OTLP_HEADERS_FILE` (and the traces-only one): the headers read from a mounted secret into the
 * variable the SDK reads, so that an API key need not be in a manifest or the process's environment as given.
 */
function readSecretSettings(env: NodeJS.ProcessEnv): void {
  for (const name of SECRET_SETTINGS) {
    if ((env[`${name}_FILE`] ?? '').trim() === '') continue;
    env[name] = secretSetting(env, name, process.cwd());
  }
}

/** The tracing the environment asks for, the SDK loaded for it; undefined (and nothing loaded) when it asks for none. */
export async function openTracing(options: TracingOptions): Promise<Tracing | undefined> {
  if (!tracingConfigured(options.env)) return undefined;
  readSecretSettings(options.env);
  const { startTracing } = await import('./otel.js');
  return startTracing(options);
}
