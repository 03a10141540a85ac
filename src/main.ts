import cluster from 'node:cluster';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config/index.js';
import { buildApp, type AppDeps } from './http/app.js';
import { clusterExposition } from './metrics/cluster.js';
import type { Metrics } from './metrics/metrics.js';
import { createLogger } from './logger.js';
import { openRuntime, type Runtime } from './runtime.js';

export interface Server {
  app: FastifyInstance;
  runtime: Runtime;
  /** The address actually bound, e.g. http://127.0.0.1:8080. */
  address: string;
  close(): Promise<void>;
}

/** This process's metrics, or under `--workers` the whole cluster's, collected through the primary. */
function metricsFor(metrics: Metrics | undefined): AppDeps['metrics'] {
  if (!metrics) return undefined;
  const exposition = cluster.isWorker ? clusterExposition(metrics.registry) : () => metrics.exposition();
  return { observeRequest: metrics.observeRequest.bind(metrics), exposition };
}

/** load config → open store → build app → listen. */
export async function startServer(config: Config, logger: Logger = createLogger(config)): Promise<Server> {
  const runtime = await openRuntime(config, logger);
  const app = buildApp({
    issuer: config.issuer,
    defaultAlg: config.signingAlg,
    tokens: runtime.tokens,
    directory: runtime.directory,
    keyring: runtime.keyring,
    store: runtime.store,
    logger,
    requestTimeoutMs: config.requestTimeout * 1000,
    trustProxy: config.trustProxy,
    metrics: metricsFor(runtime.metrics),
  });
  let address: string;
  try {
    address = await app.listen({ port: config.port, host: config.host });
  } catch (error) {
    await runtime.close();
    throw error;
  }
  logger.info({ address, issuer: config.issuer, store: runtime.store.engine }, 'tessera is listening');
  let closing: Promise<void> | undefined;
  return {
    app,
    runtime,
    address,
    close() {
      // Stop accepting, let requests in flight finish, then close the store.
      closing ??= app.close().then(() => runtime.close());
      return closing;
    },
  };
}

/** Printed once when the store has no client yet: how to get a first token. */
export function firstTokenHint(issuer: string): string {
  const audience = 'https://api.example.com';
  return [
    '',
    `Tessera is running; its issuer is ${issuer}. No clients yet. A first token in three steps:`,
    '',
    `  1. npx tessera audience add ${audience} --name "Example API"`,
    `  2. npx tessera client create --name demo --grant ${audience}`,
    `  3. curl -s ${issuer}/oauth/token -d grant_type=client_credentials \\`,
    `       -d client_id=<client_id> -d client_secret=<client_secret> -d audience=${audience}`,
    '',
  ].join('\n');
}

/** `tessera serve`: runs until SIGTERM or SIGINT, then shuts down gracefully. */
export async function runServer(config: Config, options: { hint?: boolean } = {}): Promise<void> {
  const logger = createLogger(config);
  if (config.production && config.issuer.startsWith('http://')) {
    // RFC 6749 §3.2 and RFC 9700: the token endpoint must be reached over TLS.
    logger.warn(
      { issuer: config.issuer },
      'TESSERA_ISSUER is http:// in production; clients must reach Tessera over https',
    );
  }
  const server = await startServer(config, logger);
  if (options.hint !== false && (await server.runtime.store.countClients()) === 0)
    process.stderr.write(firstTokenHint(config.issuer) + '\n');

  const shutdown = (signal: NodeJS.Signals): void => {
    logger.info({ signal }, 'shutting down: finishing requests in flight');
    process.once(signal, () => {
      logger.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    });
    server.close().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}
