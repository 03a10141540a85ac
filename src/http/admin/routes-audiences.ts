import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { audiences, clientGrants, views } from '../../management/index.js';
import type { AdminRouteContext } from './route-context.js';
import { pageOfList } from './paging.js';
import { adminRoute, deleteById, readById, seconds, sendResource, updateById } from './route.js';
import * as S from './schemas.js';

const tags = ['audiences'];

/** Audiences: GET, POST /audiences · GET, PATCH, DELETE /audiences/{id}. */
export function audienceRoutes(app: FastifyInstance, ctx: AdminRouteContext): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  api.get(
    '/audiences',
    adminRoute({
      operationId: 'listAudiences',
      summary: 'List audiences, by id',
      tags,
      scope: 'audiences:read',
      querystring: S.ListQuery,
      ok: { 200: S.Page(S.Audience) },
    }),
    (request) =>
      pageOfList(
        ctx.cursors,
        'audiences',
        request.query as Static<typeof S.ListQuery>,
        async () =>
          (await audiences.listAudiences(ctx.context(request))).sort((a, b) =>
            a.id < b.id ? -1 : a.id > b.id ? 1 : 0,
          ),
        (a) => a.id,
        views.audienceJson,
      ),
  );
  api.post(
    '/audiences',
    adminRoute({
      operationId: 'createAudience',
      summary: 'Register an audience',
      tags,
      scope: 'audiences:write',
      body: S.NewAudience,
      ok: { 201: S.Audience },
    }),
    async (request, reply) => {
      const body = request.body as Static<typeof S.NewAudience>;
      const added = await audiences.addAudience(ctx.context(request), {
        url: body.identifier,
        name: body.name,
        scopes: body.scopes,
        tokenTtl: seconds(body.token_ttl),
        signingAlg: body.signing_alg,
        resourceServerClientIds: body.resource_server_client_ids,
        tokenProfile: body.token_profile,
      });
      reply.header('location', `${ctx.config.issuer}/admin/v1/audiences/${added.id}`);
      return sendResource(reply, views.audienceJson(added), 201);
    },
  );
  api.get(
    '/audiences/:id',
    adminRoute({
      operationId: 'getAudience',
      summary: 'Read an audience',
      tags,
      scope: 'audiences:read',
      params: S.IdParam,
      ok: { 200: S.Audience },
    }),
    readById(ctx, audiences.getAudienceById, views.audienceJson),
  );
  api.get(
    '/audiences/:id/grants',
    adminRoute({
      operationId: 'listAudienceGrants',
      summary:
        "An audience's grants, by client id: the clients that may get its tokens, and those that may exchange into it (token_exchange)",
      tags,
      scope: 'clients:read',
      params: S.IdParam,
      querystring: S.ListQuery,
      ok: { 200: S.Page(S.Grant) },
    }),
    async (request) => {
      const { id } = request.params as Static<typeof S.IdParam>;
      return pageOfList(
        ctx.cursors,
        `audience grants ${id}`,
        request.query as Static<typeof S.ListQuery>,
        () => clientGrants.listGrantsOfAudience(ctx.context(request), id),
        (g) => g.clientId,
        (g) => views.grantJson(g.clientId, g.audience, g.grant),
      );
    },
  );
  api.patch(
    '/audiences/:id',
    adminRoute({
      operationId: 'updateAudience',
      summary: 'Change an audience (JSON Merge Patch: fields left out stay as they are)',
      tags,
      scope: 'audiences:write',
      params: S.IdParam,
      body: S.AudiencePatch,
      ok: { 200: S.Audience },
    }),
    updateById(
      ctx,
      async (mc, id, body: Static<typeof S.AudiencePatch>, condition) => {
        const current = await audiences.getAudienceById(mc, id);
        return audiences.updateAudience(
          mc,
          current.url,
          {
            name: body.name,
            tokenTtl: seconds(body.token_ttl),
            signingAlg: body.signing_alg,
            scopes: body.scopes,
            resourceServerClientIds: body.resource_server_client_ids,
            tokenProfile: body.token_profile,
          },
          condition,
        );
      },
      views.audienceJson,
    ),
  );
  api.delete(
    '/audiences/:id',
    adminRoute({
      operationId: 'deleteAudience',
      summary: 'Delete an audience and every grant of it',
      tags,
      scope: 'audiences:write',
      params: S.IdParam,
      ok: { 204: null },
    }),
    deleteById(ctx, async (mc, id, condition) => {
      const current = await audiences.getAudienceById(mc, id);
      await audiences.removeAudience(mc, current.url, condition);
    }),
  );
}
