import type { FastifyInstance } from 'fastify';
import type { SigningAlg } from '../../domain/algorithms.js';
import type { Keyring } from '../../keys/keyring.js';
import type { Store } from '../../store/types.js';

/** /healthz: the process answers. /readyz: the store answers and the default signing key is loaded. */
export function healthRoutes(
  app: FastifyInstance,
  store: Store,
  keyring: Keyring,
  defaultAlg: SigningAlg,
): void {
  const noStore = { 'cache-control': 'no-store' };
  app.get('/healthz', (_request, reply) => reply.headers(noStore).send({ status: 'ok' }));
  app.get('/readyz', async (request, reply) => {
    const checks = { store: 'ok', signing_key: keyring.hasActive(defaultAlg) ? 'ok' : 'missing' };
    try {
      await store.ping();
    } catch (error) {
      request.log.warn({ err: error }, 'store is not reachable');
      checks.store = 'unreachable';
    }
    const ready = checks.store === 'ok' && checks.signing_key === 'ok';
    return reply
      .code(ready ? 200 : 503)
      .headers(noStore)
      .send({ status: ready ? 'ready' : 'not_ready', checks });
  });
}
