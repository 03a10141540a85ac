import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Selectable } from 'kysely';
import type { ClientsTable } from '../schema.js';
import { StoreError, type ClientStore, type SecretChange, type SecretStore } from '../types.js';
import type { StoreBase, Tx } from './base.js';

/** Secrets marked used by one statement (see markSecretsUsed). */
const SECRETS_PER_STATEMENT = 100;

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

/** Ids sorted at once at most, between two turns of the event loop (~1 ms): see inOrder. */
const SORT_RUN = 2000;

/**
 * `ids` in order, `size` at a time, with a turn of the event loop before each chunk after the first: sorted a
 * run of SORT_RUN at a time, the runs merged as the chunks are taken (a scan of the runs' heads for each id: a
 * hundred thousand ids are 50 runs).
 */
export async function* inOrder(ids: readonly string[], size: number): AsyncGenerator<string[]> {
  const runs: string[][] = [];
  for (let i = 0; i < ids.length; i += SORT_RUN) {
    if (i > 0) await nextTurn();
    runs.push(ids.slice(i, i + SORT_RUN).sort());
  }
  const heads = runs.map(() => 0);
  let chunk: string[] = [];
  let first = true;
  for (;;) {
    let best = -1;
    for (let r = 0; r < runs.length; r++)
      if (heads[r]! < runs[r]!.length && (best < 0 || runs[r]![heads[r]!]! < runs[best]![heads[best]!]!))
        best = r;
    if (best >= 0) chunk.push(runs[best]![heads[best]!++]!);
    if (chunk.length === size || (best < 0 && chunk.length > 0)) {
      if (!first) await nextTurn();
      first = false;
      yield chunk;
      chunk = [];
    }
    if (best < 0) return;
  }
}

/** A change of a client's secrets is a write of the client (`clients`): its updated_at, its change record. */
export function secretStore(base: StoreBase, clients: Pick<ClientStore, 'updateClient'>): SecretStore {
  return {
    changeSecrets: (clientId, change, audit) => clients.updateClient(clientId, {}, audit, change),

    async markSecretsUsed(ids, at) {
      // Short statements, in id order (the primary key's: neighbouring rows share pages), with the event loop
      // let in between. A cold cache of many clients notes tens of thousands of secrets between two writes:
      // a thousand ids a statement took 25–50 ms of SQLite each, run back to back on the thread that answers
      // requests (an awaited statement of node:sqlite has already run when it resolves), and stalled it for
      // a quarter of a second; a hundred take under a millisecond. Sorting 50,000 ids at once took 25 ms: they
      // are sorted a run at a time and merged as the statements go (inOrder).
      for await (const chunk of inOrder(ids, SECRETS_PER_STATEMENT)) {
        await base.conn
          .updateTable('client_secrets')
          .set({ last_used_at: at })
          .where('id', 'in', chunk)
          .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', at)]))
          .execute();
      }
    },
  };
}
