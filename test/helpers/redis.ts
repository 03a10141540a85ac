import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { freePort } from './server.js';
import { sleep } from './wait.js';

/** The machine's Redis; each test run uses its own key prefix and deletes its keys after. */
export const REDIS_URL = process.env.TESSERA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export function testPrefix(): string {
  return `tessera-test-${randomBytes(6).toString('hex')}`;
}

/** Deletes every key under the prefix. */
export async function dropPrefix(prefix: string, url = REDIS_URL): Promise<void> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/** A throwaway redis-server on a free port, to stop and start for real without touching the machine's own. */
export interface ThrowawayRedis {
  url: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Freezes the server (SIGSTOP): connections stay open and nothing is answered, like a Redis that hangs. */
  pause(): void;
  /** Lets a paused server run again (SIGCONT); it answers what it was sent meanwhile. */
  resume(): void;
}

export async function throwawayRedis(): Promise<ThrowawayRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const url = `redis://127.0.0.1:${port}`;
  const ping = async () => {
    const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      return (await redis.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      redis.disconnect();
    }
  };
  return {
    url,
    async start() {
      child = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        {
          stdio: 'ignore',
        },
      );
      for (let i = 0; i < 100 && !(await ping()); i++) await sleep(50);
    },
    pause() {
      child?.kill('SIGSTOP');
    },
    resume() {
      child?.kill('SIGCONT');
    },
    async stop() {
      if (!child || child.exitCode !== null) return;
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGKILL'); // a paused server too
      await exited;
    },
  };
}
