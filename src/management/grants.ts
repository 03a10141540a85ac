import { validateAudienceUrl } from '../domain/validate.js';
import type { ManagementContext } from './context.js';
import { field, storeCall } from './errors.js';

/** Allows a client an audience. False if it already had it. */
export function addGrant(ctx: ManagementContext, clientId: string, audience: string): Promise<boolean> {
  const url = field('audience', () => validateAudienceUrl(audience));
  return storeCall(() => ctx.store.addGrant(clientId, url));
}

/** Withdraws an audience from a client. */
export function removeGrant(ctx: ManagementContext, clientId: string, audience: string): Promise<void> {
  return storeCall(() => ctx.store.removeGrant(clientId, audience));
}
