import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { secrets, views } from '../../management/index.js';
import type { AdminRouteContext } from './route-context.js';
import { byCreation, oldestFirst, pageOfList } from './paging.js';
import { adminRoute, seconds } from './route.js';
import * as S from './schemas.js';
import { clientGuard } from './routes-clients.js';

const tags = ['clients'];

/** A client's secrets: GET, POST /clients/{id}/secrets · DELETE /clients/{id}/secrets/{secret_id}. */
export function secretRoutes(app: FastifyInstance, ctx: AdminRouteContext): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  api.get(
    '/clients/:id/secrets',
    adminRoute({
      operationId: 'listSecrets',
      summary: "A client's secrets, oldest first (never their values)",
      tags,
      scope: 'clients:read',
      params: S.IdParam,
      querystring: S.ListQuery,
      ok: { 200: S.Page(S.Secret) },
    }),
    async (request) => {
      const { id } = request.params as Static<typeof S.IdParam>;
      return pageOfList(
        ctx.cursors,
        `secrets ${id}`,
        request.query as Static<typeof S.ListQuery>,
        async () => oldestFirst(await secrets.listSecrets(ctx.context(request), id)),
        byCreation,
        views.secretJson,
      );
    },
  );
  api.post(
    '/clients/:id/secrets',
    adminRoute({
      operationId: 'addSecret',
      summary:
        'Add a secret, shown this once; the others expire after `grace` (default 0: at once). At most 5 live.',
      tags,
      scope: 'clients:write',
      guard: clientGuard,
      params: S.IdParam,
      body: S.NewSecretBody,
      ok: { 201: S.SecretWithValue },
    }),
    async (request, reply) => {
      const { id } = request.params as Static<typeof S.IdParam>;
      const body = (request.body ?? {}) as Static<typeof S.NewSecretBody>;
      const added = await secrets.addSecret(ctx.context(request), id, {
        graceSeconds: seconds(body.grace ?? 0)!,
        expiresAt: body.expires_at,
      });
      reply.header(
        'location',
        `${ctx.config.issuer}/admin/v1/clients/${encodeURIComponent(id)}/secrets/${added.secret.id}`,
      );
      return reply.code(201).send({ ...views.secretJson(added.secret), client_secret: added.value });
    },
  );
  api.delete(
    '/clients/:id/secrets/:secret_id',
    adminRoute({
      operationId: 'revokeSecret',
      summary: 'Revoke a secret: it stops working at once',
      tags,
      scope: 'clients:write',
      guard: clientGuard,
      params: S.SecretParams,
      ok: { 204: null },
    }),
    async (request, reply) => {
      const { id, secret_id } = request.params as Static<typeof S.SecretParams>;
      await secrets.revokeSecret(ctx.context(request), id, secret_id);
      return reply.code(204).send();
    },
  );
}
