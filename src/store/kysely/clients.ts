import { sql, type InferResult, type Kysely, type Selectable } from 'kysely';
import type { FederatedCredential } from '../../domain/client-auth/index.js';
import { digestSecret, generateSecret } from '../../domain/secrets.js';
import { newSecretId, type Engine } from '../migrations.js';
import type { ClientsTable, Database } from '../schema.js';
import {
  StoreError,
  type Client,
  type ChangeAudit,
  type ClientSecret,
  type ClientStore,
  type Grant,
  type NewClient,
} from '../types.js';
import { requireAudiences } from './audiences.js';
import {
  chunks,
  compileOnce,
  isUniqueViolation,
  mustTouch,
  notFound,
  ROWS_PER_STATEMENT,
  type StoreBase,
} from './base.js';
import {
  byClient,
  claimsOf,
  claimsText,
  clientIdsText,
  columnsOf,
  scopeList,
  scopeText,
  toClient,
  tlsColumns,
  toGrant,
  toSecret,
} from './rows.js';
import { secretColumns, writeSecrets } from './secrets.js';

/**
 * Several clients with their grants and secrets in one statement: a row per client × grant × secret (a client
 * has a few of each), ordered by client, grant, secret; `ids` is the one parameter (see findClients).
 */
function clientsByIds(db: Kysely<Database>, engine: Engine, ids: unknown) {
  return db
    .selectFrom('clients')
    .leftJoin('grants', 'grants.client_id', 'clients.id')
    .leftJoin('client_secrets', 'client_secrets.client_id', 'clients.id')
    .selectAll('clients')
    .select([
      'grants.audience_url',
      'grants.scopes as grant_scopes',
      'grants.claims as grant_claims',
      'grants.token_exchange as grant_token_exchange',
    ])
    .select([
      'client_secrets.id as secret_id',
      'client_secrets.digest as secret_digest_',
      'client_secrets.created_at as secret_created_at',
      'client_secrets.expires_at as secret_expires_at',
      'client_secrets.last_used_at as secret_last_used_at',
    ])
    .where(
      engine === 'postgres'
        ? sql<boolean>`clients.id = any(${ids}::text[])`
        : sql<boolean>`clients.id in (select value from json_each(${ids}))`,
    )
    .orderBy('clients.id')
    .orderBy('grants.audience_url')
    .orderBy('client_secrets.id');
}

/** One row of clientsByIds: a client with one of its grants and one of its secrets (or nulls for none). */
type ClientRow = InferResult<ReturnType<typeof clientsByIds>>[number];

/** The clients of clientsByIds' rows, which arrive ordered by client, then grant, then secret. */
function clientsOfRows(rows: ClientRow[]): Client[] {
  const clients: Client[] = [];
  for (let i = 0; i < rows.length;) {
    const {
      audience_url: _grant,
      grant_scopes: _scopes,
      grant_claims: _claims,
      grant_token_exchange: _exchange,
      secret_id: _secret,
      secret_digest_: _digest,
      secret_created_at: _created,
      secret_expires_at: _expires,
      secret_last_used_at: _used,
      ...row
    } = rows[i]!;
    const grants: Grant[] = [];
    const secrets: ClientSecret[] = [];
    // Each grant and secret comes once per secret and grant of its client: each is kept once.
    for (; i < rows.length && rows[i]!.id === row.id; i++) {
      const r = rows[i]!;
      if (r.audience_url !== null && grants[grants.length - 1]?.audience !== r.audience_url)
        grants.push({
          audience: r.audience_url,
          scopes: scopeList(r.grant_scopes ?? ''),
          claims: claimsOf(r.grant_claims),
          tokenExchange: Number(r.grant_token_exchange) === 1,
        });
      if (r.secret_id !== null && !secrets.some((s) => s.id === r.secret_id))
        secrets.push({
          id: r.secret_id,
          digest: r.secret_digest_!,
          createdAt: r.secret_created_at!,
          expiresAt: r.secret_expires_at,
          lastUsedAt: r.secret_last_used_at,
        });
    }
    clients.push(toClient(row, grants, secrets));
  }
  return clients;
}

