import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { operators, views } from '../../management/index.js';
import type { AdminRouteContext } from './route-context.js';
import { pageOfList } from './paging.js';
import { adminRoute, deleteById, readById, updateById, type AdminGuard } from './route.js';
import * as S from './schemas.js';

const tags = ['operators'];

/**
 * Any change of an operator needs every admin scope of the role it has or would have (docs/management.md), decided
 * before the body is validated.
 */
const operatorGuard: AdminGuard = (request, mc) =>
  operators.authorizeChange(
    mc,
    (request.params as Static<typeof S.IdParam>).id,
    (request.body as { role?: unknown } | null | undefined)?.role,
  );

/** Console operators: GET, POST /operators · GET, PATCH, DELETE /operators/{id} · POST /operators/{id}/reset. */
export function operatorRoutes(app: FastifyInstance, ctx: AdminRouteContext): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const location = (id: string) => `${ctx.config.issuer}/admin/v1/operators/${encodeURIComponent(id)}`;

  api.get(
    '/operators',
    adminRoute({
      operationId: 'listOperators',
      summary: 'List console operators, by email',
      tags,
      scope: 'operators:read',
      querystring: S.ListQuery,
      ok: { 200: S.Page(S.Operator) },
    }),
    (request) =>
      pageOfList(
        ctx.cursors,
        'operators',
        request.query as Static<typeof S.ListQuery>,
        () => operators.listOperators(ctx.context(request)),
        (o) => o.email,
        views.operatorJson,
      ),
  );
  api.post(
    '/operators',
    adminRoute({
      operationId: 'createOperator',
      summary: 'Add an operator; the answer has their one-time enrollment link (valid 24 h), this once',
      tags,
      scope: 'operators:write',
      guard: (request, mc) =>
        operators.authorizeChange(mc, undefined, (request.body as { role?: unknown } | null)?.role),
      body: S.NewOperator,
      ok: { 201: S.OperatorWithLink },
    }),
    async (request, reply) => {
      const body = request.body as Static<typeof S.NewOperator>;
      const added = await operators.addOperator(ctx.context(request), body);
      const view = views.operatorJson(added.operator);
      reply.header('location', location(added.operator.id)).header('etag', views.etagOf(view));
      return reply.code(201).send(views.enrollmentJson(added));
    },
  );
  api.get(
    '/operators/:id',
    adminRoute({
      operationId: 'getOperator',
      summary: 'Read an operator',
      tags,
      scope: 'operators:read',
      params: S.IdParam,
      ok: { 200: S.Operator },
    }),
    readById(ctx, operators.getOperator, views.operatorJson),
  );
  api.patch(
    '/operators/:id',
    adminRoute({
      operationId: 'updateOperator',
      summary: "Change an operator's role, or disable them (their sessions end at once, on every instance)",
      tags,
      scope: 'operators:write',
      guard: operatorGuard,
      params: S.IdParam,
      body: S.OperatorPatch,
      ok: { 200: S.Operator },
    }),
    updateById(ctx, operators.updateOperator, views.operatorJson),
  );
  api.delete(
    '/operators/:id',
    adminRoute({
      operationId: 'deleteOperator',
      summary: 'Remove an operator and end their sessions',
      tags,
      scope: 'operators:write',
      guard: operatorGuard,
      params: S.IdParam,
      ok: { 204: null },
    }),
    deleteById(ctx, operators.removeOperator),
  );
  api.post(
    '/operators/:id/reset',
    adminRoute({
      operationId: 'resetOperator',
      summary:
        "A new enrollment link (valid 24 h), shown this once: the operator's password is cleared and their sessions end",
      tags,
      scope: 'operators:write',
      guard: operatorGuard,
      params: S.IdParam,
      ok: { 200: S.OperatorWithLink },
    }),
    async (request) => {
      const { id } = request.params as Static<typeof S.IdParam>;
      return views.enrollmentJson(await operators.resetOperator(ctx.context(request), id));
    },
  );
}
