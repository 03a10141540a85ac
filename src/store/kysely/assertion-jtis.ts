import { CompiledQuery } from 'kysely';
import type { AssertionJtiStore } from '../types.js';
import { compileOnce, type StoreBase } from './base.js';

export function assertionJtiStore(base: StoreBase): AssertionJtiStore {
  /**
   * A new id is inserted; one whose time is over is taken again; one still in use is left alone and nothing is
   * returned (a replay). Parameters: the id, its expiry, now.
   */
  const compileUse = () =>
    compileOnce(
      base.db
        .insertInto('assertion_jtis')
        .values({ id: '', expires_at: 0 })
        .onConflict((oc) =>
          oc
            .column('id')
            .doUpdateSet({ expires_at: (eb) => eb.ref('excluded.expires_at') })
            .where('assertion_jtis.expires_at', '<=', 0),
        )
        .returning('id'),
      3,
    );

  return {
    async useAssertionJti(id, expiresAt) {
      // One statement, in no transaction (never behind the change feed's lock), compiled once and prepared, as
      // findClients: it runs for every private_key_jwt token.
      const text = base.statements.get('useAssertionJti', compileUse);
      const rows = await base.runQuery<{ id: string }>('tessera_use_jti', text, [
        id,
        expiresAt,
        base.now().getTime(),
      ]);
      return rows.length === 1;
    },

    useAssertionJtis(uses) {
      const text = base.statements.get('useAssertionJti', compileUse);
      const now = base.now().getTime();
      return base.write(async (tx) => {
        const fresh: boolean[] = [];
        for (const { id, expiresAt } of uses) {
          const { rows } = await tx.executeQuery(CompiledQuery.raw(text, [id, expiresAt, now]));
          fresh.push(rows.length === 1);
        }
        return fresh;
      });
    },

    async pruneAssertionJtis(now, limit) {
      // At most `limit` rows a statement: a short hold of the write lock, however many expired meanwhile.
      const result = await base.conn
        .deleteFrom('assertion_jtis')
        .where('id', 'in', (eb) =>
          eb.selectFrom('assertion_jtis').select('id').where('expires_at', '<=', now).limit(limit),
        )
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}
