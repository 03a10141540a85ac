import type { Selectable } from 'kysely';
import type { ClientsTable } from '../schema.js';
import { StoreError, type ClientStore, type SecretChange, type SecretStore } from '../types.js';
import type { StoreBase, Tx } from './base.js';

/**
 * The client's own columns that a change of its secrets sets: a new secret is its current one (the column
 * servers before 0008 read) and the time of its last rotation.
 */
export const secretColumns = (change: SecretChange): Partial<Selectable<ClientsTable>> =>
  change.add ? { secret_digest: change.add.digest, secret_rotated_at: change.add.createdAt } : {};

/**
 * Writes the rows of a change of a client's secrets, in the transaction of a write of the client (which sets
 * secretColumns, stamps it and records its change): not_found (secret) for one to delete or expire that the
 * client does not have.
 */
export async function writeSecrets(tx: Tx, clientId: string, change: SecretChange): Promise<void> {
  const named = [...(change.delete ?? []), ...(change.expire?.ids ?? [])];
  if (named.length > 0) {
    const rows = await tx
      .selectFrom('client_secrets')
      .select('id')
      .where('client_id', '=', clientId)
      .execute();
    const has = new Set(rows.map((r) => r.id));
    const missing = named.find((id) => !has.has(id));
    if (missing !== undefined)
      throw new StoreError('not_found', `client ${clientId} has no secret ${missing}`, 'secret');
  }
  if (change.delete?.length)
    await tx
      .deleteFrom('client_secrets')
      .where('client_id', '=', clientId)
      .where('id', 'in', change.delete)
      .execute();
  if (change.expire?.ids.length)
    await tx
      .updateTable('client_secrets')
      .set({ expires_at: change.expire.at })
      .where('client_id', '=', clientId)
      .where('id', 'in', change.expire.ids)
      .execute();
  if (change.add)
    await tx
      .insertInto('client_secrets')
      .values({
        id: change.add.id,
        client_id: clientId,
        digest: change.add.digest,
        created_at: change.add.createdAt,
        expires_at: change.add.expiresAt,
        last_used_at: null,
      })
      .execute();
}

/** A change of a client's secrets is a write of the client (`clients`): its updated_at, its change record. */
export function secretStore(base: StoreBase, clients: Pick<ClientStore, 'updateClient'>): SecretStore {
  return {
    changeSecrets: (clientId, change, audit) => clients.updateClient(clientId, {}, audit, change),

    async markSecretsUsed(ids, at) {
      // A statement per thousand ids (SQLite's parameter limit), each one short: a cold cache of many clients
      // makes batches of thousands, and they must not hold the write lock against the token path's lookups.
      for (let i = 0; i < ids.length; i += 1000) {
        await base.conn
          .updateTable('client_secrets')
          .set({ last_used_at: at })
          .where('id', 'in', ids.slice(i, i + 1000))
          .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', at)]))
          .execute();
      }
    },
  };
}
