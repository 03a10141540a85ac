/**
 * The server's parts, each opened by a function of its own that returns what it opened and pushes its closer
 * (see closers.ts). None of them starts anything that reads the store on its own but where said: openRuntime
 * (index.ts) starts them, in the order the start needs.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { jwksMaxAge, type Config } from '../config/index.js';
import type { SigningAlg } from '../domain/jose.js';
import { clientAuthMethods } from '../domain/client-auth/index.js';
import { DpopNonces, DpopVerifier } from '../domain/dpop.js';
import type { OwnTokenDeps } from '../domain/own-tokens.js';
import { RevocationService } from '../domain/revocation.js';
import { TokenService } from '../domain/token-service.js';
import { MAX_TOKEN_TTL } from '../domain/validate.js';
import { AuditRecorder } from '../audit/recorder.js';
import { TOKEN_PATH } from '../http/routes/discovery.js';
import { JwksFetcher } from '../keys/jwks-fetcher.js';
import { Keyring } from '../keys/keyring.js';
import { deriveKey, type MasterKey } from '../keys/master-key.js';
import { KeyRotator } from '../keys/rotator.js';
import { FailedAttempts } from '../limits/attempts.js';
import { LoginAttempts } from '../limits/logins.js';
import { IssuanceQuotas } from '../limits/quotas.js';
import type { SharedRedis } from '../limits/redis.js';
import { AssertionReplay } from '../limits/replay.js';
import type { Metrics } from '../metrics/metrics.js';
import { Outage } from '../outage.js';
import { adminAudienceUrl } from '../management/builtin.js';
import { Directory } from '../read-model/directory.js';
import { Revocations } from '../read-model/revocations.js';
import { SecretUsage } from '../read-model/secret-usage.js';
import type { Store } from '../store/types.js';
import type { Closers } from './closers.js';
import { openStore } from './store.js';
import { ClientCertificates } from '../http/client-certificates.js';
import { tlsOptions } from '../http/tls.js';
import { readFileSync } from 'node:fs';
import type { ServerOptions as HttpsOptions } from 'node:https';
import { ConfigError } from '../config/index.js';
import type { Clock } from '../clock.js';

/** What every part is opened with: the settings, the log, the clock, and the closers it pushes onto. */
export interface Opening {
  config: Config;
  logger: Logger;
  /**
   * What time it is for everything that reasons about time (tokens, keys, secrets, sessions, limits, the
   * audit trail, caches), and what every periodic job runs on (clock.ts): the wall clock, or the one a test
   * gives. Durations of real events (an outage, a breaker's backoff, a connection's idleness, how long ago the
   * feed was read) are monotonic time, performance.now(), whatever this is.
   */
  clock: Clock;
  /** Undefined when TESSERA_METRICS=false. */
  metrics: Metrics | undefined;
  closers: Closers;
}

/** The store, migrated, timed by the metrics when there are any. Closed last: everything else uses it. */
export async function openServerStore({ config, logger, clock, metrics, closers }: Opening): Promise<Store> {
  const opened = await openStore(config, {
    server: true,
    now: clock.now,
    onMaintenanceRestart: (reason, pauseMs) =>
      logger.error(
        { err: reason, restartInMs: pauseMs },
        "the SQLite store's maintenance thread (checkpoints, retention, audit writes) ended: starting it again",
      ),
  });
  const store = metrics ? metrics.timedStore(opened) : opened;
  closers.push(() => store.close());
  return store;
}

/** The signing keys; they are loaded once the change feed has its position (see openRuntime). */
export function openKeyring({ config, logger, clock }: Opening, store: Store, master: MasterKey): Keyring {
  return new Keyring(store, master, {
    maxTokenTtl: MAX_TOKEN_TTL,
    jwksMaxAge: jwksMaxAge(config),
    onError: (error) => logger.error({ err: error }, 'signing key unavailable'),
    retryAfter: config.retryAfter,
    now: clock.now,
  });
}

/**
 * The denylist and the clients whose tokens are cut short, in memory: loaded and kept by the directory's change
 * feed, expired entries forgotten once a minute (started by openRuntime).
 */
