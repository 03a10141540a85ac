import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { isPostgresUrl, jwksMaxAge, sqlitePath, type Config } from './config/index.js';
import { SIGNING_ALGS, type SigningAlg } from './domain/algorithms.js';
import { TokenService } from './domain/token-service.js';
import { MAX_TOKEN_TTL } from './domain/validate.js';
import { Keyring } from './keys/keyring.js';
import { resolveMasterKey } from './keys/master-key.js';
import { AuditRecorder } from './audit/recorder.js';
import { KeyRotator } from './keys/rotator.js';
import { FailedAttempts } from './limits/attempts.js';
import { IssuanceQuotas } from './limits/quotas.js';
import { connectRedis } from './limits/redis.js';
import { Metrics } from './metrics/metrics.js';
import { Directory } from './store/directory.js';
import { openPostgresStore } from './store/postgres.js';
import { openSqliteStore } from './store/sqlite.js';
import type { Store } from './store/types.js';

/** Opens the configured store and brings its schema up to date. */
export async function openStore(config: Config, options: { poolSize?: number } = {}): Promise<Store> {
  const url = config.databaseUrl;
  const store =
    url !== undefined && isPostgresUrl(url)
      ? openPostgresStore(url, { max: options.poolSize })
      : openSqliteStore(sqlitePath(config));
  try {
    await store.migrate();
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

export interface Runtime {
  store: Store;
  audit: AuditRecorder;
  keyring: Keyring;
  directory: Directory;
  tokens: TokenService;
  /** Undefined when TESSERA_METRICS=false. */
  metrics: Metrics | undefined;
  close(): Promise<void>;
}

/**
 * Store errors while the store is down would come twice a second from the feed alone: the first is logged,
 * then one a minute, and the recovery once.
 */
function outageLogger(logger: Logger) {
  let since: number | undefined;
  let lastLogged = 0;
  return {
    failed(error: unknown, during: string): void {
      const now = Date.now();
      since ??= now;
      if (now - lastLogged < 60_000) return;
      lastLogged = now;
      logger.error({ err: error, during, failingForMs: now - since }, 'the store cannot be reached');
    },
    recovered(): void {
      if (since === undefined) return;
      logger.info({ downForMs: Date.now() - since }, 'the store answers again');
      since = undefined;
      lastLogged = 0;
    },
  };
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

/** Everything the server needs, wired: store → keys → cached directory → token service. */
export async function openRuntime(config: Config, logger: Logger): Promise<Runtime> {
  const master = resolveMasterKey(config, (message) => logger.warn(message));
  const metrics = config.metrics ? new Metrics() : undefined;
  const opened = await openStore(config);
  const store = metrics ? metrics.timedStore(opened) : opened;
  const redis =
    config.redisUrl === undefined
      ? undefined
      : connectRedis(config.redisUrl, {
          onDown: (error) =>
            logger.error(
              { err: error },
              'Redis is unreachable: counting attempts and quotas in memory until it is back',
            ),
          onUp: () => logger.info('Redis is back: attempts and quotas are counted in Redis again'),
        });
  const attempts = new FailedAttempts({ redis: redis?.client, keyPrefix: config.redisPrefix });
  const quotas = new IssuanceQuotas({ redis: redis?.client, keyPrefix: config.redisPrefix });
  try {
    const keyring = new Keyring(store, master, {
      maxTokenTtl: MAX_TOKEN_TTL,
      jwksMaxAge: jwksMaxAge(config),
      onError: (error) => logger.error({ err: error }, 'signing key unavailable'),
    });
    const rotator =
      config.keyRotationInterval > 0
        ? new KeyRotator(store, master, {
            intervalMs: config.keyRotationInterval * 1000,
            publishAheadMs: config.keyPublishAhead * 1000,
            maxTokenTtlMs: MAX_TOKEN_TTL * 1000,
            onRotated: (alg, kid, activatesAt) =>
              logger.info({ alg, kid, activatesAt }, 'signing key rotation scheduled'),
            onError: (error) => logger.error({ err: error }, 'automatic key rotation failed'),
          })
        : undefined;
    const audit = new AuditRecorder(store, { retentionSeconds: config.auditRetention, logger });
    const outage = outageLogger(logger);
    const directory = new Directory(store, {
      onRecovered: () => outage.recovered(),
      ttlMs: config.cacheTtl * 1000,
      max: config.cacheMax,
      pollMs: config.changePollMs,
      staleWindowMs: config.staleWindow * 1000,
      onError: (error, during) =>
        during === 'change listener'
          ? logger.warn({ err: error }, 'lost the change listener; reconnecting, and polling meanwhile')
          : outage.failed(error, during),
      onKeysChanged: () => keyring.reload(),
    });
    // The feed position is taken before the keys are read: a key change in between is replayed, not lost.
    await directory.start();
    audit.start();
    // A key for every algorithm from the first start on: an audience switched to RS256 later must not sign
    // with a key that resource servers, holding a JWKS fetched a moment ago, have never seen.
    await keyring.load(SIGNING_ALGS);
    rotator?.start();
    void rotator?.check();

    metrics?.watchCache(() => directory.stats);
    const registered = (url: string): boolean => directory.findAudience(url) !== undefined;
    metrics?.watchAuditQueue(() => audit.queued);
    const tokens = new TokenService({
      findClient: (id) => directory.findClient(id),
      findAudience: (url) => directory.findAudience(url),
      sign: (payload, alg: SigningAlg) => keyring.sign(payload, alg),
      now: Date.now,
      newJti: jtiSource(),
      attempts,
      quotas,
      audit: metrics
        ? (event) => {
            audit.record(event);
            metrics.tokenOutcome(event, registered);
          }
        : (event) => audit.record(event),
      issuer: config.issuer,
      defaultTtl: config.tokenTtl,
      defaultAlg: config.signingAlg,
    });
    return {
      store,
      audit,
      keyring,
      directory,
      tokens,
      metrics,
      async close() {
        await rotator?.stop();
        await audit.close();
        await redis?.close();
        await directory.stop();
        await store.close();
      },
    };
  } catch (error) {
    await redis?.close();
    await store.close();
    throw error;
  }
}
