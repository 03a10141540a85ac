import type { ChangeEntity, ChangeFeed } from '../types.js';
import type { StoreBase } from './base.js';

/** The change feed as every engine reads it (base.record writes it); PostgreSQL adds subscribe (postgres.ts). */
export function changeFeed(base: StoreBase): Omit<ChangeFeed, 'subscribe'> {
  return {
    async changesSince(seq, limit) {
      const rows = await base.conn
        .selectFrom('changes')
        .select(['seq', 'entity', 'key'])
        .where('seq', '>', seq)
        .orderBy('seq')
        .limit(limit)
        .execute();
      return rows.map((r) => ({ seq: Number(r.seq), entity: r.entity as ChangeEntity, key: r.key }));
    },

    async latestChange() {
      const row = await base.conn
        .selectFrom('changes')
        .select((eb) => eb.fn.max('seq').as('seq'))
        .executeTakeFirst();
      return row?.seq == null ? 0 : Number(row.seq);
    },

    async pruneChanges(olderThan) {
      const result = await base.conn
        .deleteFrom('changes')
        .where('created_at', '<', olderThan.toISOString())
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}
