import { hkdfSync, randomBytes } from 'node:crypto';
import type { AdminApiDeps } from './http/admin/index.js';
import type { Logger } from 'pino';
import { isPostgresUrl, jwksMaxAge, sqlitePath, type Config } from './config/index.js';
import { SIGNING_ALGS, type SigningAlg } from './domain/algorithms.js';
import { TokenService } from './domain/token-service.js';
import { privateKeyJwt } from './domain/assertion.js';
import { clientSecretBasic, clientSecretPost } from './domain/client-auth.js';
import { TOKEN_PATH } from './http/routes/discovery.js';
import { JwksFetcher } from './keys/jwks-fetcher.js';
import { AssertionReplay } from './limits/replay.js';
import { MAX_TOKEN_TTL } from './domain/validate.js';
import { Keyring } from './keys/keyring.js';
import { resolveMasterKey } from './keys/master-key.js';
import { AuditRecorder } from './audit/recorder.js';
import { KeyRotator } from './keys/rotator.js';
import { FailedAttempts } from './limits/attempts.js';
import { LoginAttempts } from './limits/logins.js';
import type { SessionPolicy } from './management/sessions.js';
import { IssuanceQuotas } from './limits/quotas.js';
import { connectRedis, type SharedRedis } from './limits/redis.js';
import { Metrics } from './metrics/metrics.js';
import { Outage } from './outage.js';
import { ensureAdminAudience } from './management/builtin.js';
import { Directory } from './store/directory.js';
import { SecretUsage } from './store/secret-usage.js';
import { openPostgresStore } from './store/postgres.js';
import { openSqliteStore } from './store/sqlite.js';
import { SERVER_ACTOR, type Store } from './store/types.js';
import { EVERY_SCOPE } from './management/context.js';

/** A store whose schema this code must not use as it is, and must not migrate without being asked. */
export class SchemaError extends Error {
  override name = 'SchemaError';
}

/**
 * Opens the configured store and brings its schema up to date (`serve`, `migrate`), or with `migrate: false`
 * (every other command) checks it instead: an operator's command never changes the schema under running
 * servers. It refuses a schema older than this code (run `tessera migrate`) or newer (use the newer tessera);
 * only an empty store, which no server can be using, is set up at once.
 */
