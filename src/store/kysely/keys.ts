import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';
import type { KeyChange, KeyStore, SigningKey } from '../types.js';
import { mustTouch, type StoreBase } from './base.js';
import { signingKeyRow, toSigningKey } from './rows.js';

/** Every key, oldest first (then by kid). */
async function readKeys(db: Kysely<Database>): Promise<SigningKey[]> {
  const rows = await db.selectFrom('signing_keys').selectAll().orderBy('created_at').orderBy('kid').execute();
  return rows.map(toSigningKey);
}

export function keyStore(base: StoreBase): KeyStore {
  return {
    listSigningKeys: () => readKeys(base.conn),

    async changeSigningKeys(plan, audit) {
      const nothing = Symbol('nothing to write');
      try {
        return await base.write(async (tx): Promise<KeyChange | undefined> => {
          // Write first: on SQLite that takes the write lock before reading, on PostgreSQL the change-feed
          // lock; either way no other writer reads the keys between our read and our write.
          await base.record(tx, 'key', '*');
          const change = plan(await readKeys(tx));
          if (!change || (!change.insert && !change.update?.length)) {
            // Rolling back would undo the caller's whole transaction: within one, the change record stays.
            if (base.tx) return undefined;
            throw nothing;
          }
          if (change.insert)
            await tx.insertInto('signing_keys').values(signingKeyRow(change.insert)).execute();
          for (const { kid, activatesAt, retiredAt } of change.update ?? []) {
            const result = await tx
              .updateTable('signing_keys')
              .set({
                ...(activatesAt === undefined ? {} : { activates_at: activatesAt }),
                ...(retiredAt === undefined ? {} : { retired_at: retiredAt }),
              })
              .where('kid', '=', kid)
              .executeTakeFirst();
            mustTouch(result, 'signing_key', `signing key ${kid} does not exist`);
          }
          if (audit) await base.writeChangeAudit(tx, audit(change));
          return change;
        });
      } catch (error) {
        if (error === nothing) return undefined;
        throw error;
      }
    },
  };
}
