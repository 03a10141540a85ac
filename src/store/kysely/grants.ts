import type { GrantStore } from '../types.js';
import { requireAudiences } from './audiences.js';
import { mustTouch, notFound, type StoreBase, type Tx } from './base.js';
import { requireClient } from './clients.js';
import { claimsText, scopeText, toGrant } from './rows.js';

/** The key of a grant in the change feed. */
const grantKey = (clientId: string, audienceUrl: string): string => `${clientId} ${audienceUrl}`;

export function grantStore(base: StoreBase): GrantStore {
  /** A new grant's row, made now. */
  const insertGrant = async (
    tx: Tx,
    clientId: string,
    audienceUrl: string,
    scopes: string,
    claims: string | null,
    tokenExchange: number,
  ) =>
    tx
      .insertInto('grants')
      .values({
        client_id: clientId,
        audience_url: audienceUrl,
        scopes,
        claims,
        token_exchange: tokenExchange,
        created_at: base.stamp(),
      })
      .execute();

  return {
    addGrant: (clientId, audienceUrl, audit) =>
      base.write(async (tx) => {
        await requireClient(tx, clientId);
        await requireAudiences(tx, [audienceUrl]);
        const existing = await tx
          .selectFrom('grants')
          .select('client_id')
          .where('client_id', '=', clientId)
          .where('audience_url', '=', audienceUrl)
          .executeTakeFirst();
        if (existing) return false;
        await insertGrant(tx, clientId, audienceUrl, '', null, 0);
        await base.record(tx, 'grant', grantKey(clientId, audienceUrl), audit);
        return true;
      }),

    putGrant: (clientId, audienceUrl, scopes, audit, claims = null, tokenExchange = false) =>
      base.write(async (tx) => {
        await requireClient(tx, clientId);
        await requireAudiences(tx, [audienceUrl]);
        const values = {
          scopes: scopeText(scopes),
          claims: claimsText(claims),
          token_exchange: tokenExchange ? 1 : 0,
        };
        const updated = await tx
          .updateTable('grants')
          .set(values)
          .where('client_id', '=', clientId)
          .where('audience_url', '=', audienceUrl)
          .executeTakeFirst();
        const created = Number(updated.numUpdatedRows) === 0;
        if (created)
          await insertGrant(tx, clientId, audienceUrl, values.scopes, values.claims, values.token_exchange);
        await base.record(tx, 'grant', grantKey(clientId, audienceUrl), audit);
        return created;
      }),

    async removeGrant(clientId, audienceUrl, audit) {
      await base.write(async (tx) => {
        const result = await tx
          .deleteFrom('grants')
          .where('client_id', '=', clientId)
          .where('audience_url', '=', audienceUrl)
          .executeTakeFirst();
        mustTouch(result, 'grant', notFound.grant(clientId, audienceUrl));
        await base.record(tx, 'grant', grantKey(clientId, audienceUrl), audit);
      });
    },

    async listGrantsOf(audienceUrl) {
      const rows = await base.conn
        .selectFrom('grants')
        .select(['client_id', 'audience_url', 'scopes', 'claims', 'token_exchange'])
        .where('audience_url', '=', audienceUrl)
        .orderBy('client_id')
        .execute();
      return rows.map((row) => ({ clientId: row.client_id, ...toGrant(row) }));
    },
  };
}
