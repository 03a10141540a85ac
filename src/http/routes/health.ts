import type { FastifyInstance } from 'fastify';
import type { SigningAlg } from '../../domain/algorithms.js';
import type { Keyring } from '../../keys/keyring.js';
import type { Directory } from '../../store/directory.js';
import type { Store } from '../../store/types.js';

/** A change feed not read for this long means this instance may be serving stale clients and keys. */
const FEED_STALE_MS = 10_000;

/**
 * /healthz: the process answers. /readyz: the store answers, the default signing key is loaded, and the
 * change feed is being followed.
 */
export function healthRoutes(
  app: FastifyInstance,
  store: Store,
  keyring: Keyring,
  directory: Directory,
  defaultAlg: SigningAlg,
): void {
  const noStore = { 'cache-control': 'no-store' };
  app.get('/healthz', (_request, reply) => reply.headers(noStore).send({ status: 'ok' }));
  app.get('/readyz', async (request, reply) => {
    const checks = {
      store: 'ok',
      signing_key: keyring.hasActive(defaultAlg) ? 'ok' : 'missing',
      // Changes made elsewhere reach this instance only while it reads the feed.
      change_feed: directory.following(FEED_STALE_MS) ? 'ok' : 'stale',
    };
    try {
      // A store that hangs is as unready as one that refuses: answer within two seconds either way.
      await Promise.race([
        store.ping(),
        new Promise((_, reject) => setTimeout(() => reject(new Error('store ping timed out')), 2000).unref()),
      ]);
    } catch (error) {
      request.log.warn({ err: error }, 'store is not reachable');
      checks.store = 'unreachable';
    }
    const ready = Object.values(checks).every((check) => check === 'ok');
    return reply
      .code(ready ? 200 : 503)
      .headers(noStore)
      .send({ status: ready ? 'ready' : 'not_ready', checks });
  });
}
