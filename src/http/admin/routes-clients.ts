import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Static } from 'typebox';
import type { federation } from '../../management/index.js';
import { audiences, clientGrants, clients, grants, views } from '../../management/index.js';
import { TLS_IDENTITY_KINDS, type TlsIdentityKind } from '../../domain/known-client.js';
import type { AdminRouteContext } from './route-context.js';
import { isString, pageOfFetched, pageOfList } from './paging.js';
import {
  adminRoute,
  deleteById,
  ifMatch,
  readById,
  seconds,
  sendResource,
  updateById,
  type AdminGuard,
} from './route.js';
import * as S from './schemas.js';

const tags = ['clients'];

/** Any change of a client needs every admin scope it holds (docs/management.md), decided before its body is read. */
export const clientGuard: AdminGuard = (request, mc) =>
  clients.authorizeChange(mc, (request.params as Static<typeof S.IdParam>).id);

/**
 * A change of a grant needs every admin scope it gives (docs/management.md), decided before its body is validated:
 * `scopesOf` reads them from the request (a withdrawal gives none).
 */
const grantGuard =
  (scopesOf: (request: FastifyRequest) => unknown): AdminGuard =>
  async (request, mc) => {
    const { id, audience_id } = request.params as Static<typeof S.GrantParams>;
    await grants.authorizeGrant(mc, id, audience_id, scopesOf(request));
  };

/** A client's fields as the API names them (POST and PATCH alike), as the management layer takes them. */
const clientFields = (body: Static<typeof S.ClientPatch>): clients.ClientFields => ({
  name: body.name,
  description: body.description,
  enabled: body.enabled,
  tokenTtl: seconds(body.token_ttl),
  quotaPerMinute: body.quota_per_minute,
  quotaPerDay: body.quota_per_day,
  claims: body.claims,
  authMethod: body.token_endpoint_auth_method,
  jwks: body.jwks,
  jwksUri: body.jwks_uri,
  dpopBoundAccessTokens: body.dpop_bound_access_tokens,
  tlsIdentity: tlsIdentityOf(body),
  certificateBoundAccessTokens: body.tls_client_certificate_bound_access_tokens,
});

/**
 * The tls_client_auth_* fields of a body, by kind, in the body's order (a second one given is the one refused);
 * undefined when it has none.
 */
function tlsIdentityOf(body: Static<typeof S.ClientPatch>): clients.ClientFields['tlsIdentity'] {
  const given: NonNullable<clients.ClientFields['tlsIdentity']> = {};
  for (const key of Object.keys(body)) {
    const kind = key.startsWith('tls_client_auth_') ? key.slice('tls_client_auth_'.length) : '';
    if ((TLS_IDENTITY_KINDS as readonly string[]).includes(kind))
      given[kind as TlsIdentityKind] = body[key as `tls_client_auth_${TlsIdentityKind}`];
  }
  return Object.keys(given).length === 0 ? undefined : given;
}

export type CredentialBody = Static<typeof S.FederatedCredentialPatch>;

/** A federated credential's fields as the API names them (POST and PATCH alike), as the management layer takes them. */
export const federatedInput = (body: CredentialBody): federation.FederatedCredentialInput => ({
  name: body.name,
  issuer: body.issuer,
  jwks: body.jwks,
  jwksUri: body.jwks_uri,
  subject: body.subject,
  audience: body.audience,
  claims: body.claims,
  maxLifetime: seconds(body.max_lifetime),
  once: body.once,
});

/**
 * Clients: GET, POST /clients · GET, PATCH, DELETE /clients/{id}; their grants: GET /clients/{id}/grants ·
 * PUT, DELETE /clients/{id}/grants/{audience_id}.
 */
