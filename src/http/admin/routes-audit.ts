import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { audit, views } from '../../management/index.js';
import type { AuditEventType } from '../../store/types.js';
import { pageOfFetched } from './paging.js';
import { adminRoute } from './route.js';
import type { AdminRouteContext } from './route-context.js';
import * as S from './schemas.js';

const isAuditPosition = (v: unknown): v is { at: string; id: number } =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as { at?: unknown }).at === 'string' &&
  Number.isSafeInteger((v as { id?: unknown }).id);

/** The audit trail: GET /audit-events. */
export function auditRoutes(app: FastifyInstance, ctx: AdminRouteContext): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.get(
    '/audit-events',
    adminRoute({
      operationId: 'listAuditEvents',
      summary: 'The audit trail, newest first: token events and changes',
      tags: ['audit'],
      scope: 'audit:read',
      querystring: S.AuditQuery,
      ok: { 200: S.Page(S.AuditEvent) },
    }),
    async (request) => {
      const q = request.query as Static<typeof S.AuditQuery>;
      const limit = q.limit ?? 50;
      const after = q.after === undefined ? undefined : ctx.cursors.read('audit', q.after, isAuditPosition);
      const page: Awaited<ReturnType<typeof audit.queryAudit>> = [];
      const query = {
        clientId: q.client_id,
        audience: q.audience,
        outcome: q.outcome,
        types: q.type === undefined ? undefined : [q.type as AuditEventType],
        since: q.since,
        until: q.until,
      };
      for await (const events of audit.exportAudit(ctx.context(request), query, limit + 1, after))
        page.push(...events);
      return pageOfFetched(
        ctx.cursors,
        'audit',
        page,
        limit,
        (e) => ({ at: e.at, id: e.id }),
        views.auditEventJson,
      );
    },
  );
}
