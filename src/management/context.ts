import type { Config } from '../config/index.js';
import type { ChangeAudit, ChangeEventType, Store } from '../store/types.js';
import { ManagementError } from './errors.js';
import { etagOf, ifMatchAllows } from './etag.js';

/**
 * Whoever calls holds a set of admin scopes (an admin client's token, as its grant holds them now; an operator's
 * role), or all of them: the local CLI (a shell on the host, holding the master key: it makes the first admin)
 * and the server itself. See authority.ts: no caller gives what it does not hold.
 */
export const EVERY_SCOPE = 'every scope';
export type Holdings = ReadonlySet<string> | typeof EVERY_SCOPE;

/** What every management operation runs against. Each face makes one per call (CLI) or per request (API). */
export interface ManagementContext {
  store: Store;
  config: Config;
  /**
   * Who makes the changes, as the audit trail names them (docs/management.md): `client:<id>`, `operator:<email>`,
   * `cli:<os user>`, `tessera` (see actors in store/types.ts).
   */
  actor: string;
  /** The admin scopes the caller holds: what it may give (authority.ts). */
  holds: Holdings;
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
  target: string | null,
  details: Pick<ChangeAudit, 'clientId' | 'audience' | 'reason'> & { changes?: ChangeAudit['changes'] } = {},
): ChangeAudit {
  return {
    type,
    actor: ctx.actor,
    source: ctx.source ?? null,
    target,
    clientId: details.clientId ?? null,
    audience: details.audience ?? null,
    changes: details.changes ?? null,
    reason: details.reason ?? null,
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
    // Lists and objects (an audience's scopes) compare by value.
    const same =
      typeof from === 'object' && typeof to === 'object'
        ? JSON.stringify(from) === JSON.stringify(to)
        : from === to;
    if (!same) changes.push({ field, from, to });
  }
  return changes;
}

/** As an audit event records them: `{ field: { from, to } }`. */
export const asAuditChanges = (changes: FieldChange[]): Record<string, { from: unknown; to: unknown }> =>
  Object.fromEntries(changes.map(({ field, from, to }) => [field, { from, to }]));

/** A patch's defined fields only (undefined: left as it is). */
const definedFields = <T extends object>(patch: T): Partial<T> =>
  Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined)) as Partial<T>;

/**
 * The compare of a read-compare-write update: `current` as the patch's defined fields leave it, and the `fields` of
 * its view that this changes, as the audit event records them; undefined when it changes none, for a change that
 * changes nothing writes nothing (no event, no updated_at, no change for the caches).
 */
export function patchChanges<R extends object, P extends object>(
  current: R,
  patch: P,
  view: (record: R) => object,
  fields: readonly string[],
): { after: R & Partial<P>; changes: Record<string, { from: unknown; to: unknown }> } | undefined {
  const after = { ...current, ...definedFields(patch) };
  const changed = changedFields(fields, view(current), view(after));
  return changed.length === 0 ? undefined : { after, changes: asAuditChanges(changed) };
}

/** A change made only if the resource is still the version the caller read (the admin API's If-Match). */
export interface Precondition {
  /** An If-Match header value: `*` or entity tags; undefined: no condition. */
  ifMatch?: string | undefined;
}

/** Refuses (precondition_failed) when `view`, the resource as it is now, is not a version If-Match names. */
export function checkPrecondition(condition: Precondition, view: object, what: string): void {
  if (condition.ifMatch !== undefined && !ifMatchAllows(condition.ifMatch, etagOf(view)))
    throw new ManagementError(
      'precondition_failed',
      `${what} has changed since it was read: If-Match does not match its ETag, nothing was changed`,
    );
}
