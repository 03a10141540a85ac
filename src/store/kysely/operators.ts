import type { Kysely, Selectable } from 'kysely';
import type { Database, OperatorsTable } from '../schema.js';
import type { Operator, OperatorStore } from '../types.js';
import { mustTouch, notFound, type StoreBase } from './base.js';
import { columnsOf, toOperator } from './rows.js';

/** The operator with this id (which must exist). */
async function readOperator(db: Kysely<Database>, id: string): Promise<Operator> {
  return toOperator(
    await db.selectFrom('operators').selectAll().where('id', '=', id).executeTakeFirstOrThrow(),
  );
}

/** The console's operators. Their changes write an audit event but no change: no server caches them. */
export function operatorStore(base: StoreBase): OperatorStore {
  const findBy = async (column: 'email' | 'enroll_digest', value: string) =>
    base.conn.selectFrom('operators').selectAll().where(column, '=', value).executeTakeFirst();

  return {
    addOperator: (operator, audit) =>
      base.create(
        'operator',
        `operator ${operator.email} already exists`,
        (tx) =>
          tx.selectFrom('operators').select('id').where('email', '=', operator.email).executeTakeFirst(),
        async (tx) => {
          const at = base.stamp();
          const row = {
            id: operator.id,
            email: operator.email,
            role: operator.role,
            enabled: 1,
            password_hash: null,
            enroll_digest: operator.enrollDigest,
            enroll_expires_at: operator.enrollExpiresAt,
            last_login_at: null,
            created_at: at,
            updated_at: at,
          };
          await tx.insertInto('operators').values(row).execute();
          if (audit) await base.writeChangeAudit(tx, audit);
          return toOperator(row);
        },
      ),

    async findOperator(idOrEmail) {
      const row = await base.conn
        .selectFrom('operators')
        .selectAll()
        .where((eb) => eb.or([eb('id', '=', idOrEmail), eb('email', '=', idOrEmail)]))
        .executeTakeFirst();
      return row && toOperator(row);
    },

    async findOperatorCredentials(email) {
      const row = await findBy('email', email);
      return row && { operator: toOperator(row), passwordHash: row.password_hash };
    },

    async findOperatorByEnrollment(digest) {
      const row = await findBy('enroll_digest', digest);
      return row && toOperator(row);
    },

    async listOperators() {
      const rows = await base.conn.selectFrom('operators').selectAll().orderBy('email').execute();
      return rows.map(toOperator);
    },

    updateOperator: (id, patch, audit) =>
      base.write(async (tx) => {
        const values = columnsOf<typeof patch, Selectable<OperatorsTable>>(patch, {
          role: (role) => ({ role }),
          enabled: (enabled) => ({ enabled: enabled ? 1 : 0 }),
          enrollment: ({ digest, expiresAt }) => ({
            password_hash: null,
            enroll_digest: digest,
            enroll_expires_at: expiresAt,
          }),
        });
        const result = await tx
          .updateTable('operators')
          .set({ ...values, updated_at: base.stamp() })
          .where('id', '=', id)
          .executeTakeFirst();
        mustTouch(result, 'operator', notFound.operator(id));
        if (audit) await base.writeChangeAudit(tx, audit);
        return readOperator(tx, id);
      }),

    async removeOperator(id, audit) {
      await base.write(async (tx) => {
        // Sessions go explicitly rather than by cascade alone, as grants do with their audience.
        await tx.deleteFrom('operator_sessions').where('operator_id', '=', id).execute();
        mustTouch(
          await tx.deleteFrom('operators').where('id', '=', id).executeTakeFirst(),
          'operator',
          notFound.operator(id),
        );
        if (audit) await base.writeChangeAudit(tx, audit);
      });
    },

    enrollOperator: (digest, passwordHash, now, audit) =>
      base.write(async (tx) => {
        const found = await tx
          .selectFrom('operators')
          .select('id')
          .where('enroll_digest', '=', digest)
          .executeTakeFirst();
        if (!found) return undefined;
        // The digest in the WHERE makes the link work once: of two requests presenting it at once, the second
        // updates nothing (PostgreSQL re-reads the row once the first commits; SQLite runs one writer at a time).
        const result = await tx
          .updateTable('operators')
          .set({ password_hash: passwordHash, enroll_digest: null, enroll_expires_at: null, updated_at: now })
          .where('id', '=', found.id)
          .where('enroll_digest', '=', digest)
          .where('enroll_expires_at', '>', now)
          .where('enabled', '=', 1)
          .executeTakeFirst();
        if (Number(result.numUpdatedRows) === 0) return undefined;
        const operator = await readOperator(tx, found.id);
        await base.writeChangeAudit(tx, audit(operator));
        return operator;
      }),
  };
}
