import type { Selectable } from 'kysely';
import { newAudienceId } from '../migrations.js';
import type { AudiencesTable } from '../schema.js';
import { StoreError, type AudienceStore } from '../types.js';
import { mustTouch, notFound, type StoreBase, type Tx } from './base.js';
import { clientIdsText, columnsOf, scopeText, toAudience } from './rows.js';

/** Refuses (not_found, audience) unless every one of `urls` is registered. */
export async function requireAudiences(tx: Tx, urls: readonly string[]): Promise<void> {
  if (urls.length === 0) return;
  const found = await tx.selectFrom('audiences').select('url').where('url', 'in', urls).execute();
  const known = new Set(found.map((r) => r.url));
  const missing = urls.filter((u) => !known.has(u));
  if (missing.length > 0)
    throw new StoreError('not_found', notFound.audience(missing.join(', ')), 'audience');
}

export function audienceStore(base: StoreBase): AudienceStore {
  const findBy = async (column: 'url' | 'id', value: string) => {
    const row = await base.conn
      .selectFrom('audiences')
      .selectAll()
      .where(column, '=', value)
      .executeTakeFirst();
    return row && toAudience(row);
  };

  return {
    addAudience: (audience, audit) =>
      base.create(
        'audience',
        `audience ${audience.url} is already registered`,
        (tx) => tx.selectFrom('audiences').select('url').where('url', '=', audience.url).executeTakeFirst(),
        async (tx) => {
          const at = base.stamp();
          const resourceServers = clientIdsText(audience.resourceServerClientIds ?? []);
          const row = {
            id: audience.id ?? newAudienceId(),
            url: audience.url,
            name: audience.name,
            token_ttl: audience.tokenTtl,
            signing_alg: audience.signingAlg,
            scopes: JSON.stringify(audience.scopes ?? []),
            created_at: at,
            updated_at: at,
          };
          const profile = audience.tokenProfile ?? null;
          // None is the column's default: left out then, as a store before 0015 (0018) has no such column.
          await tx
            .insertInto('audiences')
            .values({
              ...row,
              ...(resourceServers === '[]' ? {} : { resource_server_client_ids: resourceServers }),
              ...(profile === null ? {} : { token_profile: profile }),
            })
            .execute();
          await base.record(tx, 'audience', audience.url, audit);
          return toAudience({ ...row, resource_server_client_ids: resourceServers, token_profile: profile });
        },
      ),

    findAudience: (url) => findBy('url', url),

    findAudienceById: (id) => findBy('id', id),

    async listAudiences() {
      const rows = await base.conn.selectFrom('audiences').selectAll().orderBy('url').execute();
      return rows.map(toAudience);
    },

    updateAudience: (url, patch, audit, grants = []) =>
      base.write(async (tx) => {
        const values = columnsOf<typeof patch, Selectable<AudiencesTable>>(patch, {
          name: (name) => ({ name }),
          tokenTtl: (ttl) => ({ token_ttl: ttl }),
          signingAlg: (alg) => ({ signing_alg: alg }),
          scopes: (scopes) => ({ scopes: JSON.stringify(scopes) }),
          resourceServerClientIds: (ids) => ({ resource_server_client_ids: clientIdsText(ids) }),
          tokenProfile: (profile) => ({ token_profile: profile }),
        });
        const result = await tx
          .updateTable('audiences')
          .set({ ...values, updated_at: base.stamp() })
          .where('url', '=', url)
          .executeTakeFirst();
        mustTouch(result, 'audience', notFound.audience(url));
        for (const grant of grants) {
          const set = await tx
            .updateTable('grants')
            .set({ scopes: scopeText(grant.scopes) })
            .where('client_id', '=', grant.clientId)
            .where('audience_url', '=', url)
            .executeTakeFirst();
          mustTouch(set, 'grant', notFound.grant(grant.clientId, url));
        }
        await base.record(tx, 'audience', url, audit);
        return toAudience(
          await tx.selectFrom('audiences').selectAll().where('url', '=', url).executeTakeFirstOrThrow(),
        );
      }),

    async removeAudience(url, audit) {
      await base.write(async (tx) => {
        // Grants go explicitly rather than by cascade alone, so the result does not depend on engine settings.
        await tx.deleteFrom('grants').where('audience_url', '=', url).execute();
        mustTouch(
          await tx.deleteFrom('audiences').where('url', '=', url).executeTakeFirst(),
          'audience',
          notFound.audience(url),
        );
        await base.record(tx, 'audience', url, audit);
      });
    },
  };
}
