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

/** `{ field: { from, to } }` for every field whose value differs. */
export function diff(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
): Record<string, { from: unknown; to: unknown }> {
  const changed: Record<string, { from: unknown; to: unknown }> = {};
  for (const [key, to] of Object.entries(after)) {
    if (before[key] !== to) changed[key] = { from: before[key] ?? null, to };
  }
  return changed;
}
