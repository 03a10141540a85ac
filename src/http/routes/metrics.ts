import type { FastifyInstance } from 'fastify';
import { Unavailable } from '../../domain/errors.js';
import type { Exposition } from '../../metrics/metrics.js';
import { methodNotAllowed } from '../errors.js';

/**
 * GET /metrics: Prometheus text exposition (of this process, or of the whole cluster under --workers). When
 * it cannot be collected, 503 with `Retry-After: retryAfter` (TESSERA_RETRY_AFTER), as answerFor answers an
 * Unavailable.
 */
export function metricsRoutes(
  app: FastifyInstance,
  exposition: () => Promise<Exposition>,
  retryAfter: number,
): void {
  app.get('/metrics', async (request, reply) => {
    let current: Exposition;
    try {
      current = await exposition();
    } catch (error) {
      request.log.warn({ err: error }, 'metrics could not be collected');
      throw new Unavailable(retryAfter, 'metrics could not be collected', error);
    }
    return reply
      .header('content-type', current.contentType)
      .header('cache-control', 'no-store')
      .send(current.text);
  });
  methodNotAllowed(app, '/metrics', ['GET', 'HEAD']);
}
