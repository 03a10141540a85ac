import { usesSecrets } from '../domain/client-auth/index.js';
import type { Client, Store } from '../store/types.js';
import { requireClientHeld } from './authority.js';
import type { ManagementContext } from './context.js';
import { ManagementError, storeCall } from './errors.js';

/*
 * Reading one client and changing it under the authorization rule: what every operation on a client's parts
 * (its fields, secrets, grants, federated credentials) starts with.
 */

export async function getClient(ctx: ManagementContext, id: string): Promise<Client> {
  const found = await storeCall(() => ctx.store.findClient(id));
  if (!found) throw new ManagementError('client_not_found', `client ${id} does not exist`);
  return found;
}

/**
 * Runs a change of an existing client in one transaction: the client is read, the caller must hold every admin
 * scope it holds (authority.ts), then `change` writes. On PostgreSQL every writing transaction takes the change
 * feed's lock first, so no grant can come in between the check and the write.
 */
export function changeClient<T>(
  ctx: ManagementContext,
  id: string,
  change: (store: Store, client: Client) => Promise<T>,
): Promise<T> {
  return storeCall(() =>
    ctx.store.transaction(async (store) => {
      const client = await getClient({ ...ctx, store }, id);
      requireClientHeld(ctx, client);
      return change(store, client);
    }),
  );
}

/**
 * Refuses a secret for a client that does not authenticate with one: client_uses_federation for a client with
 * federated credentials, client_uses_keys for one with its own keys or certificate (private_key_jwt, RFC 8705's
 * methods).
 */
export function requireSecretClient(client: Client): void {
  if (client.federatedCredentials.length > 0)
    throw new ManagementError(
      'client_uses_federation',
      `client ${client.id} authenticates with federated credentials: it has no secrets (remove its federated credentials first)`,
    );
  if (!usesSecrets(client.authMethod))
    throw new ManagementError(
      'client_uses_keys',
      `client ${client.id} authenticates with ${client.authMethod}: it has no secrets (change token_endpoint_auth_method first)`,
    );
}
