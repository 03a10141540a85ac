import { pino, type Logger } from 'pino';
import type { Config } from './config/index.js';

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
  };
  return destination ? pino(options, destination) : pino(options);
}