export async function openStore(
  config: Config,
  options: { poolSize?: number; server?: boolean; migrate?: boolean } = {},
): Promise<Store> {
  const url = config.databaseUrl;
  const store =
    url !== undefined && isPostgresUrl(url)
      ? openPostgresStore(url, {
          max: options.poolSize,
          timeouts: { queryMs: config.pgQueryTimeout * 1000, connectMs: config.pgConnectTimeout * 1000 },
        })
      : openSqliteStore(sqlitePath(config), { backgroundCheckpoints: options.server === true });
  try {
    if (options.migrate === false) await checkSchema(store);
    else await store.migrate();
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

async function checkSchema(store: Store): Promise<void> {
  const { applied, pending, unknown } = await store.schema();
  if (unknown.length > 0) {
    throw new SchemaError(
      `the store's schema is newer than this tessera (${unknown.join(', ')}): use the tessera that migrated it`,
    );
  }
  if (applied.length === 0) {
    await store.migrate();
    return;
  }
  if (pending.length > 0) {
    throw new SchemaError(
      `the store's schema is older than this tessera (${pending.join(', ')} not applied): ` +
        'run `tessera migrate` (servers of the older version must be stopped or upgraded first)',
    );
  }
}

export interface Runtime {
  store: Store;
  /** When client secrets were last used: noted by the token path, written in batches. */
  secretUsage: SecretUsage;
  /** What the admin API needs beside the store: the failed-attempt limits, and its cursors' key. */
  admin: Omit<AdminApiDeps, 'config' | 'store' | 'publishedKeys' | 'findClient' | 'sessions'>;
  /** The console's sessions: their timeouts, the anti-CSRF tokens' key and the failed-login limits. */
  sessionPolicy: SessionPolicy;
  audit: AuditRecorder;
  keyring: Keyring;
  directory: Directory;
  tokens: TokenService;
  /** Undefined when TESSERA_METRICS=false. */
  metrics: Metrics | undefined;
  /** The store's outage as the log tells it; whatever sees the store fail (e.g. /readyz) reports to it. */
  storeOutage: Outage;
  close(): Promise<void>;
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
  const opened = await openStore(config, { server: true });
  const store = metrics ? metrics.timedStore(opened) : opened;
  // What the start has opened so far: all of it is closed again if the start fails (see the catch below).
  let redis: SharedRedis | undefined;
  let recorder: AuditRecorder | undefined;
  let following: Directory | undefined;
  let rotating: KeyRotator | undefined;
  let secretUsage: SecretUsage | undefined;
  let replaying: AssertionReplay | undefined;
  try {
    const shared = (redis =
      config.redisUrl === undefined
        ? undefined
        : connectRedis(config.redisUrl, {
            logger,
            keyPrefix: config.redisPrefix,
            timeoutMs: config.redisTimeoutMs,
          }));
    if (shared) metrics?.watchRedis(() => shared.breaker.closed);
    const attempts = new FailedAttempts({
      redis: shared,
      keyPrefix: config.redisPrefix,
      perClientAndSource: config.attemptsPerClient,
      perSource: config.attemptsPerSource,
    });
    const quotas = new IssuanceQuotas({ redis: shared, keyPrefix: config.redisPrefix });
    const keyring = new Keyring(store, master, {
      maxTokenTtl: MAX_TOKEN_TTL,
      jwksMaxAge: jwksMaxAge(config),
      onError: (error) => logger.error({ err: error }, 'signing key unavailable'),
      retryAfter: config.retryAfter,
    });
    const rotator = (rotating =
      config.keyRotationInterval > 0
        ? new KeyRotator(store, master, {
            intervalMs: config.keyRotationInterval * 1000,
            publishAheadMs: config.keyPublishAhead * 1000,
            maxTokenTtlMs: MAX_TOKEN_TTL * 1000,
            onRotated: (alg, kid, activatesAt) =>
              logger.info({ alg, kid, activatesAt }, 'signing key rotation scheduled'),
            onError: (error) => logger.error({ err: error }, 'automatic key rotation failed'),
          })
        : undefined);
    const audit = (recorder = new AuditRecorder(store, {
      spoolDir: config.auditSpoolDir,
      spoolMaxBytes: config.auditSpoolMax,
      retentionSeconds: config.auditRetention,
      logger,
    }));
    // Store errors while the store is down would come twice a second from the feed alone.
    const outage = new Outage(logger, { down: 'the store cannot be reached', up: 'the store answers again' });
    // The LISTEN connection retries every second while PostgreSQL is away.
    const listener = new Outage(logger, {
      down: 'lost the change listener; reconnecting, and polling meanwhile',
      up: 'the change listener is back',
    });
    const directory = (following = new Directory(store, {
      onRecovered: () => outage.recovered(),
      onListening: () => listener.recovered(),
      ttlMs: config.cacheTtl * 1000,
      max: config.cacheMax,
      pollMs: config.changePollMs,
      staleWindowMs: config.staleWindow * 1000,
      retryAfter: config.retryAfter,
      onError: (error, during) =>
        during === 'change listener' ? listener.failed(error) : outage.failed(error, { during }),
      onKeysChanged: () => keyring.reload(),
    }));
    // The admin API's audience, with its scopes, before the directory loads the audiences.
    await ensureAdminAudience({ store, config, actor: SERVER_ACTOR, holds: EVERY_SCOPE });
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
    metrics?.watchAudit(() => audit);
    const usage = new SecretUsage(store, {
      onError: (error) => logger.warn({ err: error }, 'could not record when client secrets were last used'),
    });
    usage.start();
    secretUsage = usage;
    const replay = (replaying = new AssertionReplay(store, {
      redis: shared,
      keyPrefix: config.redisPrefix,
      onError: (error) => logger.warn({ err: error }, 'could not delete expired client assertion ids'),
    }));
    replay.start();
    const remoteKeys = new JwksFetcher({
      allowPrivate: config.jwksAllowPrivate,
      production: config.production,
    });
    const tokens = new TokenService({
      methods: [
        clientSecretBasic,
        clientSecretPost,
        privateKeyJwt({
          issuer: config.issuer,
          tokenEndpoint: config.issuer + TOKEN_PATH,
          replay,
          remote: remoteKeys,
        }),
      ],
      secretUsed: (id) => usage.used(id),
      findClient: (id) => directory.findClient(id),
      peekClient: (id) => directory.peekClient(id),
      registered: (id) => directory.registered(id),
      findAudience: (url) => directory.findAudience(url),
      sign: (payload, alg: SigningAlg, claims) => keyring.sign(payload, alg, claims),
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
      secretUsage: usage,
      admin: {
        attempts,
        refused: (refusal) => audit.recordAdminRefusal(refusal),
        // Derived from the master key: every instance signs and accepts the same list cursors.
        cursorKey: new Uint8Array(hkdfSync('sha256', master.key, '', 'tessera admin api cursors', 32)),
      },
      sessionPolicy: {
        idleSeconds: config.sessionIdle,
        maxSeconds: config.sessionMax,
        csrfKey: new Uint8Array(hkdfSync('sha256', master.key, '', 'tessera console csrf', 32)),
        logins: new LoginAttempts({
          redis: shared,
          keyPrefix: config.redisPrefix,
          perOperator: config.attemptsLogin,
          perSource: config.attemptsLoginSource,
        }),
      },
      audit,
      keyring,
      directory,
      tokens,
      metrics,
      storeOutage: outage,
      async close() {
        replay.stop();
        await usage.stop();
        await rotator?.stop();
        await audit.close();
        await shared?.close();
        await directory.stop();
        await store.close();
      },
    };
  } catch (error) {
    // A start that fails (a wrong master key is found when the keys are loaded, after the change feed and the
    // audit trail have started) closes whatever it opened, in the order close() does, each step whatever the
    // one before did, so that nothing is left running against a closed store or holding the process open: the
    // key rotator, the audit trail (the spool keeps what it holds for the next start; its lock is released),
    // Redis, the change feed (its poll timer and PostgreSQL's LISTEN connection), the store.
    const quietly = (closing: Promise<void> | undefined) => closing?.catch(() => undefined);
    replaying?.stop();
    await quietly(secretUsage?.stop());
    await quietly(rotating?.stop());
    await quietly(recorder?.close());
    await quietly(redis?.close());
    await quietly(following?.stop());
    await quietly(store.close());
    throw error;
  }
}
