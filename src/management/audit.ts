import type { AuditCursor, AuditEvent, AuditEventType, AuditFilter } from '../store/types.js';
import type { ManagementContext } from './context.js';
import { ManagementError, storeCall } from './errors.js';

/** Most events one answer (a table, a JSON document, a page) holds; an export streams any number. */
const MAX_DOCUMENT_EVENTS = 100_000;

/** Events per store query of an export: it pages through the store with a keyset cursor. */
const EXPORT_PAGE = 1000;

export type AuditOutcome = 'issued' | 'refused';

const OUTCOME_TYPES: Record<AuditOutcome, AuditEventType[]> = {
  issued: ['token.issued', 'token.exchanged'],
  refused: ['token.refused', 'token.throttled'],
};

export interface AuditQuery {
  clientId?: string;
  audience?: string;
  /** Any of these types. */
  types?: AuditEventType[];
  /** issued: token.issued and token.exchanged; refused: token.refused and token.throttled. With types, both must hold. */
  outcome?: AuditOutcome;
  /** ISO 8601 bounds: since inclusive, until exclusive. */
  since?: string;
  until?: string;
}

function filterOf(query: AuditQuery): Omit<AuditFilter, 'limit' | 'after'> {
  const byOutcome = query.outcome === undefined ? undefined : OUTCOME_TYPES[query.outcome];
  const types =
    query.types && byOutcome ? query.types.filter((t) => byOutcome.includes(t)) : (query.types ?? byOutcome);
  return {
    clientId: query.clientId,
    audience: query.audience,
    types,
    since: query.since,
    until: query.until,
  };
}

/** The newest `limit` matching events (at most MAX_DOCUMENT_EVENTS), newest first. */
export async function queryAudit(
  ctx: ManagementContext,
  query: AuditQuery,
  limit = 100,
): Promise<AuditEvent[]> {
  if (limit > MAX_DOCUMENT_EVENTS)
    throw new ManagementError(
      'invalid_field',
      `limit is at most ${MAX_DOCUMENT_EVENTS} in one answer; an export (tessera audit --format ndjson) streams any number`,
      'limit',
    );
  const filter = filterOf(query);
  if (filter.types?.length === 0) return [];
  return storeCall(() => ctx.store.queryAuditEvents({ ...filter, limit }));
}

/**
 * Every matching event (up to `limit`), newest first, a page at a time from the store: a day of a busy trail
 * streams in constant memory, as fast as the consumer takes the pages.
 */
export async function* exportAudit(
  ctx: ManagementContext,
  query: AuditQuery,
  limit = Infinity,
  /** Only the events after this one (newest first): where a previous page ended. */
  from?: AuditCursor,
): AsyncGenerator<AuditEvent[]> {
  const filter = filterOf(query);
  if (filter.types?.length === 0) return;
  let after: AuditCursor | undefined = from;
  let left = limit;
  while (left > 0) {
    const page = await storeCall(() =>
      ctx.store.queryAuditEvents({ ...filter, after, limit: Math.min(EXPORT_PAGE, left) }),
    );
    if (page.length === 0) return;
    yield page;
    left -= page.length;
    const last = page[page.length - 1]!;
    after = { at: last.at, id: last.id };
    if (page.length < EXPORT_PAGE) return;
  }
}
