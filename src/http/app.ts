import Fastify, { LogController, type FastifyInstance } from 'fastify';
import { createServer, type RequestListener } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions as HttpsOptions } from 'node:https';
import type { Socket } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Tracing } from '../telemetry/tracing.js';
import type { ApplyFileStatus } from './routes/health.js';
import type { Logger } from 'pino';
import type { SigningAlg } from '../domain/jose.js';
import type { RevocationService } from '../domain/revocation.js';
import type { TokenService } from '../domain/token-service.js';
import type { Keyring } from '../keys/keyring.js';
import type { Exposition } from '../metrics/metrics.js';
import type { Outage } from '../outage.js';
import type { Directory } from '../read-model/directory.js';
import type { Store } from '../store/types.js';
import { adminApi, type AdminApiDeps } from './admin/index.js';
import { BODY_LIMIT, registerBodyParsers } from './body.js';
import { consoleRoutes, type ConsoleDeps } from './console/index.js';
import type { ClientCertificates } from './client-certificates.js';
import { clientErrorHandler, registerErrorHandlers } from './errors.js';
import { discoveryRoutes, TOKEN_PATH } from './routes/discovery.js';
import { healthRoutes } from './routes/health.js';
import { metricsRoutes } from './routes/metrics.js';
import { revocationRoutes } from './routes/revocation.js';
import { tokenRoutes } from './routes/token.js';
import { AnswerFinish, type RequestObserver } from './finish.js';
import { TokenEndpoint } from './token-endpoint.js';
import { TokenLane } from './token-lane.js';
import { Turns } from './turns.js';

/**
 * A connection with a request in progress that sees no traffic for this long is closed. Between requests,
 * the keep-alive timeout (TESSERA_KEEPALIVE_TIMEOUT) applies instead.
 */
const CONNECTION_TIMEOUT_MS = 75_000;
/** The request headers' limit when a proxy forwards client certificates in one (Node's default: 16 KiB). */
const HEADER_MAX_WITH_CERTIFICATES = 64 * 1024;

/** The server's shutdown, as the routes see it (see shutDown in main.ts). */
export interface ShutdownState {
  /** From the shutdown signal on: /readyz answers 503. */
  draining: boolean;
  /** While draining: whether the answer on this connection closes it. */
  closesConnection(socket: Socket): boolean;
}

export interface AppDeps {
  issuer: string;
  defaultAlg: SigningAlg;
  tokens: TokenService;
  /** Revocation and introspection of this server's tokens (/oauth/revoke, /oauth/introspect). */
  revocation: RevocationService;
  directory: Directory;
  keyring: Keyring;
  store: Store;
  logger: Logger;
  trustProxy: boolean | string[];
  /** Prometheus metrics: request durations are observed, and GET /metrics answers. Absent: neither. */
  metrics?: RequestObserver & { exposition(): Promise<Exposition> };
  /** Time a client has to send a whole request (a token request is a few hundred bytes). */
  requestTimeoutMs: number;
  /**
   * Called before every answer is written: puts the audit events recorded so far on the spool, so that a
   * token that was answered has its event on disk (audit/recorder.ts).
   */
  persistAudit?: () => void;
  /** How long an idle keep-alive connection is kept; announced to clients as `Keep-Alive: timeout=`. */
  keepAliveTimeoutMs: number;
  shutdown: ShutdownState;
  /** The store's outage, which a failing readiness probe reports to (logged once, not per probe). */
  storeOutage?: Outage;
  /** How long /readyz lets the change feed go unread before it answers 503 (see feedStaleMs in config). */
  feedStaleMs: number;
  /** Seconds a 503 asks the client to wait (`Retry-After`, TESSERA_RETRY_AFTER). */
  retryAfter: number;
  /** The admin API under /admin/v1; absent: not served. */
  admin?: AdminApiDeps;
  /** The web console under /console; absent: not served. */
  console?: ConsoleDeps;
  /** HTTPS (TESSERA_TLS_CERT, tls.ts): the secure context's options; absent: plain HTTP. */
  tls?: HttpsOptions | undefined;
  /**
   * TLS client certificates (RFC 8705): the connection's, or a trusted proxy's header (client-certificates.ts);
   * absent, or not enabled: no request has one.
   */
  certificates?: ClientCertificates | undefined;
  /** TESSERA_MTLS_BASE_URL: the origin of discovery's mtls_endpoint_aliases (RFC 8705 §5); the issuer's if absent. */
  mtlsBaseUrl?: string | undefined;
  /** Traces (docs/traces.md): the SERVER span of every request; absent: none. */
  tracing?: Tracing | undefined;
  /** TESSERA_APPLY_FILE's state, which /readyz shows; absent: no apply file. */
  applyFile?: { readonly status: ApplyFileStatus } | undefined;
}

/** Security headers on every answer: JSON only, never framed, never sniffed, no referrer; HSTS over https. */
function securityHeaders(issuer: string): Record<string, string> {
  return {
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
    'referrer-policy': 'no-referrer',
    ...(issuer.startsWith('https://') ? { 'strict-transport-security': 'max-age=31536000' } : {}),
  };
}

