import type { Audience, Grant } from '../store/types.js';
import { getAudience, getAudienceById, listAudiences } from './audiences.js';
import { getClient } from './client-access.js';
import type { ManagementContext } from './context.js';
import { ManagementError, storeCall } from './errors.js';
import { grantOf } from './grants.js';

/*
 * A client's grants as the faces read them, each with the audience it grants: a client records its grants by
 * audience URL, and a grant's document (views.grantJson) names the audience by its id as well.
 */

/** A grant with its client and its audience: what views.grantJson shows. */
export interface ClientGrant {
  clientId: string;
  audience: Audience;
  grant: Grant;
}

/** A client's grants, by audience id (the admin API's list order); client_not_found if there is no client. */
export async function listGrants(ctx: ManagementContext, clientId: string): Promise<ClientGrant[]> {
  const client = await getClient(ctx, clientId);
  const byUrl = new Map((await listAudiences(ctx)).map((a) => [a.url, a]));
  return client.grants
    .flatMap((grant) => {
      const audience = byUrl.get(grant.audience);
      return audience ? [{ clientId, audience, grant }] : [];
    })
    .sort((a, b) => (a.audience.id < b.audience.id ? -1 : a.audience.id > b.audience.id ? 1 : 0));
}

/**
 * Every grant of an audience (by its server-made id), by client id: which clients may get its tokens, and which may
 * exchange into it (token_exchange); audience_not_found if there is no such audience.
 */
export async function listGrantsOfAudience(
  ctx: ManagementContext,
  audienceId: string,
): Promise<ClientGrant[]> {
  const audience = await getAudienceById(ctx, audienceId);
  const grants = await storeCall(() => ctx.store.listGrantsOf(audience.url));
  return grants.map(({ clientId, ...grant }) => ({ clientId, audience, grant }));
}

/** A client's grant of an audience (by its URL); not_found for the client, the audience or the grant. */
export async function getGrant(ctx: ManagementContext, clientId: string, url: string): Promise<ClientGrant> {
  const client = await getClient(ctx, clientId);
  const audience = await getAudience(ctx, url);
  const grant = grantOf(client, audience.url);
  if (!grant) throw new ManagementError('grant_not_found', `client ${clientId} has no grant for ${url}`);
  return { clientId, audience, grant };
}
