import { validateAudienceUrl } from '../domain/validate.js';
import type { ManagementContext } from './context.js';
import { field, storeCall } from './errors.js';

/** The audience of a grant, checked by its rule (field `audience`). */
export const checkGrantAudience = (audience: string): string =>
  field('audience', () => validateAudienceUrl(audience));

/** Allows a client an audience. False if it already had it. */
export function addGrant(ctx: ManagementContext, clientId: string, audience: string): Promise<boolean> {
  const url = checkGrantAudience(audience);
  return storeCall(() => ctx.store.addGrant(clientId, url));
}

/** Withdraws an audience from a client. */
export function removeGrant(ctx: ManagementContext, clientId: string, audience: string): Promise<void> {
  return storeCall(() => ctx.store.removeGrant(clientId, audience));
}