export function openRevocations({ logger, clock, closers }: Opening, store: Store): Revocations {
  const revocations = new Revocations(store, {
    clock,
    maxTokenTtl: MAX_TOKEN_TTL,
    onError: (error) => logger.warn({ err: error }, 'could not delete expired revoked tokens'),
  });
  closers.push(() => revocations.stop());
  return revocations;
}

/**
 * The cached directory of clients and audiences, following the change feed (started by openRuntime) for itself
 * and for the revocations, and the store's outage as the log tells it: store errors while the store is down would
 * come twice a second from the feed alone.
 */
export function openDirectory(
  { config, logger, clock, closers }: Opening,
  store: Store,
  keyring: Keyring,
  revocations: Revocations,
): { directory: Directory; storeOutage: Outage } {
  const storeOutage = new Outage(logger, {
    down: 'the store cannot be reached',
    up: 'the store answers again',
  });
  // The LISTEN connection retries every second while PostgreSQL is away.
  const listener = new Outage(logger, {
    down: 'lost the change listener; reconnecting, and polling meanwhile',
    up: 'the change listener is back',
  });
  const directory = new Directory(store, {
    engine: store.engine === 'postgres' ? 'postgresql' : 'sqlite',
    onRecovered: () => storeOutage.recovered(),
    onListening: () => listener.recovered(),
    ttlMs: config.cacheTtl * 1000,
    max: config.cacheMax,
    pollMs: config.changePollMs,
    staleWindowMs: config.staleWindow * 1000,
    retryAfter: config.retryAfter,
    onError: (error, during) =>
      during === 'change listener' ? listener.failed(error) : storeOutage.failed(error, { during }),
    onKeysChanged: () => keyring.reload(),
    clock,
    followers: [revocations],
  });
  closers.push(() => directory.stop());
  return { directory, storeOutage };
}

/**
 * Redis, when TESSERA_REDIS_URL is set: the limits shared by every instance. Its client is loaded only then: a
 * server without Redis holds none of it (memory, README "Memory").
 */
export async function openRedis({
  config,
  logger,
  metrics,
  closers,
}: Opening): Promise<SharedRedis | undefined> {
  if (config.redisUrl === undefined) return undefined;
  const { connectRedis } = await import('../limits/redis.js');
  const redis = connectRedis(config.redisUrl, {
    logger,
    keyPrefix: config.redisPrefix,
    timeoutMs: config.redisTimeoutMs,
  });
  closers.push(() => redis.close());
  metrics?.watchRedis(() => redis.breaker.closed);
  return redis;
}

/** The limits: failed client authentications, issuance quotas, failed console logins. */
export function openLimits({ config, clock }: Opening, redis: SharedRedis | undefined) {
  return {
    attempts: new FailedAttempts({
      redis,
      keyPrefix: config.redisPrefix,
      perClientAndSource: config.attemptsPerClient,
      perSource: config.attemptsPerSource,
      now: clock.now,
    }),
    // Counted by rate-limiter-flexible, on its own clock.
    quotas: new IssuanceQuotas({ redis, keyPrefix: config.redisPrefix }),
    logins: new LoginAttempts({
      redis,
      keyPrefix: config.redisPrefix,
      perOperator: config.attemptsLogin,
      perSource: config.attemptsLoginSource,
      now: clock.now,
    }),
  };
}

/**
 * The audit trail (started by openRuntime). Its close writes what it holds to the store, or leaves it in the
 * spool for the next start; its lock is released.
 */
export function openAudit({ config, logger, clock, closers }: Opening, store: Store): AuditRecorder {
  const audit = new AuditRecorder(store, {
    spoolDir: config.auditSpoolDir,
    spoolMaxBytes: config.auditSpoolMax,
    retentionSeconds: config.auditRetention,
    logger,
    clock,
  });
  closers.push(() => audit.close());
  return audit;
}

