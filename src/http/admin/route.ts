import type { FastifyContextConfig, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import { views, type ManagementContext, type Precondition } from '../../management/index.js';
import type { Static, TSchema } from 'typebox';
import { parseDuration } from '../../domain/validate.js';
import type { AdminScope } from '../../management/builtin.js';
import type { AdminRouteContext } from './route-context.js';
import { ProblemSchema, type IdParam } from './schemas.js';

const GUARDED =
  ', and every admin scope that its target holds or would hold (no caller gives what it does not hold: ' +
  '403 insufficient_scope naming the scopes missing)';

const ERROR_STATUSES = [400, 401, 403, 404, 409, 412, 413, 415, 429, 503] as const;

/**
 * The check of a change that can hand out admin power (docs/management.md, no caller gives what it does not hold),
 * made once the body is parsed and before it is validated, so that a refused change is a 403 even when its body is
 * also invalid. It calls the management layer's rule; the operation checks again in its own transaction.
 */
export type AdminGuard = (request: FastifyRequest, ctx: ManagementContext) => Promise<void>;

/**
 * An admin route's options: the scope it needs (checked before the body is read), its guard, and its schema for
 * the server and the OpenAPI document alike: its parameters, body, successful answers, and the problem+json
 * answers of every error it can give.
 */
export function adminRoute(spec: {
  operationId: string;
  summary: string;
  tags: string[];
  scope: AdminScope;
  /** For a change of a client, a grant or an operator: the rule, before the body is validated. */
  guard?: AdminGuard;
  params?: TSchema;
  querystring?: TSchema;
  body?: TSchema;
  ok: Record<number, TSchema | null>;
  errors?: readonly number[];
}): { config: FastifyContextConfig; schema: FastifySchema } {
  const response: Record<string, unknown> = {};
  for (const [status, schema] of Object.entries(spec.ok))
    response[status] = schema ?? { type: 'null', description: 'No Content' };
  for (const status of spec.errors ?? ERROR_STATUSES)
    response[String(status)] = {
      description: 'RFC 9457 problem details',
      content: { 'application/problem+json': { schema: ProblemSchema } },
    };
  const schema = {
    operationId: spec.operationId,
    summary: spec.summary,
    description:
      `Needs the scope \`${spec.scope}\`` +
      (spec.guard ? `${GUARDED}` : '') +
      (spec.scope.endsWith(':read')
        ? '.'
        : '; with a console session, also the `Origin` of the issuer and the header `X-CSRF-Token`.'),
    tags: spec.tags,
    // An access token of the admin audience (Bearer, or DPoP when it is bound to a key), or a console operator's
    // session (its role gives the scopes).
    security: [{ bearer: [spec.scope] }, { dpop: [spec.scope] }, { session: [] }],
    ...(spec.params ? { params: spec.params } : {}),
    ...(spec.querystring ? { querystring: spec.querystring } : {}),
    ...(spec.body ? { body: spec.body } : {}),
    response,
  } as FastifySchema;
  return {
    config: {
      scope: spec.scope,
      operation: operationName(spec.operationId),
      ...(spec.guard ? { guard: spec.guard } : {}),
    },
    schema,
  };
}

/**
 * The management operation of an OpenAPI operation id, as a trace names it (tessera.operation, docs/traces.md): the
 * resource, then the verb — createClient is client.create, putGrant grant.put, revokeClientTokens
 * client_tokens.revoke.
 */
function operationName(operationId: string): string {
  const [verb = operationId, ...resource] = operationId.split(/(?=[A-Z])/);
  return resource.length === 0 ? verb : `${resource.map((w) => w.toLowerCase()).join('_')}.${verb}`;
}

/** A single resource's answer: the document, with its ETag. */
export function sendResource(reply: FastifyReply, view: object, status = 200): FastifyReply {
  return reply.code(status).header('etag', views.etagOf(view)).send(view);
}

/** A duration field of a request (seconds, or `90s`, `15m`, `24h`, `7d`) in seconds; null stays null. */
export function seconds(value: number | string | null | undefined): number | null | undefined {
  if (value === undefined || value === null) return value;
  return typeof value === 'number' ? value : parseDuration(value);
}

/** The If-Match header of a request, if it has one. */
export const ifMatch = (headers: Record<string, string | string[] | undefined>): { ifMatch?: string } => {
  const value = headers['if-match'];
  return value === undefined ? {} : { ifMatch: Array.isArray(value) ? value.join(', ') : value };
};

/** The `{id}` of a request's path. */
const idOf = (request: FastifyRequest): string => (request.params as Static<typeof IdParam>).id;

type Handler = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;

/** GET …/{id}: the resource `read` finds, as its document with its ETag. */
export const readById =
  <R>(
    ctx: AdminRouteContext,
    read: (mc: ManagementContext, id: string) => Promise<R>,
    view: (resource: R) => object,
  ): Handler =>
  async (request, reply) =>
    sendResource(reply, view(await read(ctx.context(request), idOf(request))));

/** PATCH …/{id}: the change `update` makes of the body, on the request's If-Match; the document with its ETag. */
export const updateById =
  <B, R>(
    ctx: AdminRouteContext,
    update: (mc: ManagementContext, id: string, body: B, condition: Precondition) => Promise<R>,
    view: (resource: R) => object,
  ): Handler =>
  async (request, reply) => {
    const mc = ctx.context(request);
    return sendResource(
      reply,
      view(await update(mc, idOf(request), request.body as B, ifMatch(request.headers))),
    );
  };

/** DELETE …/{id}: `remove`, on the request's If-Match; 204. */
export const deleteById =
  (
    ctx: AdminRouteContext,
    remove: (mc: ManagementContext, id: string, condition: Precondition) => Promise<unknown>,
  ): Handler =>
  async (request, reply) => {
    await remove(ctx.context(request), idOf(request), ifMatch(request.headers));
    return reply.code(204).send();
  };
