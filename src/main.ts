import cluster from 'node:cluster';
import { Server as NetServer } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config/index.js';
import { listenerClosedEverywhere } from './cluster-listeners.js';
import { buildApp, type ShutdownState } from './http/app.js';
import { Connections } from './http/connections.js';
import { watchTls } from './http/tls.js';
import type { Server as HttpsServer } from 'node:https';
import { createLogger } from './logger.js';
import { openRuntime, type Runtime, type RuntimeOptions } from './runtime/index.js';

export interface Server {
  app: FastifyInstance;
  runtime: Runtime;
  /** The address actually bound, e.g. http://127.0.0.1:8080. */
  address: string;
  connections: Connections;
  /**
   * Stops now: the listener closes, idle connections are closed, requests in flight finish, the runtime
   * closes. For tests and embedding; `tessera serve` shuts down with shutdown().
   */
  close(): Promise<void>;
  /** The graceful shutdown of `tessera serve` on SIGTERM/SIGINT (see shutDown). */
  shutdown(context?: Record<string, unknown>): Promise<void>;
  /**
   * Reads TESSERA_TLS_CERT, TESSERA_TLS_KEY and TESSERA_TLS_CLIENT_CA again (SIGHUP): false when they do not load
   * (the running ones are kept) or none is configured.
   */
  reloadTls(): boolean;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/**
 * Connections the kernel completes and queues for the server to accept (capped by net.core.somaxconn, 4096 by
 * default since Linux 5.4). Node's default is 511: past it, a burst of new connections had SYNs dropped, and each
 * dropped one waited for its retransmission, 1 s and more (README, _Performance and the runtime_: "The first answers
 * of a run").
 */
const LISTEN_BACKLOG = 4096;

/** How long a worker waits for the primary to say that every worker has stopped listening. */
const LISTENERS_CLOSED_WAIT_MS = 2000;

/**
 * Stops accepting connections without touching the open ones. http.Server.close() would also close every
 * idle keep-alive connection at once (Node ≥ 19), and a client that sent its next request at that instant
 * would have it reset; it would also stop the request-timeout checks that the drain still relies on.
 */
function closeListener(app: FastifyInstance): void {
  NetServer.prototype.close.call(app.server, () => undefined);
}

/**
 * The graceful shutdown, in order: /readyz answers 503 and every answer carries `Connection: close`; the
 * server keeps serving for TESSERA_SHUTDOWN_DELAY, so that load balancers notice and move on; the listener
 * closes (new connections are refused); every request received is answered, each connection closing after its
 * answer or at the end of its keep-alive timeout (which clients were told, `Keep-Alive: timeout=`), and what
 * is still open after TESSERA_SHUTDOWN_TIMEOUT is destroyed (logged); then the runtime closes (the audit
 * trail flushed, the store closed).
 */
async function shutDown(
  config: Config,
  logger: Logger,
  parts: { app: FastifyInstance; runtime: Runtime; connections: Connections; state: ShutdownState },
  context: Record<string, unknown>,
): Promise<void> {
  const { app, runtime, connections, state } = parts;
  state.draining = true;
  connections.closeAfterAnswer();
  logger.info(
    { ...context, delayMs: config.shutdownDelay * 1000, connections: connections.size },
    'shutting down: draining',
  );
  await sleep(config.shutdownDelay * 1000);
  closeListener(app);
  logger.info(
    { connections: connections.size, timeoutMs: config.shutdownTimeout * 1000 },
    'shutting down: listener closed',
  );
  // From here every answer closes its connection: the client reconnects, and is refused. Under --workers
  // the port closes with the last worker's listener; until then a client would be handed to a worker that
  // is still listening, or held by the primary and reset (see cluster-listeners.ts).
  if (cluster.isWorker) await listenerClosedEverywhere(LISTENERS_CLOSED_WAIT_MS);
  connections.closeAllAfterAnswer();
  const destroyed = await connections.drained(config.shutdownTimeout * 1000);
  if (destroyed > 0) {
    logger.warn(
      { destroyed, timeoutMs: config.shutdownTimeout * 1000 },
      'shutting down: connections still open at TESSERA_SHUTDOWN_TIMEOUT were closed',
    );
  }
  await app.close();
  await runtime.close();
}

/**
 * open the runtime → build the app → listen. A start that fails closes what it opened. `options.clock`: the
 * runtime's clock (see RuntimeOptions).
 */
export async function startServer(
  config: Config,
  logger: Logger = createLogger(config),
  options: RuntimeOptions = {},
): Promise<Server> {
  const runtime = await openRuntime(config, logger, options);
  const state: ShutdownState = {
    draining: false,
    closesConnection: (socket) => connections.closesAfterAnswer(socket),
  };
  let app: FastifyInstance | undefined;
  let connections: Connections;
  let address: string;
  try {
    app = buildApp({ ...runtime.app, shutdown: state });
    connections = new Connections(app.server, { max: config.maxConnections, logger, clock: options.clock });
    const counted = connections;
    runtime.metrics?.watchConnections(() => counted.stats);
    address = await app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG });
    // Fastify names the address by its own https option, which a server made by serverFactory does not set.
    if (config.tls !== undefined) address = address.replace(/^http:/, 'https:');
  } catch (error) {
    // E.g. the port is taken: the app (its timers) and the runtime are closed; the listen error is the answer.
    await app?.close().catch(() => undefined);
    await runtime.close().catch(() => undefined);
    throw error;
  }
  logger.info({ address, issuer: config.issuer, store: runtime.store.engine }, 'tessera is listening');
  const certificates = runtime.app.certificates;
  const tls =
    certificates === undefined || (config.tls === undefined && config.tlsClientCa === undefined)
      ? undefined
      : watchTls(
          {
            tls: config.tls === undefined ? undefined : { server: app.server as HttpsServer, ...config.tls },
            clientCa: config.tlsClientCa,
          },
          certificates,
          logger,
        );
  let stopping: Promise<void> | undefined;
  return {
    app,
    runtime,
    address,
    connections,
    close() {
      // Stop accepting, close idle connections, let requests in flight finish, then close the store.
      stopping ??= (async () => {
        tls?.stop();
        state.draining = true;
        connections.closeAllAfterAnswer();
        await app.close();
        await runtime.close();
      })();
      return stopping;
    },
    shutdown(context = {}) {
      tls?.stop();
      stopping ??= shutDown(config, logger, { app, runtime, connections, state }, context);
      return stopping;
    },
    reloadTls: () => tls?.reload() ?? false,
  };
}