/** Automatic key rotation, when TESSERA_KEY_ROTATION_INTERVAL is set (started by openRuntime). */
export function openRotator(
  { config, logger, clock, closers }: Opening,
  store: Store,
  master: MasterKey,
): KeyRotator | undefined {
  if (config.keyRotationInterval <= 0) return undefined;
  const rotator = new KeyRotator(store, master, {
    intervalMs: config.keyRotationInterval * 1000,
    publishAheadMs: config.keyPublishAhead * 1000,
    maxTokenTtlMs: MAX_TOKEN_TTL * 1000,
    onRotated: (alg, kid, activatesAt) =>
      logger.info({ alg, kid, activatesAt }, 'signing key rotation scheduled'),
    onError: (error) => logger.error({ err: error }, 'automatic key rotation failed'),
    clock,
  });
  closers.push(() => rotator.stop());
  return rotator;
}

/** When client secrets were last used: noted by the token path, written in batches. Started. */
export function openSecretUsage({ logger, clock, closers }: Opening, store: Store): SecretUsage {
  const usage = new SecretUsage(store, {
    onError: (error) => logger.warn({ err: error }, 'could not record when client secrets were last used'),
    clock,
  });
  usage.start();
  closers.push(() => usage.stop());
  return usage;
}

/** The proof ids in use (client assertions' and DPoP proofs'), expired ones deleted now and then. Started. */
export function openReplay(
  { config, logger, clock, closers }: Opening,
  store: Store,
  redis: SharedRedis | undefined,
): AssertionReplay {
  const replay = new AssertionReplay(store, {
    redis,
    keyPrefix: config.redisPrefix,
    onError: (error) => logger.warn({ err: error }, 'could not delete expired client assertion ids'),
    retryAfter: config.retryAfter,
    onUnavailable: (error) =>
      logger.warn({ err: error }, 'a proof id could not be recorded in the store: refused with 503'),
    clock,
  });
  replay.start();
  closers.push(() => replay.stop());
  return replay;
}

/**
 * Token ids: 128 random bits each, cut from a buffer refilled 1 024 ids at a time, so the token path makes
 * one call into the CSPRNG per thousand tokens instead of one per token.
 */
function jtiSource(): () => string {
  const SIZE = 16;
  let pool = Buffer.alloc(0);
  let offset = 0;
  return () => {
    if (offset + SIZE > pool.length) {
      pool = randomBytes(SIZE * 1024);
      offset = 0;
    }
    const id = pool.toString('base64url', offset, offset + SIZE);
    offset += SIZE;
    return id;
  };
}

/**
 * DPoP proofs (RFC 9449): their ids single-use on every instance through the replay guard; with
 * TESSERA_DPOP_NONCE, nonces under a key derived from the master key, which every instance holds.
 */
export function dpopVerifier({ config }: Opening, replay: AssertionReplay, master: MasterKey): DpopVerifier {
  return new DpopVerifier({
    tokenEndpoint: config.issuer + TOKEN_PATH,
    replay,
    nonces: config.dpopNonce ? new DpopNonces(deriveKey(master, 'tessera dpop nonces')) : undefined,
  });
}

/**
 * TLS client certificates (RFC 8705, docs/mtls.md): the connection's when TLS is served, a trusted proxy's header's
 * when TESSERA_CLIENT_CERT_HEADER is set; chains verified against TESSERA_TLS_CLIENT_CA. A file that cannot be read
 * or holds no certificate is a settings error, named.
 */
export function openCertificates({ config, logger, clock }: Opening): ClientCertificates {
  let clientCa: string | undefined;
  if (config.tlsClientCa !== undefined) {
    try {
      clientCa = readFileSync(config.tlsClientCa, 'utf8');
    } catch (error) {
      throw new ConfigError(
        `TESSERA_TLS_CLIENT_CA (${config.tlsClientCa}) cannot be read: ${(error as Error).message}`,
      );
    }
  }
  try {
    return new ClientCertificates({
      tls: config.tls !== undefined,
      header: config.clientCertHeader,
      trustProxy: config.trustProxy,
      clientCa,
      logger,
      now: clock.now,
    });
  } catch (error) {
    throw new ConfigError(`TESSERA_TLS_CLIENT_CA (${config.tlsClientCa}): ${(error as Error).message}`);
  }
}

