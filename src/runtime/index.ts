/**
 * The runtime: every part of the server opened and wired, in the order the start needs, and closed again in
 * reverse (closers.ts) whether it is closed after serving or its start fails part-way. The parts are opened in
 * parts.ts, the faces' dependencies made in faces.ts, the store opened in store.ts (the CLI opens it too).
 */
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import { SIGNING_ALGS } from '../domain/jose.js';
import type { TokenService } from '../domain/token-service.js';
import type { AuditRecorder } from '../audit/recorder.js';
import type { Keyring } from '../keys/keyring.js';
import { resolveMasterKey } from '../keys/master-key.js';
import { ensureAdminAudience } from '../management/builtin.js';
import { EVERY_SCOPE } from '../management/context.js';
import type { SessionPolicy } from '../management/sessions.js';
import { Metrics } from '../metrics/metrics.js';
import type { Outage } from '../outage.js';
import type { Directory } from '../read-model/directory.js';
import type { SecretUsage } from '../read-model/secret-usage.js';
import { SERVER_ACTOR, type Store } from '../store/types.js';
import { Closers } from './closers.js';
import { ApplyFile, bootstrapAdmin } from './config-files.js';
import { openTracing } from '../telemetry/tracing.js';

/** How long a closing server waits for its last spans to be exported. */
const TRACING_FLUSH_MS = 5000;
import { appDeps, sessionPolicy, type AppDepsButShutdown } from './faces.js';
import {
  openAudit,
  openDirectory,
  openKeyring,
  openLimits,
  openRedis,
  openReplay,
  openRevocations,
  openRevocationService,
  ownTokens,
  dpopVerifier,
  openRotator,
  openSecretUsage,
  openServerStore,
  openTokenService,
  openCertificates,
  openTls,
  type Opening,
} from './parts.js';
import { systemClock, type Clock } from '../clock.js';

export interface Runtime {
  store: Store;
  /** When client secrets were last used: noted by the token path, written in batches. */
  secretUsage: SecretUsage;
  /** The console's sessions: their timeouts, the anti-CSRF tokens' key, the failed-login limits, the clock. */
  sessionPolicy: SessionPolicy;
  audit: AuditRecorder;
  keyring: Keyring;
  directory: Directory;
  tokens: TokenService;
  /** Undefined when TESSERA_METRICS=false. */
  metrics: Metrics | undefined;
  /** The store's outage as the log tells it; whatever sees the store fail (e.g. /readyz) reports to it. */
  storeOutage: Outage;
  /** Everything the app needs (the token path's, the admin API's and the console's) but its shutdown state. */
  app: AppDepsButShutdown;
  /** Closes every part, the last opened first. */
  close(): Promise<void>;
}

export interface RuntimeOptions {
  /**
   * What time it is for every part that reasons about time, and the clock their periodic jobs run on (see
   * Opening in parts.ts, and clock.ts); the wall clock when left out. Tests give one to move time and run the
   * jobs then due instead of waiting for them.
   */
  clock?: Clock;
}

/**
 * Everything the server needs, wired: store → keys → cached directory → token service. The start's order
 * matters: the admin API's audience is made before the directory loads the audiences; the change feed takes
 * its position before the keys are read (a key change in between is replayed, not lost); the audit trail
 * starts with the feed. Whatever fails closes what was opened before it (a wrong master key is found when the
 * keys are loaded, after the feed and the audit trail have started).
 */
export async function openRuntime(
  config: Config,
  logger: Logger,
  options: RuntimeOptions = {},
): Promise<Runtime> {
  const master = resolveMasterKey(config, (message) => logger.warn(message));
  const opening: Opening = {
    config,
    logger,
    clock: options.clock ?? systemClock,
    metrics: config.metrics ? new Metrics() : undefined,
    closers: new Closers(),
  };
  const { clock, metrics, closers } = opening;
  if (metrics) closers.push(() => metrics.close());
  try {
    // Traces (docs/traces.md), when the OpenTelemetry variables ask for them: closed last, so that what the other
    // parts did while closing is exported too, within a few seconds.
    const tracing = await openTracing({
      env: process.env,
      trustProxy: config.trustProxy,
      trustRemote: config.otelTrustRemote,
      logger,
    });
    if (tracing !== undefined) {
      closers.push(() => tracing.shutdown(TRACING_FLUSH_MS));
      metrics?.watchTracing(() => tracing.droppedSpans());
    }
    // Opened in the reverse of the order they close in: the writers (replay, usage, rotator) stop first,
    // then the audit trail writes what it holds, then Redis, the change feed, and the store last.
    const store = await openServerStore(opening);
    const keyring = openKeyring(opening, store, master);
    const revocations = openRevocations(opening, store);
    const { directory, storeOutage } = openDirectory(opening, store, keyring, revocations);
    const redis = await openRedis(opening);
    const limits = openLimits(opening, redis);
    const audit = openAudit(opening, store);
    const rotator = openRotator(opening, store, master);

    // The admin API's audience, with its scopes, before the directory loads the audiences.
    await ensureAdminAudience({ store, config, actor: SERVER_ACTOR, holds: EVERY_SCOPE, now: clock.now });
    // Configuration from files (docs/production.md): the bootstrap admin, then the apply file, before the directory
    // loads what they made.
    await bootstrapAdmin(store, config, clock, logger);
    const applyFile =
      config.applyFile === undefined
        ? undefined
        : new ApplyFile(store, config, config.applyFile, clock, logger);
    if (applyFile !== undefined) {
      closers.push(() => applyFile.close());
      await applyFile.start();
      metrics?.watchApplyFile(() => applyFile.status.ok);
    }
    // The feed position is taken before the keys are read: a key change in between is replayed, not lost.
    await directory.start();
    revocations.start();
    // Before the audit trail's first batch, so that no request waits for its statements to be made.
    store.prepareAuditWrites();
    audit.start();
    // A key for every algorithm from the first start on: an audience switched to RS256 later must not sign
    // with a key that resource servers, holding a JWKS fetched a moment ago, have never seen.
    await keyring.load(SIGNING_ALGS);
    rotator?.start();
    void rotator?.check();
    metrics?.watchCache(() => directory.stats);
    metrics?.watchAudit(() => audit);

    const usage = openSecretUsage(opening, store);
    const replay = openReplay(opening, store, redis);
    const verifying = ownTokens(opening, { keyring, directory, revocations });
    const dpop = dpopVerifier(opening, replay, master);
    const certificates = openCertificates(opening);
    const tokens = openTokenService(opening, {
      certificates: certificates.enabled,
      dpop,
      master,
      directory,
      keyring,
      usage,
      replay,
      limits,
      audit,
      ownTokens: verifying,
    });
    const revocation = openRevocationService(opening, { tokens, ownTokens: verifying, revocations });
    const policy = sessionPolicy(opening, master, limits.logins);
    const app = appDeps(opening, {
      store,
      master,
      keyring,
      directory,
      tokens,
      revocation,
      ownTokens: verifying,
      dpop,
      attempts: limits.attempts,
      audit,
      storeOutage,
      sessionPolicy: policy,
      certificates,
      tls: openTls(opening),
      tracing,
      applyFile,
    });
    return {
      store,
      secretUsage: usage,
      sessionPolicy: policy,
      audit,
      keyring,
      directory,
      tokens,
      metrics,
      storeOutage,
      app,
      close: () => closers.close(),
    };
  } catch (error) {
    // Each closer runs whatever the others do; the start's error is the answer.
    await closers.close().catch(() => undefined);
    throw error;
  }
}
