import type { FastifyContextConfig, FastifyReply, FastifySchema } from 'fastify';
import type { TSchema } from 'typebox';
import { parseDuration } from '../../domain/validate.js';
import type { AdminScope } from '../../management/builtin.js';
import { etagOf } from '../../management/views.js';
import { ProblemSchema } from './schemas.js';

const ERROR_STATUSES = [400, 401, 403, 404, 409, 412, 413, 415, 429, 503] as const;

/**
 * An admin route's options: the scope it needs (checked before the body is read), and its schema for the
 * server and the OpenAPI document alike: its parameters, body, successful answers, and the problem+json
 * answers of every error it can give.
 */
export function adminRoute(spec: {
  operationId: string;
  summary: string;
  tags: string[];
  scope: AdminScope;
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
      (spec.scope.endsWith(':read')
        ? '.'
        : '; with a console session, also the `Origin` of the issuer and the header `X-CSRF-Token`.'),
    tags: spec.tags,
    // An access token of the admin audience, or a console operator's session (its role gives the scopes).
    security: [{ bearer: [spec.scope] }, { session: [] }],
    ...(spec.params ? { params: spec.params } : {}),
    ...(spec.querystring ? { querystring: spec.querystring } : {}),
    ...(spec.body ? { body: spec.body } : {}),
    response,
  } as FastifySchema;
  return { config: { scope: spec.scope }, schema };
}

/** A single resource's answer: the document, with its ETag. */
export function sendResource(reply: FastifyReply, view: object, status = 200): FastifyReply {
  return reply.code(status).header('etag', etagOf(view)).send(view);
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
