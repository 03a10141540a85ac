import { pino, type Logger } from 'pino';
import type { Config } from './config/index.js';
import { logContext } from './telemetry/log-context.js';
import { tracingConfigured } from './telemetry/tracing.js';

/**
 * Structured JSON logs. Secrets and tokens are never logged by Tessera; these paths are redacted as a
 * second line of defence in case a request or body ever reaches a log call.
 */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level: config.logLevel,
    base: { service: 'tessera' },
    redact: {
      paths: [
        'req.headers.authorization',
        'req.body',
        'body',
        'client_secret',
        'access_token',
        '*.client_secret',
        '*.access_token',
        '*.authorization',
        // Node's HTTP parser errors carry the raw bytes received, Authorization header and body included.
        'err.rawPacket',
        '*.rawPacket',
      ],
      censor: '[redacted]',
    },
    // With tracing on, each line written for a request carries its trace_id and span_id (docs/traces.md); without,
    // no function runs per line.
    ...(tracingConfigured(process.env) ? { mixin: logContext } : {}),
  };
  // Standard output is written asynchronously: lines that come while a write is in flight go out together in
  // the next one, so a busy server makes one write per batch of lines instead of one per line (at `info`,
  // one audit line per token), and a slow reader of the log never stalls the event loop. Lines still
  // buffered are written on exit. Each write is whole lines of at most PIPE_BUF (4 KiB) bytes, which a pipe
  // takes atomically: the lines of `--workers` processes sharing one stdout never cut into each other.
  return pino(options, destination ?? pino.destination({ dest: 1, sync: false, maxWrite: 4096 }));
}
