import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import type { SigningAlg } from '../../domain/algorithms.js';
import { audit, keys, views } from '../../management/index.js';
import type { AuditEventType } from '../../store/types.js';
import type { AdminRouteContext } from './index.js';
import { pageOf } from './paging.js';
import { adminRoute } from './route.js';
import * as S from './schemas.js';

const isAuditPosition = (v: unknown): v is { at: string; id: number } =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as { at?: unknown }).at === 'string' &&
  Number.isSafeInteger((v as { id?: unknown }).id);

/** Keys: GET /keys · POST /keys/rotate · POST /keys/{kid}/retire; the audit trail: GET /audit-events. */
export function keyAndAuditRoutes(app: FastifyInstance, ctx: AdminRouteContext): void {
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
    async (request) => {
      const { limit = 50, after } = request.query as Static<typeof S.ListQuery>;
      const from =
        after === undefined
          ? undefined
          : ctx.cursors.read('keys', after, (v): v is string => typeof v === 'string');
      const all = (await keys.listKeys(ctx.context(request))).map(views.keyJson);
      const keyOf = (k: ReturnType<typeof views.keyJson>) => `${k.created_at} ${k.kid}`;
      const page = pageOf(
        all.sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1)),
        keyOf,
        from,
        limit,
      );
      return {
        items: page.items,
        next: page.last === undefined ? null : ctx.cursors.issue('keys', page.last),
      };
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
      return {
        items: results.map((r) => ({
          alg: r.alg,
          kid: r.kid,
          activates_at: r.activatesAt,
          already_scheduled: r.alreadyScheduled,
          retiring: r.retiring,
        })),
      };
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
      const result = await keys.retireKey(ctx.context(request), kid, { warn });
      return { retired: result.retired.kid, signing: result.signing, keys: result.keys.map(views.keyJson) };
    },
  );

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
      const items = page.slice(0, limit);
      const last = items[items.length - 1];
      return {
        items: items.map(views.auditEventJson),
        next: page.length > limit && last ? ctx.cursors.issue('audit', { at: last.at, id: last.id }) : null,
      };
    },
  );
}