/** The HTTP shell: builds the Fastify app without listening, so tests and main() can do that part. */
export function buildApp(deps: AppDeps): FastifyInstance {
  const metrics = deps.metrics;
  const shutdown = deps.shutdown;
  const finish = new AnswerFinish(securityHeaders(deps.issuer), {
    persistAudit: deps.persistAudit,
    closesConnection: (socket: Socket) => shutdown.draining && shutdown.closesConnection(socket),
    metrics,
  });
  // One batcher per app: the token, introspection and revocation requests of a turn, answered together.
  const turns = new Turns();
  const endpoint = new TokenEndpoint(deps.tokens, deps.logger, turns);
  const certificates = deps.certificates?.enabled === true ? deps.certificates : undefined;
  const tracing = deps.tracing;
  const spanOf = tracing && ((request: IncomingMessage) => tracing.spanOf(request));
  const certificateOf = certificates && ((request: IncomingMessage) => certificates.of(request));
  const lane = new TokenLane({
    endpoint,
    finish,
    logger: deps.logger,
    trustProxy: deps.trustProxy,
    certificateOf,
    spanOf,
  });
  // The HTTP server, made here rather than by Fastify (so that it offers each request to the token lane first),
  // with the settings Fastify would give it (lib/server.js):
  // - A client that sends its headers and then trickles the body (or nothing) is answered 408 and cut off.
  //   Node's own request timeout does it, at no cost per request: the server checks its open connections on
  //   one timer (every second here instead of Node's 30 s) and hands the late ones to clientErrorHandler. The
  //   headers timeout must not be longer: Node swaps the two when it is, so the body would get 60 s.
  // - Node announces the keep-alive timeout (`Keep-Alive: timeout=5`), clients close their idle connections a
  //   little before it, and the server closes them a second after it (Node's keepAliveTimeoutBuffer): neither
  //   side races the other. A shutdown waits for it instead of cutting idle connections (shutDown, main.ts).
  const serverFactory = (fastify: RequestListener) => {
    const options = {
      requestTimeout: deps.requestTimeoutMs,
      headersTimeout: deps.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, deps.requestTimeoutMs),
      // A proxy's certificate header (a leaf and its chain, as URL-encoded PEM in Envoy's) can pass Node's 16 KiB.
      ...(certificates?.readsHeader === true ? { maxHeaderSize: HEADER_MAX_WITH_CERTIFICATES } : {}),
    };
    const dispatch = (request: IncomingMessage, response: ServerResponse) => {
      if (lane.take(request, response)) {
        tracing?.spanOf(request)?.route(TOKEN_PATH);
        return;
      }
      tracing?.bind(request, response);
      fastify(request, response);
    };
    const listener: RequestListener =
      tracing === undefined
        ? dispatch
        : (request, response) => tracing.serve(request, response, () => dispatch(request, response));
    const server =
      deps.tls === undefined
        ? createServer(options, listener)
        : // A TLS handshake gets no longer than a request (Node's default: 2 minutes a connection could sit half open).
          createHttpsServer({ ...options, handshakeTimeout: deps.requestTimeoutMs, ...deps.tls }, listener);
    // Token batches are cut small while connections arrive (libuv accepts one an iteration: see Turns).
    server.on('connection', turns.connectionAccepted);
    server.keepAliveTimeout = deps.keepAliveTimeoutMs;
    server.requestTimeout = deps.requestTimeoutMs;
    server.setTimeout(CONNECTION_TIMEOUT_MS);
    return server;
  };
  const app = Fastify({
    serverFactory,
    loggerInstance: deps.logger,
    // No per-request log lines on the hot path; refusals are logged at debug, failures at error.
    logController: new LogController({ disableRequestLogging: true }),
    // No child logger per request (pino's child with redaction costs on every token): request.log is the
    // server's logger, and the few lines logged per request carry what they need.
    childLoggerFactory: (logger) => logger,
    bodyLimit: BODY_LIMIT,
    return503OnClosing: true,
    // The caller's address counts for the failed-attempt limits; behind a proxy it comes from X-Forwarded-For.
    trustProxy: deps.trustProxy,
    clientErrorHandler: clientErrorHandler(finish.security),
    // Idle keep-alive connections are closed by app.close(), those with a request in flight are answered.
    forceCloseConnections: 'idle',
  }) as unknown as FastifyInstance;

  // From the app's close on, Fastify answers every request (503 while it closes).
  app.addHook('preClose', (done) => {
    lane.close();
    done();
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    const closes = finish.beforeWrite(request.raw.socket);
    const span = tracing?.spanOf(request.raw);
    if (span !== undefined) {
      const { url: route, config } = request.routeOptions;
      if (route !== undefined) span.route(route);
      // The admin API's routes name their management operation (admin/route.ts).
      const operation = (config as { operation?: string } | undefined)?.operation;
      if (operation !== undefined) span.set('tessera.operation', operation);
    }
    reply.headers(finish.security);
    // Anything that did not choose its caching (errors, 404s) is not to be stored.
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    if (closes) reply.header('connection', 'close');
    finish.observe(
      request.method,
      request.routeOptions.url ?? '(unmatched)',
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
    done(null, payload);
  });

  registerBodyParsers(app);
  registerErrorHandlers(app);
  tokenRoutes(app, endpoint, certificateOf, spanOf);
  revocationRoutes(app, deps.revocation, turns, certificateOf);
  discoveryRoutes(app, deps.issuer, deps.directory, deps.keyring, {
    grantTypes: deps.tokens.grantTypesSupported,
    authMethods: deps.tokens.authMethodsSupported,
    mtlsBaseUrl: certificates === undefined ? undefined : (deps.mtlsBaseUrl ?? deps.issuer),
  });
  healthRoutes(app, deps.store, deps.keyring, deps.directory, deps.defaultAlg, {
    shutdown,
    storeOutage: deps.storeOutage,
    feedStaleMs: deps.feedStaleMs,
    applyFile: deps.applyFile,
  });
  if (metrics) metricsRoutes(app, () => metrics.exposition(), deps.retryAfter);
  if (deps.admin) adminApi(app, deps.admin);
  if (deps.console) consoleRoutes(app, deps.console);
  return app;
}
