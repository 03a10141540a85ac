import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { operators, stats, views } from '../../management/index.js';
import type { AdminRouteContext } from './index.js';
import { isString, pageOf } from './paging.js';
import { adminRoute, ifMatch, sendResource, type AdminGuard } from './route.js';
import * as S from './schemas.js';

const tags = ['operators'];

/**
 * Any change of an operator needs every admin scope of the role it has or would have (MANAGEMENT.md), decided
 * before the body is validated.
 */
const operatorGuard: AdminGuard = (request, mc) =>
  operators.authorizeChange(
    mc,
    (request.params as Static<typeof S.IdParam>).id,
    (request.body as { role?: unknown } | null | undefined)?.role,
  );

/**
 * Console operators: GET, POST /operators · GET, PATCH, DELETE /operators/{id} · POST /operators/{id}/reset;
 * and the overview's figures: GET /stats.
 */
export function operatorRoutes(app: FastifyInstance, ctx: AdminRouteContext): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const location = (id: string) => `${ctx.config.issuer}/admin/v1/operators/${encodeURIComponent(id)}`;
  const withLink = (enrollment: operators.Enrollment) => ({
    ...views.operatorJson(enrollment.operator),
    enrollment_url: enrollment.url,
  });

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
    async (request) => {
      const { limit = 50, after } = request.query as Static<typeof S.ListQuery>;
      const from = after === undefined ? undefined : ctx.cursors.read('operators', after, isString);
      const all = await operators.listOperators(ctx.context(request));
      const page = pageOf(all, (o) => o.email, from, limit);
      return {
        items: page.items.map(views.operatorJson),
        next: page.last === undefined ? null : ctx.cursors.issue('operators', page.last),
      };
    },
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
      return reply.code(201).send(withLink(added));
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
    async (request, reply) => {
      const { id } = request.params as Static<typeof S.IdParam>;
      return sendResource(reply, views.operatorJson(await operators.getOperator(ctx.context(request), id)));
    },
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
    async (request, reply) => {
      const { id } = request.params as Static<typeof S.IdParam>;
      const body = request.body as Static<typeof S.OperatorPatch>;
      const updated = await operators.updateOperator(
        ctx.context(request),
        id,
        body,
        ifMatch(request.headers),
      );
      return sendResource(reply, views.operatorJson(updated));
    },
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
    async (request, reply) => {
      const { id } = request.params as Static<typeof S.IdParam>;
      await operators.removeOperator(ctx.context(request), id, ifMatch(request.headers));
      return reply.code(204).send();
    },
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
      return withLink(await operators.resetOperator(ctx.context(request), id));
    },
  );

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
