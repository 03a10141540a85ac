import type { Selectable } from 'kysely';
import type { ClientsTable } from '../schema.js';
import { tokenChangeKey, type ClientStanding, type RevocationStore } from '../types.js';
import type { StoreBase } from './base.js';

const STANDING = ['id', 'enabled', 'revoked_before', 'created_at'] as const;

const toStanding = (row: Pick<Selectable<ClientsTable>, (typeof STANDING)[number]>): ClientStanding => ({
  id: row.id,
  enabled: Number(row.enabled) === 1,
  revokedBefore: row.revoked_before,
  createdAt: row.created_at,
});

export function revocationStore(base: StoreBase): RevocationStore {
  return {
    revokeToken: (token, audit) =>
      base.write(async (tx) => {
        // Already listed (revoked twice, or by two instances at once): nothing more to write or to tell.
        const inserted = await tx
          .insertInto('revoked_tokens')
          .values({ jti: token.jti, client_id: token.clientId, exp: token.exp })
          .onConflict((oc) => oc.column('jti').doNothing())
          .returning('jti')
          .executeTakeFirst();
        if (inserted === undefined) return false;
        await base.record(tx, 'token', tokenChangeKey(token), audit);
        return true;
      }),

    async listRevokedTokens(now, page) {
      let query = base.conn.selectFrom('revoked_tokens').select(['jti', 'exp']).where('exp', '>', now);
      if (page !== undefined) {
        query = query.orderBy('jti').limit(page.limit);
        if (page.after !== null) query = query.where('jti', '>', page.after);
      }
      const rows = await query.execute();
      return rows.map((row) => ({ jti: row.jti, exp: Number(row.exp) }));
    },

    async pruneRevokedTokens(now, limit) {
      // At most `limit` rows a statement: a short hold of the write lock, however many expired meanwhile.
      const result = await base.conn
        .deleteFrom('revoked_tokens')
        .where('jti', 'in', (eb) =>
          eb.selectFrom('revoked_tokens').select('jti').where('exp', '<=', now).limit(limit),
        )
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },

    async pruneClientDeletions(before, limit) {
      const result = await base.conn
        .deleteFrom('client_deletions')
        .where('id', 'in', (eb) =>
          eb
            .selectFrom('client_deletions')
            .select('id')
            .where('deleted_at', '<', before)
            .orderBy('deleted_at')
            .limit(limit),
        )
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },

    async listClientStandings(since, page) {
      let query = base.conn
        .selectFrom('clients')
        .select(STANDING)
        .where((eb) =>
          eb.or([
            eb('enabled', '=', 0),
            // Text compares by code point on both engines: RFC 3339 times in UTC sort as times.
            eb('revoked_before', '>=', since),
            eb('created_at', '>=', since),
          ]),
        );
      if (page !== undefined) {
        // In the primary key's order (PostgreSQL's ids are collated "C"): each page goes on where the last ended.
        query = query.orderBy('id').limit(page.limit);
        if (page.after !== null) query = query.where('id', '>', page.after);
      }
      const rows = await query.execute();
      return rows.map(toStanding);
    },

    async findClientStandings(ids) {
      if (ids.length === 0) return [];
      const rows = await base.conn.selectFrom('clients').select(STANDING).where('id', 'in', ids).execute();
      return rows.map(toStanding);
    },
  };
}