/** Refuses (not_found, client) unless the client exists. */
export async function requireClient(db: Kysely<Database>, id: string): Promise<void> {
  const row = await db.selectFrom('clients').select('id').where('id', '=', id).executeTakeFirst();
  if (!row) throw new StoreError('not_found', notFound.client(id), 'client');
}

/** A client with its grants and secrets, read on a transaction that just wrote it. */
async function readClient(db: Kysely<Database>, id: string): Promise<Client> {
  const row = await db.selectFrom('clients').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  // Every column: what a store whose schema is older than this code has (a migration's test writes on one).
  const grants = await db
    .selectFrom('grants')
    .selectAll()
    .where('client_id', '=', id)
    .orderBy('audience_url')
    .execute();
  const secrets = await db.selectFrom('client_secrets').selectAll().where('client_id', '=', id).execute();
  return toClient(row, grants.map(toGrant), secrets.map(toSecret));
}

/**
 * Client rows with their grants and secrets: those of `ids`, or every one (read at the same time as the rows)
 * when `ids` is undefined.
 */
async function withGrantsAndSecrets(
  db: Kysely<Database>,
  clientRows: Promise<Selectable<ClientsTable>[]>,
  ids?: string[],
): Promise<Client[]> {
  let grants = db
    .selectFrom('grants')
    .select(['client_id', 'audience_url', 'scopes', 'claims', 'token_exchange'])
    .orderBy('audience_url');
  let secrets = db.selectFrom('client_secrets').selectAll();
  if (ids !== undefined) {
    grants = grants.where('client_id', 'in', ids);
    secrets = secrets.where('client_id', 'in', ids);
  }
  const [rows, grantRows, secretRows] = await Promise.all([clientRows, grants.execute(), secrets.execute()]);
  const grantsOf = byClient(grantRows, toGrant);
  const secretsOf = byClient(secretRows, toSecret);
  return rows.map((row) => toClient(row, grantsOf.get(row.id) ?? [], secretsOf.get(row.id) ?? []));
}

/** The columns of migration 0017 at their defaults: no tls_client_auth value, tokens not bound to a certificate. */
const TLS_DEFAULTS = {
  tls_client_auth_kind: null,
  tls_client_auth_value: null,
  tls_client_certificate_bound_access_tokens: 0,
} as const;

/** The rows of a new client: its own, its grants', its first secret's (none for private_key_jwt). */
function newClientRows(client: NewClient, at: string, revokedBefore: string | undefined) {
  const audiences = [...new Set(client.audiences)].sort();
  const exchanging = client.grantTokenExchange?.length ?? 0;
  return {
    client: {
      id: client.id,
      name: client.name,
      description: client.description ?? null,
      // Read by servers of versions before 0008 only; a client without secrets gets a digest of nothing
      // anyone has.
      secret_digest: client.secretDigest ?? digestSecret(generateSecret()),
      enabled: client.enabled === false ? 0 : 1,
      token_ttl: client.tokenTtl,
      created_at: at,
      updated_at: at,
      secret_rotated_at: at,
      quota_per_minute: client.quotaPerMinute ?? null,
      quota_per_day: client.quotaPerDay ?? null,
      claims: claimsText(client.claims),
      token_endpoint_auth_method: client.authMethod ?? 'client_secret_basic',
      jwks: client.jwks == null ? null : JSON.stringify(client.jwks),
      jwks_uri: client.jwksUri ?? null,
      federated_credentials: federatedText(client.federatedCredentials ?? []),
      dpop_bound_access_tokens: client.dpopBoundAccessTokens === true ? 1 : 0,
      // Left to its default (null) for an id never given before.
      ...(revokedBefore === undefined ? {} : { revoked_before: revokedBefore }),
      // Left to their defaults (null, 0) unless set, as a store before 0017 has no such columns.
      ...(client.tlsClientAuth == null && client.certificateBoundAccessTokens !== true
        ? {}
        : {
            ...tlsColumns(client.tlsClientAuth),
            tls_client_certificate_bound_access_tokens: client.certificateBoundAccessTokens === true ? 1 : 0,
          }),
    },
    grants: audiences.map((audience) => ({
      client_id: client.id,
      audience_url: audience,
      scopes: scopeText(client.scopes?.[audience] ?? []),
      claims: claimsText(client.grantClaims?.[audience] ?? null),
      // Left to its default (0) unless a grant allows it, as a store before 0015 has no such column.
      ...(exchanging > 0 ? { token_exchange: client.grantTokenExchange!.includes(audience) ? 1 : 0 } : {}),
      created_at: at,
    })),
    secret:
      client.secretDigest === null
        ? undefined
        : {
            id: newSecretId(),
            client_id: client.id,
            digest: client.secretDigest,
            created_at: at,
            expires_at: null,
          },
  };
}

