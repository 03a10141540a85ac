import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import type { SigningAlg } from '../../domain/jose.js';
import { keys, views } from '../../management/index.js';
import type { AdminRouteContext } from './route-context.js';
import { pageOfList } from './paging.js';
import { adminRoute } from './route.js';
import * as S from './schemas.js';

/** Signing keys: GET /keys · POST /keys/rotate · POST /keys/{kid}/retire. */
export function keyRoutes(app: FastifyInstance, ctx: AdminRouteContext): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const warn = (message: string) => app.log.warn(message);

  api.get(
    '/keys',
    adminRoute({
      operationId: 'listKeys',
      summary: 'Signing keys and their statuses, oldest first',
      tags: ['keys'],
      scope: 'keys:read',
      querystring: S.ListQuery,
      ok: { 200: S.Page(S.Key) },
    }),
    (request) => {
      const keyOf = (k: ReturnType<typeof views.keyJson>) => `${k.created_at} ${k.kid}`;
      return pageOfList(
        ctx.cursors,
        'keys',
        request.query as Static<typeof S.ListQuery>,
        async () =>
          (await keys.listKeys(ctx.context(request)))
            .map(views.keyJson)
            .sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1)),
        keyOf,
        (k) => k,
      );
    },
  );
  api.post(
    '/keys/rotate',
    adminRoute({
      operationId: 'rotateKeys',
      summary:
        'Publish a new key for each algorithm (or alg); it signs when the current one retires, after the publish-ahead time',
      tags: ['keys'],
      scope: 'keys:write',
      body: S.RotateBody,
      ok: { 200: S.Rotations },
    }),
    async (request) => {
      const body = (request.body ?? {}) as Static<typeof S.RotateBody>;
      const results = await keys.rotateKeys(ctx.context(request), {
        alg: body.alg as SigningAlg | undefined,
        warn,
      });
      return { items: results.map(views.rotationJson) };
    },
  );
  api.post(
    '/keys/:kid/retire',
    adminRoute({
      operationId: 'retireKey',
      summary: 'Stop signing with a key now; it stays published until its last token expires',
      tags: ['keys'],
      scope: 'keys:write',
      params: S.KidParam,
      ok: { 200: S.Retirement },
    }),
    async (request) => {
      const { kid } = request.params as Static<typeof S.KidParam>;
      return views.retirementJson(await keys.retireKey(ctx.context(request), kid, { warn }));
    },
  );
}
