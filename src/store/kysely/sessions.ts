import type { SessionStore } from '../types.js';
import type { StoreBase } from './base.js';
import { toOperator } from './rows.js';

/**
 * The console's sessions (read on every console request; the store does not judge their times, the caller
 * does), and the events of logins, failed ones included.
 */
export function sessionStore(base: StoreBase): SessionStore {
  return {
    async createOperatorSession(session, audit) {
      await base.write(async (tx) => {
        await tx
          .insertInto('operator_sessions')
          .values({
            id: session.id,
            operator_id: session.operatorId,
            created_at: session.createdAt,
            last_seen_at: session.lastSeenAt,
            expires_at: session.expiresAt,
            source: session.source,
          })
          .execute();
        await tx
          .updateTable('operators')
          .set({ last_login_at: new Date(session.createdAt).toISOString() })
          .where('id', '=', session.operatorId)
          .execute();
        if (audit) await base.writeChangeAudit(tx, audit);
      });
    },

    async findOperatorSession(id) {
      const row = await base.conn
        .selectFrom('operator_sessions')
        .innerJoin('operators', 'operators.id', 'operator_sessions.operator_id')
        .selectAll('operators')
        .select([
          'operator_sessions.id as session_id',
          'operator_sessions.created_at as session_created_at',
          'operator_sessions.last_seen_at',
          'operator_sessions.expires_at',
          'operator_sessions.source',
        ])
        .where('operator_sessions.id', '=', id)
        .executeTakeFirst();
      if (!row) return undefined;
      const { session_id, session_created_at, last_seen_at, expires_at, source, ...operator } = row;
      return {
        session: {
          id: session_id,
          operatorId: operator.id,
          createdAt: Number(session_created_at),
          lastSeenAt: Number(last_seen_at),
          expiresAt: Number(expires_at),
          source,
        },
        operator: toOperator(operator),
      };
    },

    async touchOperatorSession(id, at) {
      // One statement outside the change feed's lock: a console request never queues behind a writer for it.
      await base.conn
        .updateTable('operator_sessions')
        .set({ last_seen_at: at })
        .where('id', '=', id)
        .where('last_seen_at', '<', at)
        .execute();
    },

    async deleteOperatorSession(id, audit) {
      await base.write(async (tx) => {
        await tx.deleteFrom('operator_sessions').where('id', '=', id).execute();
        if (audit) await base.writeChangeAudit(tx, audit);
      });
    },

    async endOperatorSessions(operatorId) {
      await base.write((tx) =>
        tx.deleteFrom('operator_sessions').where('operator_id', '=', operatorId).execute(),
      );
    },

    async pruneOperatorSessions(now, idleBefore) {
      const result = await base.conn
        .deleteFrom('operator_sessions')
        .where((eb) => eb.or([eb('expires_at', '<=', now), eb('last_seen_at', '<', idleBefore)]))
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },

    async recordEvent(audit) {
      await base.write((tx) => base.writeChangeAudit(tx, audit));
    },
  };
}
