import type { Config } from '../config/index.js';
import type { ChangeAudit, ChangeEventType, Store } from '../store/types.js';

/** What every management operation runs against. Each face makes one per call (CLI) or per request (API). */
export interface ManagementContext {
  store: Store;
  config: Config;
  /** Who makes the changes, as the audit trail names them: `cli:<os user>`, an admin client's id, ... */
  actor: string;
  /** Where they come from (the admin API's caller), if known. */
  source?: string | null;
  /** The clock (tests set it). */
  now?: () => number;
}

export const nowOf = (ctx: ManagementContext): number => (ctx.now ?? Date.now)();

/** The audit event of a change this context makes. */
export function changeAudit(
  ctx: ManagementContext,
  type: ChangeEventType,
  target: string,
  details: Pick<ChangeAudit, 'clientId' | 'audience'> & { changes?: ChangeAudit['changes'] } = {},
): ChangeAudit {
  return {
    type,
    actor: ctx.actor,
    source: ctx.source ?? null,
    target,
    clientId: details.clientId ?? null,
    audience: details.audience ?? null,
    changes: details.changes ?? null,
  };
}

/** One field that differs between two versions of a record (a field missing from one is null there). */
export interface FieldChange {
  field: string;
  from: unknown;
  to: unknown;
}

/** The `fields` whose values differ between `before` and `after`, in the order of `fields`. */
export function changedFields(fields: readonly string[], before: object, after: object): FieldChange[] {
  const changes: FieldChange[] = [];
  for (const field of fields) {
    const from = (before as Record<string, unknown>)[field] ?? null;
    const to = (after as Record<string, unknown>)[field] ?? null;
    if (from !== to) changes.push({ field, from, to });
  }
  return changes;
}

/** As an audit event records them: `{ field: { from, to } }`. */
export const asAuditChanges = (changes: FieldChange[]): Record<string, { from: unknown; to: unknown }> =>
  Object.fromEntries(changes.map(({ field, from, to }) => [field, { from, to }]));

/** A patch's defined fields only (undefined: left as it is). */
export const definedFields = <T extends object>(patch: T): Partial<T> =>
  Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined)) as Partial<T>;
