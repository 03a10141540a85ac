import { validateAudienceUrl } from '../domain/validate.js';
import { changeAudit, type ManagementContext } from './context.js';
import { field, storeCall } from './errors.js';

/** The audience of a grant, checked by its rule (field `audience`). */
export const checkGrantAudience = (audience: string): string =>
  field('audience', () => validateAudienceUrl(audience));

/** Allows a client an audience. False if it already had it. */
export function addGrant(ctx: ManagementContext, clientId: string, audience: string): Promise<boolean> {
  const url = checkGrantAudience(audience);
  const audit = changeAudit(ctx, 'grant.created', clientId, { clientId, audience: url });
  return storeCall(() => ctx.store.addGrant(clientId, url, audit));
}

/** Withdraws an audience from a client. */
export function removeGrant(ctx: ManagementContext, clientId: string, audience: string): Promise<void> {
  const audit = changeAudit(ctx, 'grant.deleted', clientId, { clientId, audience });
  return storeCall(() => ctx.store.removeGrant(clientId, audience, audit));
}