/**
 * Printed once when the store has no client yet: how to get a first token. In the image (TESSERA_CONTAINER), which
 * has neither npx nor a shell: the settings that make the first clients from files, or the image's own command.
 */
export function firstTokenHint(issuer: string, container = false): string {
  const audience = 'https://api.example.com';
  if (container)
    return [
      '',
      `Tessera is running; its issuer is ${issuer}. No clients yet. Make the first ones from files (docs/production.md):`,
      '',
      '  TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID and TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE: an admin client for /admin/v1',
      '  TESSERA_APPLY_FILE: audiences and clients from a declarative file (tessera apply), kept applied',
      '',
      "or with the image's tessera command on the same /data volume, e.g.:",
      `  docker run --rm -v <volume>:/data <image> audience add ${audience}`,
      `  docker run --rm -v <volume>:/data <image> client create --name demo --grant ${audience}`,
      '',
    ].join('\n');
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
    process.stderr.write(firstTokenHint(config.issuer, config.container) + '\n');

  let signalled = false;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (signalled) {
      logger.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    signalled = true;
    server.shutdown({ signal }).then(
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
  process.on('SIGTERM', shutdown);
  // New TLS files without a restart (docs/mtls.md); the primary of --workers relays it to each worker.
  process.on('SIGHUP', () => void server.reloadTls());
  if (cluster.isWorker) {
    // A worker is told to stop by its primary (SIGTERM). Ctrl-C in a terminal sends SIGINT to the whole
    // process group: the primary relays it, so the worker's own copy must not count as a second signal.
    process.on('SIGINT', () => undefined);
  } else {
    process.on('SIGINT', shutdown);
  }
}