export function clientStore(base: StoreBase): ClientStore {
  /**
   * Whether the store has the tombstones of deleted clients (migration 0016): a server refuses a store whose schema
   * is older, but `tessera migrate`'s own steps (and their tests) write clients to one. Once there, always there.
   */
  let tombstones = false;
  const hasTombstones = async (tx: Kysely<Database>): Promise<boolean> => {
    if (tombstones) return true;
    const found =
      base.engine === 'postgres'
        ? await sql<{ n: string | null }>`select to_regclass('client_deletions')::text as n`.execute(tx)
        : await sql<{
            n: string | null;
          }>`select name as n from sqlite_master where type = 'table' and name = 'client_deletions'`.execute(
            tx,
          );
    tombstones = (found.rows[0]?.n ?? null) !== null;
    return tombstones;
  };
  const compileFindClients = () => compileOnce(clientsByIds(base.db, base.engine, ''), 1);
  const findClients: ClientStore['findClients'] = async (ids) => {
    if (ids.length === 0) return [];
    // One statement whatever the number of ids: they travel as one parameter (a text[] on PostgreSQL, a JSON
    // array on SQLite), so the statement is compiled and prepared once.
    const text = base.statements.get('findClients', compileFindClients);
    const parameter = base.engine === 'postgres' ? [...ids] : JSON.stringify(ids);
    return clientsOfRows(await base.runQuery<ClientRow>('tessera_find_clients', text, [parameter]));
  };

  /**
   * New clients with their grants and first secrets, their audit events and change records, in one transaction
   * (or the caller's), a few multi-row statements for them all; the rows written. Refuses (conflict) an id taken
   * or given twice, (not_found) an audience that does not exist: nothing is written then.
   */
  const writeNewClients = async (clients: readonly { client: NewClient; audit?: ChangeAudit }[]) => {
    const ids = clients.map((c) => c.client.id);
    const conflict = (id: string) => new StoreError('conflict', `client ${id} already exists`, 'client');
    const twice = ids.find((id, i) => ids.indexOf(id) !== i);
    if (twice !== undefined) throw conflict(twice);
    try {
      return await base.write(async (tx) => {
        for (const chunk of chunks(ids, ROWS_PER_STATEMENT)) {
          const taken = await tx.selectFrom('clients').select('id').where('id', 'in', chunk).execute();
          const first = chunk.find((id) => taken.some((r) => r.id === id));
          if (first !== undefined) throw conflict(first);
        }
        const at = base.stamp();
        // An id given before to a client since deleted: the new client starts with the deleted one's tokens cut
        // (revoked_before = the deletion), and the id's tombstone has served.
        const deletedAt = new Map<string, string>();
        if (await hasTombstones(tx))
          for (const chunk of chunks(ids, ROWS_PER_STATEMENT)) {
            const gone = await tx
              .selectFrom('client_deletions')
              .selectAll()
              .where('id', 'in', chunk)
              .execute();
            for (const row of gone) deletedAt.set(row.id, row.deleted_at);
          }
        if (deletedAt.size > 0)
          for (const chunk of chunks([...deletedAt.keys()], ROWS_PER_STATEMENT))
            await tx.deleteFrom('client_deletions').where('id', 'in', chunk).execute();
        const rows = clients.map(({ client }) => newClientRows(client, at, deletedAt.get(client.id)));
        const grants = rows.flatMap((r) => r.grants);
        await requireAudiences(tx, [...new Set(grants.map((g) => g.audience_url))]);
        // Rows of one insert have the same columns: revoked_before for all where some id had a tombstone, the
        // columns of 0017 for all where some client sets them.
        const certificates = rows.some((r) => 'tls_client_auth_kind' in r.client);
        await base.insertRows(
          tx,
          'clients',
          rows.map((r) => ({
            ...(deletedAt.size > 0 ? { revoked_before: null } : {}),
            ...(certificates ? { ...TLS_DEFAULTS } : {}),
            ...r.client,
          })),
        );
        // Rows of one insert have the same columns: token_exchange only where some grant allows it.
        const exchanging = grants.some((g) => g.token_exchange !== undefined);
        await base.insertRows(
          tx,
          'grants',
          exchanging ? grants.map((g) => ({ ...g, token_exchange: g.token_exchange ?? 0 })) : grants,
        );
        await base.insertRows(
          tx,
          'client_secrets',
          rows.flatMap((r) => (r.secret === undefined ? [] : [r.secret])),
        );
        await base.recordMany(
          tx,
          'client',
          clients.map(({ client, audit }) => ({ key: client.id, audit })),
        );
        return rows;
      });
    } catch (error) {
      // Another writer got there between the look and the insert.
      if (isUniqueViolation(error))
        throw ids.length === 1
          ? conflict(ids[0]!)
          : new StoreError('conflict', 'one of the clients already exists', 'client');
      throw error;
    }
  };

  return {
    createClient: async (client, audit) => {
      const [rows] = await writeNewClients([{ client, audit }]);
      const secret = rows!.secret;
      return toClient(
        { revoked_before: null, ...TLS_DEFAULTS, ...rows!.client },
        rows!.grants.map((g) => toGrant({ ...g, token_exchange: g.token_exchange ?? 0 })),
        secret === undefined
          ? []
          : [
              {
                id: secret.id,
                digest: secret.digest,
                createdAt: secret.created_at,
                expiresAt: null,
                lastUsedAt: null,
              },
            ],
      );
    },

    async createClients(clients) {
      if (clients.length > 0) await writeNewClients(clients);
    },

    /**
     * One round trip whether the client exists or not (the client row joined with its grants), so that a
     * cache miss for an unknown id and for a known one cost the same (docs/interface.md: no timing difference).
     */
    findClient: async (id) => (await findClients([id]))[0],

    findClients,

    listClients: () =>
      withGrantsAndSecrets(
        base.conn,
        base.conn.selectFrom('clients').selectAll().orderBy('created_at').orderBy('id').execute(),
      ),

    async listClientsPage(after, limit, search) {
      let query = base.conn.selectFrom('clients').selectAll().orderBy('id').limit(limit);
      if (after !== null) query = query.where('id', '>', after);
      if (search !== undefined && search !== '') {
        // A substring of the id or the name, whatever the case of ASCII letters (lower() on both engines; LIKE
        // alone is case-sensitive on PostgreSQL). The text is matched literally: %, _ and \ are escaped.
        const pattern = `%${search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
        query = query.where(
          sql<boolean>`(lower(id) like ${pattern} escape '\\' or lower(name) like ${pattern} escape '\\')`,
        );
      }
      const rows = await query.execute();
      if (rows.length === 0) return [];
      return withGrantsAndSecrets(
        base.conn,
        Promise.resolve(rows),
        rows.map((r) => r.id),
      );
    },

    async countClients() {
      const row = await base.conn
        .selectFrom('clients')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },

    async listClientIds(after, limit) {
      // The primary key's index alone answers it, on both engines (PostgreSQL's ids are collated "C").
      let query = base.conn.selectFrom('clients').select('id').orderBy('id').limit(limit);
      if (after !== null) query = query.where('id', '>', after);
      return (await query.execute()).map((row) => row.id);
    },

    updateClient: (id, patch, audit, secrets = {}) =>
      base.write(async (tx) => {
        const values = columnsOf<typeof patch, Selectable<ClientsTable>>(patch, {
          name: (name) => ({ name }),
          description: (description) => ({ description }),
          enabled: (enabled) => ({ enabled: enabled ? 1 : 0 }),
          tokenTtl: (ttl) => ({ token_ttl: ttl }),
          quotaPerMinute: (quota) => ({ quota_per_minute: quota }),
          quotaPerDay: (quota) => ({ quota_per_day: quota }),
          claims: (claims) => ({ claims: claimsText(claims) }),
          authMethod: (method) => ({ token_endpoint_auth_method: method }),
          jwks: (jwks) => ({ jwks: jwks === null ? null : JSON.stringify(jwks) }),
          jwksUri: (uri) => ({ jwks_uri: uri }),
          federatedCredentials: (list) => ({ federated_credentials: federatedText(list) }),
          dpopBoundAccessTokens: (bound) => ({ dpop_bound_access_tokens: bound ? 1 : 0 }),
          tlsClientAuth: (tls) => tlsColumns(tls),
          certificateBoundAccessTokens: (bound) => ({
            tls_client_certificate_bound_access_tokens: bound ? 1 : 0,
          }),
          revokedBefore: (at) => ({ revoked_before: at }),
        });
        const result = await tx
          .updateTable('clients')
          .set({ ...values, ...secretColumns(secrets), updated_at: base.stamp() })
          .where('id', '=', id)
          .executeTakeFirst();
        mustTouch(result, 'client', notFound.client(id));
        await writeSecrets(tx, id, secrets);
        await base.record(tx, 'client', id, audit);
        return readClient(tx, id);
      }),

    async deleteClient(id, audit) {
      await base.write(async (tx) => {
        await tx.deleteFrom('grants').where('client_id', '=', id).execute();
        mustTouch(
          await tx.deleteFrom('clients').where('id', '=', id).executeTakeFirst(),
          'client',
          notFound.client(id),
        );
        // Its tokens stay inactive, whatever client is given the id next (see writeNewClients).
        const at = base.stamp();
        if (await hasTombstones(tx))
          await tx
            .insertInto('client_deletions')
            .values({ id, deleted_at: at })
            .onConflict((oc) => oc.column('id').doUpdateSet({ deleted_at: at }))
            .execute();
        await base.record(tx, 'client', id, audit);
        // No audience names a client that does not exist as its resource server: it goes from their lists in the
        // same transaction, and each of them is recorded as changed, so that every server reloads its audiences.
        const naming = await tx
          .selectFrom('audiences')
          .select(['url', 'resource_server_client_ids'])
          .where('resource_server_client_ids', '<>', '[]')
          .execute();
        for (const row of naming) {
          const ids = JSON.parse(row.resource_server_client_ids) as string[];
          if (!ids.includes(id)) continue;
          await tx
            .updateTable('audiences')
            .set({
              resource_server_client_ids: clientIdsText(ids.filter((other) => other !== id)),
              updated_at: base.stamp(),
            })
            .where('url', '=', row.url)
            .execute();
          await base.record(tx, 'audience', row.url);
        }
      });
    },
  };
}

/** A client's federated credentials as stored: a JSON list, or null for none. */
const federatedText = (list: FederatedCredential[]): string | null =>
  list.length === 0 ? null : JSON.stringify(list);
