import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { stats } from '../../management/index.js';
import { adminRoute } from './route.js';
import type { AdminRouteContext } from './route-context.js';
import * as S from './schemas.js';

/** The console overview's figures, counted from the audit trail: GET /stats. */
export function statsRoutes(app: FastifyInstance, ctx: AdminRouteContext): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.get(
    '/stats',
    adminRoute({
      operationId: 'getStats',
      summary:
        'How many clients and audiences there are, and tokens issued and refused per minute (the last hour by default)',
      tags: ['audit'],
      scope: 'audit:read',
      querystring: S.StatsQuery,
      ok: { 200: S.Stats },
    }),
    async (request) => {
      const { minutes = 60 } = request.query as Static<typeof S.StatsQuery>;
      return stats.overview(ctx.context(request), minutes);
    },
  );
}
