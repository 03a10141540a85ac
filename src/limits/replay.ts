import { createHash } from 'node:crypto';
import { clientSpan } from '../telemetry/client-span.js';
import type { ReplayGuard } from '../domain/client-auth/index.js';
import { Unavailable } from '../domain/errors.js';
import { perTurn } from '../per-turn.js';
import type { AssertionJtiStore } from '../store/types.js';
import type { SharedRedis } from './redis.js';
import { systemClock, type Clock, type Job } from '../clock.js';

/**
 * Redis: SET NX PX of every key (KEYS) with its time to live in milliseconds (ARGV, same order), in that order;
 * 1 for each key set (its first use), 0 for each already there (a replay, also the second of a key given twice).
 */
const USE_KEYS = `local used = {}
for i = 1, #KEYS do
  used[i] = redis.call('SET', KEYS[i], '1', 'PX', ARGV[i], 'NX') and 1 or 0
end
return used`;
/**
 * The Redis key of an id: the `{jti}` hash tag puts every one in the same slot, so that a script of many of them is
 * one shard's to run behind a cluster-mode endpoint or a sharding proxy (without it, CROSSSLOT, or keys set on a
 * shard that is not theirs).
 */
export const redisKeyOf = (prefix: string, id: string): string => `${prefix}:{jti}:${id}`;
/** The client's command that runs USE_KEYS (ioredis defineCommand: EVALSHA, the script sent again if Redis lost it). */
type UsesKeys = { tesseraUseKeys(count: number, ...keysThenTtls: (string | number)[]): Promise<number[]> };
/** Batches of a turn's ids in Redis at once, at most (see perTurn). */
const REDIS_BATCHES_AT_ONCE = 4;

/** Expired assertion ids are deleted from the store this often, */
const PRUNE_EVERY_MS = 60_000;
/** this many a statement. */
const PRUNE_BATCH = 2000;

/**
 * The proof ids (jti) already used, client assertions' and DPoP proofs' (each in a scope of its own, see
 * domain/dpop.ts), shared by every worker and instance: in Redis when it is configured (a SET NX PX, those of a
 * turn in one command: the key expires with the assertion), else in the store (one INSERT … ON CONFLICT). While
 * Redis does not answer (the breaker is open, or a command fails or takes over TESSERA_REDIS_TIMEOUT_MS), the
 * store answers instead, so private_key_jwt keeps working through a Redis outage. What that costs, for the
 * length of an outage and for assertions still valid in it (at most their exp + 60 s): an id taken in Redis
 * before the fallback is not in the store, an id taken in the store is not seen by an instance that still
 * reaches Redis, and a SET that timed out may have been applied all the same, so one assertion may be
 * accepted twice. A replay needs a captured assertion (they travel over TLS and live minutes); refusing every
 * key client while Redis is away would be the other choice.
 */
export class AssertionReplay implements ReplayGuard {
  private job: Job | undefined;
  private readonly clock: Clock;
  private pruning = false;
  /**
   * Redis: the ids of one turn of the event loop in one command (USE_KEYS), as the stores record them in one
   * transaction: the token requests of a turn are answered together, and a SET NX each was a command each for
   * the client and for Redis. Undefined for each id when Redis does not answer (the store answers instead).
   */
  private readonly inRedis: ((use: { key: string; ttl: number }) => Promise<boolean | undefined>) | undefined;

