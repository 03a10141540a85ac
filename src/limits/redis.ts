import { Redis } from 'ioredis';

export interface SharedRedis {
  client: Redis;
  close(): Promise<void>;
}

/**
 * The one Redis connection of a process, for the shared counters (failed attempts, quotas). Commands fail at
 * once while it is disconnected (no offline queue), so callers fall back to memory instead of waiting; the
 * loss is reported as soon as the connection closes, and the return when it is ready again.
 */
export function connectRedis(
  url: string,
  events: { onDown?: (error: unknown) => void; onUp?: () => void } = {},
): SharedRedis {
  let down = false;
  let closing = false;
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    // A Redis that hangs instead of refusing must fail fast too: the memory fallback then answers.
    commandTimeout: 250,
    keepAlive: 10_000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
  const lost = (error: unknown): void => {
    if (!down && !closing) events.onDown?.(error);
    down = true;
  };
  client.on('close', () => lost(new Error('connection to Redis closed')));
  client.on('error', lost);
  client.on('ready', () => {
    if (down && !closing) events.onUp?.();
    down = false;
  });
  return {
    client,
    async close() {
      closing = true;
      // quit() waits for the server, which may be gone: only ask politely when connected.
      if (client.status === 'ready') await client.quit().catch(() => undefined);
      client.disconnect();
    },
  };
}
