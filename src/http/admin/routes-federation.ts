import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { federation, views } from '../../management/index.js';
import type { AdminRouteContext } from './route-context.js';
import { byCreation, oldestFirst, pageOfList } from './paging.js';
import { adminRoute, ifMatch, sendResource } from './route.js';
import * as S from './schemas.js';
import { clientGuard, federatedInput, type CredentialBody } from './routes-clients.js';

const tags = ['clients'];

/**
 * A client's federated credentials (workload identity federation): GET, POST /clients/{id}/federated-credentials ·
 * GET, PATCH, DELETE /clients/{id}/federated-credentials/{fid}. Read with clients:read, changed with clients:write
 * and the client's guard (every admin scope the client holds), as its secrets are.
 */
export function federationRoutes(app: FastifyInstance, ctx: AdminRouteContext): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const location = (id: string, fid: string) =>
    `${ctx.config.issuer}/admin/v1/clients/${encodeURIComponent(id)}/federated-credentials/${encodeURIComponent(fid)}`;

  api.get(
    '/clients/:id/federated-credentials',
    adminRoute({
      operationId: 'listFederatedCredentials',
      summary: "A client's federated credentials, oldest first (at most 10)",
      tags,
      scope: 'clients:read',
      params: S.IdParam,
      querystring: S.ListQuery,
      ok: { 200: S.Page(S.FederatedCredential) },
    }),
    async (request) => {
      const { id } = request.params as Static<typeof S.IdParam>;
      return pageOfList(
        ctx.cursors,
        `federated-credentials ${id}`,
        request.query as Static<typeof S.ListQuery>,
        async () => oldestFirst(await federation.listFederatedCredentials(ctx.context(request), id)),
        byCreation,
        views.federatedCredentialJson,
      );
    },
  );
  api.post(
    '/clients/:id/federated-credentials',
    adminRoute({
      operationId: 'addFederatedCredential',
      summary:
        "Trust a platform's tokens for this client: a private_key_jwt client without jwks or jwks_uri (409 otherwise)",
      tags,
      scope: 'clients:write',
      guard: clientGuard,
      params: S.IdParam,
      body: S.NewFederatedCredential,
      ok: { 201: S.FederatedCredential },
    }),
    async (request, reply) => {
      const { id } = request.params as Static<typeof S.IdParam>;
      const body = request.body as Static<typeof S.NewFederatedCredential>;
      const added = await federation.addFederatedCredential(ctx.context(request), id, federatedInput(body));
      reply.header('location', location(id, added.id));
      return sendResource(reply, views.federatedCredentialJson(added), 201);
    },
  );
  api.get(
    '/clients/:id/federated-credentials/:fid',
    adminRoute({
      operationId: 'getFederatedCredential',
      summary: 'Read a federated credential',
      tags,
      scope: 'clients:read',
      params: S.FederatedCredentialParams,
      ok: { 200: S.FederatedCredential },
    }),
    async (request, reply) => {
      const { id, fid } = request.params as Static<typeof S.FederatedCredentialParams>;
      const found = await federation.getFederatedCredential(ctx.context(request), id, fid);
      return sendResource(reply, views.federatedCredentialJson(found));
    },
  );
  api.patch(
    '/clients/:id/federated-credentials/:fid',
    adminRoute({
      operationId: 'updateFederatedCredential',
      summary:
        'Change a federated credential (JSON Merge Patch: fields left out stay; null resets audience, claims, max_lifetime and once, and jwks and jwks_uri both null mean discovery)',
      tags,
      scope: 'clients:write',
      guard: clientGuard,
      params: S.FederatedCredentialParams,
      body: S.FederatedCredentialPatch,
      ok: { 200: S.FederatedCredential },
    }),
    async (request, reply) => {
      const { id, fid } = request.params as Static<typeof S.FederatedCredentialParams>;
      const changed = await federation.updateFederatedCredential(
        ctx.context(request),
        id,
        fid,
        federatedInput(request.body as CredentialBody),
        ifMatch(request.headers),
      );
      return sendResource(reply, views.federatedCredentialJson(changed));
    },
  );
  api.delete(
    '/clients/:id/federated-credentials/:fid',
    adminRoute({
      operationId: 'removeFederatedCredential',
      summary: "Remove a federated credential: its platform's tokens stop working at once",
      tags,
      scope: 'clients:write',
      guard: clientGuard,
      params: S.FederatedCredentialParams,
      ok: { 204: null },
    }),
    async (request, reply) => {
      const { id, fid } = request.params as Static<typeof S.FederatedCredentialParams>;
      await federation.removeFederatedCredential(ctx.context(request), id, fid, ifMatch(request.headers));
      return reply.code(204).send();
    },
  );
}
