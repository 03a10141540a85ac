/**
 * What each HTTP face is given, made whole here so that main.ts only builds the app, listens and shuts down:
 * the admin API's dependencies, the console's, and the app's around them.
 */
import cluster from 'node:cluster';
import { feedStaleMs } from '../config/index.js';
import type { AuditRecorder } from '../audit/recorder.js';
import type { DpopVerifier } from '../domain/dpop.js';
import type { OwnTokenDeps } from '../domain/own-tokens.js';
import type { RevocationService } from '../domain/revocation.js';
import type { TokenService } from '../domain/token-service.js';
import type { AdminApiDeps } from '../http/admin/index.js';
import type { ClientCertificates } from '../http/client-certificates.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { ApplyFile } from './config-files.js';
import type { ServerOptions as HttpsOptions } from 'node:https';
import type { AppDeps } from '../http/app.js';
import { loadAssets } from '../http/console/assets.js';
import type { ConsoleDeps } from '../http/console/index.js';
import { ConsoleSessions } from '../http/console/session.js';
import type { Keyring } from '../keys/keyring.js';
import { deriveKey, type MasterKey } from '../keys/master-key.js';
import type { FailedAttempts } from '../limits/attempts.js';
import type { LoginAttempts } from '../limits/logins.js';
import type { SessionPolicy } from '../management/sessions.js';
import { clusterExposition } from '../metrics/cluster.js';
import type { Outage } from '../outage.js';
import type { Directory } from '../read-model/directory.js';
import type { Store } from '../store/types.js';
import type { Opening } from './parts.js';

/** The app's dependencies but its shutdown state, which belongs to the server that listens (main.ts). */
export type AppDepsButShutdown = Omit<AppDeps, 'shutdown'>;

/** The console's sessions: their timeouts, the anti-CSRF tokens' key, the failed-login limits, the clock. */
export function sessionPolicy(
  { config, clock }: Opening,
  master: MasterKey,
  logins: LoginAttempts,
): SessionPolicy {
  return {
    idleSeconds: config.sessionIdle,
    maxSeconds: config.sessionMax,
    csrfKey: deriveKey(master, 'tessera console csrf'),
    logins,
    now: clock.now,
  };
}

/** This process's metrics, or under `--workers` the whole cluster's, collected through the primary. */
function metricsFace({ metrics }: Opening): AppDeps['metrics'] {
  if (!metrics) return undefined;
  const exposition = cluster.isWorker ? clusterExposition(metrics.registry) : () => metrics.exposition();
  return { observeRequest: metrics.observeRequest.bind(metrics), exposition };
}

/** The web console, when TESSERA_CONSOLE is on: its sessions and its built files. */
function consoleFace({ logger }: Opening, sessions: ConsoleSessions): ConsoleDeps {
  const assets = loadAssets();
  if (!assets)
    logger.warn('the web console is not built (no dist/console): run `npm run build`; /console answers 503');
  return { sessions, assets };
}

/**
 * The admin API's dependencies: the store, what it verifies tokens with (the one verifier of this server's own
 * tokens), the clients as the token path knows them, the failed-attempt limits, its cursors' key, console
 * sessions, and the audit of its refusals (timed by the runtime's clock).
 */
function adminFace(
  { config, clock }: Opening,
  parts: {
    store: Store;
    master: MasterKey;
    ownTokens: OwnTokenDeps;
    dpop: DpopVerifier;
    directory: Directory;
    attempts: FailedAttempts;
    audit: AuditRecorder;
    sessions: ConsoleSessions | undefined;
    certificates: ClientCertificates;
  },
): AdminApiDeps {
  const { store, directory, audit } = parts;
  return {
    config,
    store,
    attempts: parts.attempts,
    refused: (refusal) => audit.recordAdminRefusal({ at: clock.now(), ...refusal }),
    now: clock.now,
    cursorKey: deriveKey(parts.master, 'tessera admin api cursors'),
    tokens: { ...parts.ownTokens, dpop: parts.dpop },
    findClient: (id) => directory.findClient(id),
    catchUp: () => directory.catchUp(),
    sessions: parts.sessions,
    certificateOf: parts.certificates.enabled ? (request) => parts.certificates.of(request) : undefined,
  };
}

/** Every face's dependencies: the token path's, the admin API's and the console's, in the app's. */
export function appDeps(
  opening: Opening,
  parts: {
    store: Store;
    master: MasterKey;
    keyring: Keyring;
    directory: Directory;
    tokens: TokenService;
    revocation: RevocationService;
    ownTokens: OwnTokenDeps;
    dpop: DpopVerifier;
    attempts: FailedAttempts;
    audit: AuditRecorder;
    storeOutage: Outage;
    sessionPolicy: SessionPolicy;
    certificates: ClientCertificates;
    tls: HttpsOptions | undefined;
    tracing: Tracing | undefined;
    applyFile: ApplyFile | undefined;
  },
): AppDepsButShutdown {
  const { config, logger } = opening;
  const sessions = config.console
    ? new ConsoleSessions({ store: parts.store, config, policy: parts.sessionPolicy })
    : undefined;
  return {
    issuer: config.issuer,
    defaultAlg: config.signingAlg,
    tokens: parts.tokens,
    revocation: parts.revocation,
    directory: parts.directory,
    keyring: parts.keyring,
    store: parts.store,
    logger,
    requestTimeoutMs: config.requestTimeout * 1000,
    trustProxy: config.trustProxy,
    metrics: metricsFace(opening),
    persistAudit: () => parts.audit.persist(),
    keepAliveTimeoutMs: config.keepAliveTimeout * 1000,
    storeOutage: parts.storeOutage,
    feedStaleMs: feedStaleMs(config),
    retryAfter: config.retryAfter,
    admin: adminFace(opening, { ...parts, sessions }),
    console: sessions ? consoleFace(opening, sessions) : undefined,
    certificates: parts.certificates,
    tls: parts.tls,
    mtlsBaseUrl: config.mtlsBaseUrl,
    tracing: parts.tracing,
    applyFile: parts.applyFile,
  };
}
