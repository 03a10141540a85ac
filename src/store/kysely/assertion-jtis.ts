import { perTurn } from '../../per-turn.js';
import type { AssertionJtiStore } from '../types.js';
import type { StoreBase } from './base.js';

/** useAssertionJti's statement for many ids at once, on PostgreSQL: the ids and their expiries as two arrays. */
const USE_MANY_POSTGRES = `insert into assertion_jtis (id, expires_at)
select id, expires_at from unnest($1::text[], $2::bigint[]) as uses(id, expires_at)
on conflict (id) do update set expires_at = excluded.expires_at where assertion_jtis.expires_at <= $3
returning id`;
/**
 * The same on SQLite: the ids and their expiries as one JSON array of pairs (`where true` parts the SELECT from
 * the upsert clause, as SQLite requires). One statement is one commit without a transaction around it.
 */
const USE_MANY_SQLITE = `insert into assertion_jtis (id, expires_at)
select value ->> 0, value ->> 1 from json_each(?) where true
on conflict (id) do update set expires_at = excluded.expires_at where assertion_jtis.expires_at <= ?
returning id`;

export function assertionJtiStore(base: StoreBase): AssertionJtiStore {
  /**
   * A new id is inserted; one whose time is over is taken again; one still in use is left alone and nothing is
   * returned (a replay), in one statement for all of them (one round trip and one commit; on SQLite one
   * statement, not one an id through the query builder, each awaited). Each id once: PostgreSQL refuses to update
   * a row twice in one statement, and an id's second use in the same call is a replay whatever the first found.
   * In the order of the ids, so that two instances taking some of the same ids at once lock their rows in the
   * same order (in the order the ids came, each could wait for a row the other took: a deadlock).
   */
  const useMany: AssertionJtiStore['useAssertionJtis'] = async (uses) => {
    if (uses.length === 0) return [];
    const now = base.now().getTime();
    const first = new Map<string, number>();
    uses.forEach(({ id }, i) => first.has(id) || first.set(id, i));
    const once = [...first.values()].map((i) => uses[i]!).sort((a, b) => (a.id < b.id ? -1 : 1));
    const rows =
      base.engine === 'postgres'
        ? await base.runQuery<{ id: string }>('tessera_use_jtis', USE_MANY_POSTGRES, [
            once.map((use) => use.id),
            once.map((use) => use.expiresAt),
            now,
          ])
        : await base.runQuery<{ id: string }>('tessera_use_jtis', USE_MANY_SQLITE, [
            JSON.stringify(once.map((use) => [use.id, use.expiresAt])),
            now,
          ]);
    const taken = new Set(rows.map((row) => row.id));
    return uses.map(({ id }, i) => first.get(id) === i && taken.has(id));
  };

  // The store's own (not one bound to a transaction) records the ids of one turn of the event loop together: the
  // private_key_jwt and DPoP requests answered together, in one transaction (SQLite: one commit and one wait
  // for the write lock) or one statement (PostgreSQL: one round trip and one commit, up to four at once on the
  // pool, so that one slow statement does not hold the next turns back) instead of one of each per request.
  const inTurn = base.tx ? undefined : perTurn(useMany, { parallel: base.engine === 'postgres' ? 4 : 1 });
  return {
    async useAssertionJti(id, expiresAt) {
      return inTurn ? inTurn({ id, expiresAt }) : (await useMany([{ id, expiresAt }]))[0]!;
    },

    useAssertionJtis: useMany,

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
