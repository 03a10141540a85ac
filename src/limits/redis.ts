import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RedisBreaker, type BreakerOptions } from './breaker.js';

export interface SharedRedis {
  client: Redis;
  /** Whether Redis is counted on; every count goes through it (see breaker.ts). */
  breaker: RedisBreaker;
  /** Prefix of every key (TESSERA_REDIS_PREFIX). */
  keyPrefix: string;
  close(): Promise<void>;
}

/**
 * The one Redis connection of a process, for the shared counters (failed attempts, quotas), behind one
 * circuit breaker. Commands fail at once while it is disconnected (no offline queue); the connection's own
 * events feed the breaker, so a lost connection opens it before any count has to fail, and a reconnection
 * closes it.
 */
export function connectRedis(
  url: string,
  options: {
    logger: Logger;
    keyPrefix: string;
    /** How long a count waits for Redis (TESSERA_REDIS_TIMEOUT_MS; see BreakerOptions.timeoutMs). */
    timeoutMs: number;
    breaker?: Partial<BreakerOptions>;
  },
): SharedRedis {
  let closing = false;
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    // The breaker bounds what a count waits (TESSERA_REDIS_TIMEOUT_MS). This only frees, eventually, the commands a Redis that
    // hangs never answers; it is longer than the longest probe back-off so that a probe is always still
    // pending when a long hang ends, and its late answer tells the breaker at once (answeredLate).
    commandTimeout: 60_000,
    keepAlive: 10_000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
  // A write, like every count: a Redis that answers PING but refuses writes (out of memory, a replica left
  // read-only by a failover) is not back. The key expires by itself.
  const probeKey = `${options.keyPrefix}:probe`;
  const breaker = new RedisBreaker({
    logger: options.logger,
    probe: () => client.set(probeKey, '1', 'PX', 10_000),
    timeoutMs: options.timeoutMs,
    ...options.breaker,
  });
  client.on('close', () => {
    if (!closing) breaker.failed(new Error('the connection to Redis closed'));
  });
  client.on('error', (error: unknown) => {
    if (!closing) breaker.failed(error);
  });
  client.on('ready', () => {
    if (!closing) breaker.ready();
  });
  return {
    client,
    breaker,
    keyPrefix: options.keyPrefix,
    async close() {
      closing = true;
      breaker.stop();
      // quit() waits for the server, which may be gone or hang: ask politely only when connected and
      // answering, and not for longer than a count would wait.
      if (client.status === 'ready' && breaker.closed) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          client.quit().catch(() => undefined),
          new Promise((resolve) => (timer = setTimeout(resolve, breaker.timeoutMs))),
        ]);
        clearTimeout(timer);
      }
      client.disconnect();
    },
  };
}