export function clientRoutes(app: FastifyInstance, ctx: AdminRouteContext): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const location = (id: string) => `${ctx.config.issuer}/admin/v1/clients/${encodeURIComponent(id)}`;

  api.get(
    '/clients',
    adminRoute({
      operationId: 'listClients',
      summary: 'List clients, by client_id; search by client_id or name',
      tags,
      scope: 'clients:read',
      querystring: S.ClientListQuery,
      ok: { 200: S.Page(S.Client) },
    }),
    async (request) => {
      const { limit = 50, after, search } = request.query as Static<typeof S.ClientListQuery>;
      // A search's cursors are its own: a page of one search does not continue another.
      const list = search === undefined ? 'clients' : `clients ${search}`;
      const from = after === undefined ? null : ctx.cursors.read(list, after, isString);
      const page = await clients.listClientsPage(ctx.context(request), from, limit + 1, search);
      return pageOfFetched(ctx.cursors, list, page, limit, (c) => c.id, views.clientJson);
    },
  );
  api.post(
    '/clients',
    adminRoute({
      operationId: 'createClient',
      summary:
        'Create a client; the answer has its secret, this once (none for private_key_jwt), and the federated credentials it was given',
      tags,
      scope: 'clients:write',
      body: S.NewClient,
      ok: { 201: S.ClientWithSecret },
    }),
    async (request, reply) => {
      const body = request.body as Static<typeof S.NewClient>;
      const { client, secret } = await clients.createClient(ctx.context(request), {
        ...clientFields(body),
        id: body.client_id,
        name: body.name,
        federatedCredentials: body.federated_credentials?.map(federatedInput),
      });
      const view = views.clientJson(client);
      // The ETag is the client's, as GET /clients/{id} answers it (its federated credentials have their own).
      reply.header('location', location(client.id)).header('etag', views.etagOf(view));
      return reply.code(201).send({
        ...view,
        // A private_key_jwt client has no secret: the answer has none.
        ...(secret === undefined ? {} : { client_secret: secret }),
        ...(body.federated_credentials === undefined
          ? {}
          : { federated_credentials: client.federatedCredentials.map(views.federatedCredentialJson) }),
      });
    },
  );
  api.get(
    '/clients/:id',
    adminRoute({
      operationId: 'getClient',
      summary: 'Read a client (never its secret)',
      tags,
      scope: 'clients:read',
      params: S.IdParam,
      ok: { 200: S.Client },
    }),
    readById(ctx, clients.getClient, views.clientJson),
  );
  api.patch(
    '/clients/:id',
    adminRoute({
      operationId: 'updateClient',
      summary: 'Change a client (JSON Merge Patch: fields left out stay as they are)',
      tags,
      scope: 'clients:write',
      guard: clientGuard,
      params: S.IdParam,
      body: S.ClientPatch,
      ok: { 200: S.Client },
    }),
    updateById(
      ctx,
      (mc, id, body: Static<typeof S.ClientPatch>, condition) =>
        clients.updateClient(mc, id, clientFields(body), condition),
      views.clientJson,
    ),
  );
  api.delete(
    '/clients/:id',
    adminRoute({
      operationId: 'deleteClient',
      summary: 'Delete a client and its grants',
      tags,
      scope: 'clients:write',
      guard: clientGuard,
      params: S.IdParam,
      ok: { 204: null },
    }),
    deleteById(ctx, clients.deleteClient),
  );

  api.post(
    '/clients/:id/revoke-tokens',
    adminRoute({
      operationId: 'revokeClientTokens',
      summary:
        'Make every token the client holds inactive, on every instance within a second: those issued at or ' +
        'before now, to the second',
      tags,
      scope: 'clients:write',
      guard: clientGuard,
      params: S.IdParam,
      ok: { 200: S.TokensRevoked },
    }),
    async (request) => {
      const { id } = request.params as Static<typeof S.IdParam>;
      return views.tokensRevokedJson(await clients.revokeClientTokens(ctx.context(request), id));
    },
  );

  // --- grants ---

  api.get(
    '/clients/:id/grants',
    adminRoute({
      operationId: 'listGrants',
      summary: "A client's grants, by audience id",
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
        `grants ${id}`,
        request.query as Static<typeof S.ListQuery>,
        () => clientGrants.listGrants(ctx.context(request), id),
        (g) => g.audience.id,
        (g) => views.grantJson(g.clientId, g.audience, g.grant),
      );
    },
  );
  api.put(
    '/clients/:id/grants/:audience_id',
    adminRoute({
      operationId: 'putGrant',
      summary: 'Grant a client an audience with these scopes (creates or replaces the grant)',
      tags,
      scope: 'clients:write',
      guard: grantGuard((request) => (request.body as { scopes?: unknown } | null | undefined)?.scopes),
      params: S.GrantParams,
      body: S.GrantBody,
      ok: { 200: S.Grant, 201: S.Grant },
    }),
    async (request, reply) => {
      const { id, audience_id } = request.params as Static<typeof S.GrantParams>;
      const body = (request.body ?? {}) as Static<typeof S.GrantBody>;
      const mc = ctx.context(request);
      const audience = await audiences.getAudienceById(mc, audience_id);
      // PUT sets the whole grant: what the body leaves out is none.
      const { grant, created } = await grants.putGrant(
        mc,
        id,
        audience,
        {
          scopes: body.scopes ?? [],
          claims: body.claims ?? null,
          tokenExchange: body.token_exchange ?? false,
        },
        ifMatch(request.headers),
      );
      if (created) reply.header('location', `${location(id)}/grants/${audience.id}`);
      return sendResource(reply, views.grantJson(id, audience, grant), created ? 201 : 200);
    },
  );
  api.delete(
    '/clients/:id/grants/:audience_id',
    adminRoute({
      operationId: 'deleteGrant',
      summary: 'Withdraw an audience from a client',
      tags,
      scope: 'clients:write',
      guard: grantGuard(() => []),
      params: S.GrantParams,
      ok: { 204: null },
    }),
    async (request, reply) => {
      const { id, audience_id } = request.params as Static<typeof S.GrantParams>;
      const mc = ctx.context(request);
      const audience = await audiences.getAudienceById(mc, audience_id);
      await grants.removeGrant(mc, id, audience.url, ifMatch(request.headers));
      return reply.code(204).send();
    },
  );
}