  constructor(
    private readonly store: AssertionJtiStore,
    private readonly options: {
      redis?: SharedRedis | undefined;
      keyPrefix: string;
      /** Time of day and the prune job (clock.ts); the wall clock when left out. */
      clock?: Clock;
      onError?: (error: unknown) => void;
      /** Seconds a 503 asks the client to wait (TESSERA_RETRY_AFTER) when the store cannot record a jti. */
      retryAfter: number;
      /** The store could not record a jti (the proof was refused with 503). */
      onUnavailable?: (error: unknown) => void;
    },
  ) {
    this.clock = options.clock ?? systemClock;
    const redis = options.redis;
    if (redis === undefined) return;
    if (!('tesseraUseKeys' in redis.client)) redis.client.defineCommand('tesseraUseKeys', { lua: USE_KEYS });
    const client = redis.client as unknown as UsesKeys;
    this.inRedis = perTurn(
      async (uses) => {
        // A CLIENT span in the trace of the request whose use began the batch (traces).
        const answers = await redis.breaker.run(() =>
          clientSpan(
            'replay',
            {
              'db.system.name': 'redis',
              'db.operation.name': 'replay',
              'db.operation.batch.size': uses.length,
            },
            () => client.tesseraUseKeys(uses.length, ...uses.map((u) => u.key), ...uses.map((u) => u.ttl)),
          ),
        );
        // Not an answer of the script (the breaker released the batch, or something else answered): the store's turn.
        if (!Array.isArray(answers) || answers.length !== uses.length) return uses.map(() => undefined);
        return answers.map((used) => used === 1);
      },
      // At the tick, not the turn's end: the lane resumes a turn's requests in one callback (Turns.end), so a DPoP
      // proof's id (verified synchronously) goes with the turn's others, and so does a client assertion's (its key
      // found by a promise, its signature checked synchronously: client-auth/verify-jwt.ts). Against the turn's end,
      // when jose verified assertions with WebCrypto, each in a callback of its own: DPoP with Redis 1.14-1.15x the
      // requests a second, private_key_jwt 0.95-0.99x (bench --compare, three rounds).
      { parallel: REDIS_BATCHES_AT_ONCE, soon: 'tick' },
    );
  }

  /**
   * A fixed-size key whatever the jti: base64url SHA-256 of scope and jti. The scope is a client id for a
   * client's own assertions, `<client id> <issuer>` for a federated credential's tokens (domain/client-auth).
   */
  static idOf(scope: string, jti: string): string {
    return createHash('sha256').update(scope).update('\0').update(jti).digest('base64url');
  }

  async use(scope: string, jti: string, until: number): Promise<boolean> {
    const id = AssertionReplay.idOf(scope, jti);
    const now = this.clock.now();
    // In whole milliseconds: a proof's iat or exp may have a fraction (RFC 7519 NumericDate); Redis's PX and the
    // store's column take integers.
    const ttl = Math.max(1, Math.ceil(until - now));
    // A time that is not a number of milliseconds (a caller's bug) never reaches Redis: one bad value would fail
    // the whole batch's script and open the breaker. The store refuses it (503).
    if (this.inRedis && Number.isSafeInteger(ttl)) {
      const answer = await this.inRedis({ key: redisKeyOf(this.options.keyPrefix, id), ttl });
      if (answer !== undefined) return answer;
    }
    try {
      return await this.store.useAssertionJti(id, Math.ceil(until));
    } catch (error) {
      // Neither fresh nor a replay: the proof cannot be accepted safely, and the client may try again
      // (docs/interface.md: the store unreachable is a 503, for a client assertion as for a DPoP proof). On SQLite, a
      // write lock another process holds past the wait (a very large apply) ends here too.
      this.options.onUnavailable?.(error);
      throw new Unavailable(this.options.retryAfter, 'the proof id could not be recorded', error);
    }
  }

  /** Deletes expired ids from the store once a minute (Redis expires its keys itself). */
  start(): void {
    this.job = this.clock.every(PRUNE_EVERY_MS, () => void this.prune());
  }

  /**
   * Deletes the expired ids, PRUNE_BATCH a statement with a turn of the event loop between statements, so
   * that a minute of a busy private_key_jwt client (tens of thousands of ids) never holds the store's write
   * lock, or this process, for long. Never rejects.
   */
  async prune(): Promise<number> {
    if (this.pruning) return 0;
    this.pruning = true;
    let total = 0;
    try {
      const now = this.clock.now();
      for (;;) {
        const deleted = await this.store.pruneAssertionJtis(now, PRUNE_BATCH);
        total += deleted;
        if (deleted < PRUNE_BATCH || this.job === undefined) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
    } catch (error) {
      this.options.onError?.(error);
    } finally {
      this.pruning = false;
    }
    return total;
  }

  stop(): void {
    this.job?.stop();
    this.job = undefined;
  }
}
