import type { Client, Operator, OperatorRole } from '../store/types.js';
import { ADMIN_SCOPES, adminAudienceUrl, ROLE_SCOPES } from './builtin.js';
import { EVERY_SCOPE, type Holdings, type ManagementContext } from './context.js';
import { ManagementError } from './errors.js';

/*
 * No caller gives what it does not hold (docs/management.md): the one authorization rule of every management
 * operation that can hand out admin power. A caller holds a set of admin scopes (an admin client's token, as its
 * grant holds them now; an operator's role); the local CLI, a shell on the host with the master key, holds them
 * all — it is how the first admin is made — and so does the server itself.
 */

/**
 * The rule itself: the scopes a caller lacks to change a target that holds `current` admin scopes and would hold
 * `next` afterwards (each empty when it holds or would hold none). A caller must hold every one of both: it may
 * not hand out a scope it lacks (next), nor take over a target more powerful than itself (current: a new secret,
 * new keys or a disabled rival are as good as its scopes). Sorted, each once; empty when the change is allowed.
 */
export function missingScopes(held: Holdings, current: readonly string[], next: readonly string[]): string[] {
  if (held === EVERY_SCOPE) return [];
  const missing = new Set<string>();
  for (const scope of current) if (!held.has(scope)) missing.add(scope);
  for (const scope of next) if (!held.has(scope)) missing.add(scope);
  return [...missing].sort();
}

/** Refuses (insufficient_scope: 403 with the missing scopes) a change the rule does not allow; nothing changes. */
export function requireHeld(
  ctx: Pick<ManagementContext, 'holds'>,
  what: string,
  current: readonly string[],
  next: readonly string[],
): void {
  const missing = missingScopes(ctx.holds, current, next);
  if (missing.length > 0)
    throw new ManagementError(
      'insufficient_scope',
      `${what} needs every admin scope it holds or would hold, and this caller lacks ${missing.join(' ')}`,
      undefined,
      undefined,
      missing,
    );
}

const ADMIN_SCOPE_NAMES = new Set<string>(ADMIN_SCOPES);

/** Of some scope names, those that are admin scopes (a name the audience does not define is refused later). */
export const adminScopesIn = (names: readonly unknown[]): string[] =>
  names.filter((name): name is string => typeof name === 'string' && ADMIN_SCOPE_NAMES.has(name));

/** The admin scopes a client holds through its grant of the admin audience (none without one). */
export const adminScopesOf = (ctx: Pick<ManagementContext, 'config'>, client: Client): readonly string[] =>
  client.grants.find((g) => g.audience === adminAudienceUrl(ctx.config))?.scopes ?? [];

/** Refuses a change of `client` by a caller that lacks any admin scope the client holds. */
export const requireClientHeld = (ctx: ManagementContext, client: Client): void =>
  requireHeld(ctx, `a change of client ${client.id}`, adminScopesOf(ctx, client), adminScopesOf(ctx, client));

/** The admin scopes an operator's role stands for. */
const roleScopes = (role: OperatorRole): readonly string[] => ROLE_SCOPES[role];

/**
 * Refuses a change of an operator (`before`, undefined for a new one) to `role` (undefined: the role stays) by a
 * caller that lacks a scope of the role it has or would have.
 */
export function requireOperatorHeld(
  ctx: ManagementContext,
  before: Operator | undefined,
  role: OperatorRole | undefined,
): void {
  const current = before ? roleScopes(before.role) : [];
  const next = role !== undefined ? roleScopes(role) : current;
  requireHeld(ctx, before ? `a change of operator ${before.email}` : 'a new operator', current, next);
}
