/**
 * The bootstrap admin (MANAGEMENT.md, "Bootstrap without a shell"; docs/production.md): the admin client named by
 * TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID, made at start with every admin scope and the secret of a mounted file, or
 * brought back to that when it exists — through the management operations, audited as their actor (the server's).
 */
import { usesSecrets } from '../domain/client-auth/index.js';
import type { Client } from '../store/types.js';
import { ADMIN_SCOPES, adminAudienceUrl, ensureAdminAudience } from './builtin.js';
import { createClient, holdsSecret, rotateSecret } from './clients.js';
import { nowOf, type ManagementContext } from './context.js';
import { ManagementError, storeCall } from './errors.js';
import { putGrant } from './grants.js';

/** What bootstrapping changed: made the client, or gave it back its scopes or the file's secret. */
export interface Bootstrapped {
  client: Client;
  created: boolean;
  /** `scopes`, `secret`: what an existing client was given again. */
  changed: ('scopes' | 'secret')[];
}

const sameScopes = (scopes: readonly string[]): boolean =>
  scopes.length === ADMIN_SCOPES.length && ADMIN_SCOPES.every((s) => scopes.includes(s));

/**
 * Makes the admin client `id` with every admin scope and `secret` (at least 32 characters), or, when it exists,
 * grants it every admin scope again and makes `secret` its only secret if it is not one of its secrets already. A
 * client of that id that authenticates without a secret is refused (client_uses_keys): the id names someone else.
 * A disabled one stays disabled: an operator's decision stands. Two instances starting at once both get there.
 */
export async function bootstrapAdminClient(
  ctx: ManagementContext,
  id: string,
  secret: string,
): Promise<Bootstrapped> {
  try {
    return await bootstrap(ctx, id, secret);
  } catch (error) {
    // Another instance made it between our read and our write: bring the one it made up to date.
    if (error instanceof ManagementError && error.code === 'client_exists') return bootstrap(ctx, id, secret);
    throw error;
  }
}

async function bootstrap(ctx: ManagementContext, id: string, secret: string): Promise<Bootstrapped> {
  const audience = await ensureAdminAudience(ctx);
  const found = await storeCall(() => ctx.store.findClient(id));
  if (!found) {
    const { client } = await createClient(ctx, {
      id,
      name: 'Bootstrap admin',
      description: 'made at start from TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID',
      adminScopes: ADMIN_SCOPES,
      secret,
    });
    return { client, created: true, changed: [] };
  }
  if (found.federatedCredentials.length > 0 || !usesSecrets(found.authMethod))
    throw new ManagementError(
      'client_uses_keys',
      `TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID names client ${id}, which authenticates with ${found.authMethod}: the bootstrap admin authenticates with its secret`,
    );
  const changed: Bootstrapped['changed'] = [];
  let client = found;
  const grant = found.grants.find((g) => g.audience === adminAudienceUrl(ctx.config));
  if (grant === undefined || !sameScopes(grant.scopes)) {
    await putGrant(ctx, id, audience, { scopes: [...ADMIN_SCOPES] });
    changed.push('scopes');
  }
  if (!holdsSecret(found, secret, nowOf(ctx))) {
    client = (await rotateSecret(ctx, id, { graceSeconds: 0, secret })).client;
    changed.push('secret');
  }
  if (changed.includes('scopes') && !changed.includes('secret'))
    client = (await storeCall(() => ctx.store.findClient(id))) ?? client;
  return { client, created: false, changed };
}