/** The HTTPS server's options (TESSERA_TLS_CERT, TESSERA_TLS_KEY, TESSERA_TLS_CLIENT_CA), or undefined for HTTP. */
export function openTls({ config }: Opening): HttpsOptions | undefined {
  if (config.tls === undefined) return undefined;
  try {
    return tlsOptions({ ...config.tls, clientCa: config.tlsClientCa });
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
}

/** The token path: client authentication by each method, DPoP, the directory, the keys, the limits, the audit. */
export function openTokenService(
  { config, clock, metrics }: Opening,
  parts: {
    master: MasterKey;
    directory: Directory;
    keyring: Keyring;
    usage: SecretUsage;
    replay: AssertionReplay;
    limits: Pick<ReturnType<typeof openLimits>, 'attempts' | 'quotas'>;
    audit: AuditRecorder;
    /** This server's own tokens, verified from memory: token exchange's subject and actor tokens. */
    ownTokens: OwnTokenDeps;
    /** DPoP proofs, at the token endpoint as at the admin API. */
    dpop: DpopVerifier;
    /** Whether TLS client certificates can arrive (the RFC 8705 methods are then offered). */
    certificates: boolean;
  },
): TokenService {
  const { directory, keyring, usage, replay, limits, audit } = parts;
  const registered = (url: string): boolean => directory.findAudience(url) !== undefined;
  // Clients' jwks_uri and federated credentials' issuers: one fetcher, each place cached apart.
  const remote = new JwksFetcher({
    allowPrivate: config.jwksAllowPrivate,
    production: config.production,
    now: clock.now,
    onIssuerFetch: metrics && ((issuer, ok) => metrics.issuerKeyFetch(issuer, ok)),
  });
  return new TokenService({
    methods: clientAuthMethods({
      privateKeyJwt: { issuer: config.issuer, tokenEndpoint: config.issuer + TOKEN_PATH, replay, remote },
      certificates: parts.certificates ? { remote } : undefined,
    }),
    dpop: parts.dpop,
    secretUsed: (id) => usage.used(id),
    findClient: (id) => directory.findClient(id),
    peekClient: (id) => directory.peekClient(id),
    registered: (id) => directory.registered(id),
    findAudience: (url) => directory.findAudience(url),
    sign: (payload, alg: SigningAlg, claims) => keyring.sign(payload, alg, claims),
    now: clock.now,
    newJti: jtiSource(),
    attempts: limits.attempts,
    quotas: limits.quotas,
    audit: metrics
      ? (event) => {
          audit.record(event);
          metrics.tokenOutcome(event, registered);
        }
      : (event) => audit.record(event),
    issuer: config.issuer,
    defaultTtl: config.tokenTtl,
    defaultAlg: config.signingAlg,
    ownTokens: parts.ownTokens,
  });
}

/**
 * What verifying this server's own tokens reads, all in memory (domain/own-tokens.ts): the keyring's published
 * keys, the denylist, the clients (the directory's id set) and their standing. Introspection, the admin API and
 * token exchange share it.
 */
export function ownTokens(
  { config, clock }: Opening,
  parts: { keyring: Keyring; directory: Directory; revocations: Revocations },
): OwnTokenDeps {
  const { keyring, directory, revocations } = parts;
  return {
    issuer: config.issuer,
    now: clock.now,
    key: (kid) => keyring.verificationKey(kid),
    revoked: (jti) => revocations.isRevoked(jti),
    clientExists: (id) => directory.clientExists(id),
    cutOf: (id) => revocations.cutOf(id),
  };
}

/** Revocation and introspection: client authentication as the token service does it, tokens verified from memory. */
export function openRevocationService(
  { config }: Opening,
  parts: { tokens: TokenService; ownTokens: OwnTokenDeps; revocations: Revocations },
): RevocationService {
  const { revocations } = parts;
  return new RevocationService({
    clients: parts.tokens.clients,
    tokens: parts.ownTokens,
    revoke: (token, source) => revocations.revoke(token, source),
    adminAudience: adminAudienceUrl(config),
  });
}
