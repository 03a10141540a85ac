import { randomBytes } from 'node:crypto';
import { sql, type ColumnDefinitionBuilder, type CreateTableBuilder, type Kysely } from 'kysely';
import type { Migration, MigrationProvider } from 'kysely/migration';

export type Engine = 'sqlite' | 'postgres';

/**
 * Forward-only migrations, the same for every engine; where the engines differ, the migration says so.
 * A database that has migrations this code does not know is refused (Kysely's Migrator checks it).
 */
export function migrations(engine: Engine): Record<string, Migration> {
  // Text compares and sorts by code point on every engine (PostgreSQL would otherwise use the locale's rules).
  const text = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder =>
    engine === 'postgres' ? c.modifyFront(sql`collate "C"`) : c;
  /**
   * A key numbered upwards: bigserial, or on SQLite AUTOINCREMENT, so that a number is never reused, even after
   * the newest row is pruned.
   */
  const serialKey = <T extends string>(table: CreateTableBuilder<T>, column: string) =>
    engine === 'postgres'
      ? table.addColumn(column, 'bigserial', (c) => c.primaryKey())
      : table.addColumn(column, 'integer', (c) => c.primaryKey().autoIncrement());
  return {
    '0001_initial': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('audiences')
          .addColumn('url', 'text', (c) => text(c).primaryKey())
          .addColumn('name', 'text', text)
          .addColumn('token_ttl', 'integer')
          .addColumn('signing_alg', 'text', text)
          .addColumn('created_at', 'text', (c) => text(c).notNull())
          .addColumn('updated_at', 'text', (c) => text(c).notNull())
          .execute();

        await db.schema
          .createTable('clients')
          .addColumn('id', 'text', (c) => text(c).primaryKey())
          .addColumn('name', 'text', (c) => text(c).notNull())
          .addColumn('secret_digest', 'text', (c) => text(c).notNull())
          .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
          .addColumn('token_ttl', 'integer')
          .addColumn('created_at', 'text', (c) => text(c).notNull())
          .addColumn('updated_at', 'text', (c) => text(c).notNull())
          .addColumn('secret_rotated_at', 'text', (c) => text(c).notNull())
          .execute();

        await db.schema
          .createTable('grants')
          .addColumn('client_id', 'text', (c) =>
            text(c).notNull().references('clients.id').onDelete('cascade'),
          )
          .addColumn('audience_url', 'text', (c) =>
            text(c).notNull().references('audiences.url').onDelete('cascade'),
          )
          .addColumn('created_at', 'text', (c) => text(c).notNull())
          .addPrimaryKeyConstraint('grants_pk', ['client_id', 'audience_url'])
          .execute();
        await db.schema.createIndex('grants_audience_idx').on('grants').column('audience_url').execute();

        await db.schema
          .createTable('signing_keys')
          .addColumn('kid', 'text', (c) => text(c).primaryKey())
          .addColumn('alg', 'text', (c) => text(c).notNull())
          .addColumn('public_jwk', 'text', (c) => text(c).notNull())
          .addColumn('private_jwk_sealed', 'text', (c) => text(c).notNull())
          .addColumn('created_at', 'text', (c) => text(c).notNull())
          .addColumn('activates_at', 'text', (c) => text(c).notNull())
          .addColumn('retired_at', 'text', text)
          .execute();

        await serialKey(db.schema.createTable('changes'), 'seq')
          .addColumn('entity', 'text', (c) => text(c).notNull())
          .addColumn('key', 'text', (c) => text(c).notNull())
          .addColumn('created_at', 'text', (c) => text(c).notNull())
          .execute();
      },
    },
    '0002_audit_events': {
      async up(db: Kysely<unknown>) {
        await serialKey(db.schema.createTable('audit_events'), 'id')
          .addColumn('at', 'text', (c) => text(c).notNull())
          .addColumn('outcome', 'text', (c) => text(c).notNull())
          .addColumn('client_id', 'text', text)
          .addColumn('audience', 'text', text)
          .addColumn('jti', 'text', text)
          .addColumn('reason', 'text', text)
          .addColumn('source', 'text', text)
          .execute();
        await auditIndexes(db);
      },
    },
    '0003_client_quotas': addColumns([
      ['clients', 'quota_per_minute', 'integer'],
      ['clients', 'quota_per_day', 'integer'],
    ]),
    '0004_compact_audit': {
      // The audit trail's time as milliseconds (an integer where RFC 3339 text took 25 bytes in the row and in
      // both indexes), `type` instead of `outcome` (token.issued, token.refused; token.throttled summaries with
      // a count), and the spool positions that make the trail's writes exactly-once across crashes.
      async up(db: Kysely<unknown>) {
        if (engine === 'postgres') {
          await sql`alter table audit_events alter column at type bigint
                      using round(extract(epoch from at::timestamptz) * 1000)::bigint`.execute(db);
          await sql`alter table audit_events rename column outcome to type`.execute(db);
          await sql`update audit_events set type = 'token.' || type`.execute(db);
          await sql`alter table audit_events add column count integer`.execute(db);
        } else {
          // SQLite cannot change a column's type: the table is made anew and the rows copied, ids kept.
          await db.schema
            .createTable('audit_events_new')
            .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
            .addColumn('at', 'integer', (c) => c.notNull())
            .addColumn('type', 'text', (c) => c.notNull())
            .addColumn('client_id', 'text')
            .addColumn('audience', 'text')
            .addColumn('jti', 'text')
            .addColumn('reason', 'text')
            .addColumn('source', 'text')
            .addColumn('count', 'integer')
            .execute();
          await sql`insert into audit_events_new (id, at, type, client_id, audience, jti, reason, source)
                    select id, cast(round((julianday(at) - 2440587.5) * 86400000) as integer),
                           'token.' || outcome, client_id, audience, jti, reason, source
                    from audit_events`.execute(db);
          await db.schema.dropTable('audit_events').execute();
          await sql`alter table audit_events_new rename to audit_events`.execute(db);
          await auditIndexes(db);
        }
        await db.schema
          .createTable('audit_spool_positions')
          .addColumn('segment', 'text', (c) => text(c).primaryKey())
          .addColumn('position', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .execute();
      },
    },
    // Changes made through the management layer are audit events too: who made them, to what, and which fields
    // changed (JSON), beside the token events.
    '0005_change_audit': addColumns([
      ['audit_events', 'actor', 'text'],
      ['audit_events', 'target', 'text'],
      ['audit_events', 'changes', 'text'],
    ]),
    '0006_ids_and_scopes': {
      // An audience gets a stable, server-made id (the admin API's paths use it; its URL may be long) and the
      // scopes it defines (a JSON list of { name, description }); a grant gets the scopes it carries (sorted,
      // space-delimited, as the token's `scope` claim has them); a client gets a description.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('audiences').addColumn('id', 'text', text).execute();
        await db.schema
          .alterTable('audiences')
          .addColumn('scopes', 'text', (c) => c.notNull().defaultTo('[]'))
          .execute();
        await db.schema
          .alterTable('grants')
          .addColumn('scopes', 'text', (c) => c.notNull().defaultTo(''))
          .execute();
        await db.schema.alterTable('clients').addColumn('description', 'text', text).execute();
        const typed = db as unknown as Kysely<{ audiences: { url: string; id: string | null } }>;
        for (const { url } of await typed.selectFrom('audiences').select('url').execute()) {
          await typed.updateTable('audiences').set({ id: newAudienceId() }).where('url', '=', url).execute();
        }
        await db.schema.createIndex('audiences_id_idx').on('audiences').column('id').unique().execute();
      },
    },
    // Custom claims (docs/interface.md): a JSON object per client, and per grant (overriding the client's).
    '0007_custom_claims': addColumns([
      ['clients', 'claims', 'text'],
      ['grants', 'claims', 'text'],
    ]),
    '0008_client_secrets': {
      // Several secrets per client (docs/interface.md, "Secrets, with overlap"): each with an id, its digest, when
      // it was made, when it expires (null: never) and when it was last used. A client's single secret becomes
      // its first; the clients.secret_digest column stays, unread, for servers of the previous version.
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('client_secrets')
          .addColumn('id', 'text', (c) => text(c).primaryKey())
          .addColumn('client_id', 'text', (c) =>
            text(c).notNull().references('clients.id').onDelete('cascade'),
          )
          .addColumn('digest', 'text', (c) => text(c).notNull())
          .addColumn('created_at', 'text', (c) => text(c).notNull())
          .addColumn('expires_at', 'text', text)
          .addColumn('last_used_at', 'text', text)
          .execute();
        await db.schema
          .createIndex('client_secrets_client_idx')
          .on('client_secrets')
          .column('client_id')
          .execute();
        const typed = db as unknown as Kysely<{
          clients: { id: string; secret_digest: string; secret_rotated_at: string };
          client_secrets: { id: string; client_id: string; digest: string; created_at: string };
        }>;
        const rows = await typed
          .selectFrom('clients')
          .select(['id', 'secret_digest', 'secret_rotated_at'])
          .execute();
        for (let i = 0; i < rows.length; i += 500) {
          await typed
            .insertInto('client_secrets')
            .values(
              rows.slice(i, i + 500).map((r) => ({
                id: newSecretId(),
                client_id: r.id,
                digest: r.secret_digest,
                created_at: r.secret_rotated_at,
              })),
            )
            .execute();
        }
        // The token path's lookup joins this table: give PostgreSQL's planner its statistics now, rather than
        // when autovacuum gets to it (without them, a batch of lookups may scan the table).
        if (engine === 'postgres') await sql`analyze client_secrets`.execute(db);
      },
    },
    '0009_private_key_jwt': {
      // Client authentication by signed assertion (docs/interface.md, "Client authentication"): a client's method
      // (RFC 7591 names; every existing client keeps client_secret_basic), its public keys inline (a JWK Set as
      // JSON) or their URL; and the assertion ids already used (a SHA-256 of client id and jti), each until the
      // assertion it came in could no longer be valid (ms since the epoch), so a replay is refused everywhere.
      async up(db: Kysely<unknown>) {
        await db.schema
          .alterTable('clients')
          .addColumn('token_endpoint_auth_method', 'text', (c) =>
            text(c).notNull().defaultTo('client_secret_basic'),
          )
          .execute();
        await db.schema.alterTable('clients').addColumn('jwks', 'text').execute();
        await db.schema.alterTable('clients').addColumn('jwks_uri', 'text', text).execute();
        await db.schema
          .createTable('assertion_jtis')
          .addColumn('id', 'text', (c) => text(c).primaryKey())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex('assertion_jtis_expires_idx')
          .on('assertion_jtis')
          .column('expires_at')
          .execute();
      },
    },
    '0010_console': {
      // The web console (docs/management.md, "Web console"): operators (people, apart from clients) with an email, a
      // role, a password hash (scrypt; null until they enroll) and at most one open enrollment link (its digest
      // and expiry); their sessions (the digest of the cookie's id, times in ms since the epoch); and the token
      // endpoint's outcomes per minute, which the audit trail's writer adds to in the transaction of each batch,
      // so the overview's chart reads sixty rows instead of counting an hour of events.
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('operators')
          .addColumn('id', 'text', (c) => text(c).primaryKey())
          .addColumn('email', 'text', (c) => text(c).notNull().unique())
          .addColumn('role', 'text', (c) => text(c).notNull())
          .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
          .addColumn('password_hash', 'text')
          .addColumn('enroll_digest', 'text', (c) => text(c).unique())
          .addColumn('enroll_expires_at', 'text', text)
          .addColumn('last_login_at', 'text', text)
          .addColumn('created_at', 'text', (c) => text(c).notNull())
          .addColumn('updated_at', 'text', (c) => text(c).notNull())
          .execute();
        await db.schema
          .createTable('operator_sessions')
          .addColumn('id', 'text', (c) => text(c).primaryKey())
          .addColumn('operator_id', 'text', (c) =>
            text(c).notNull().references('operators.id').onDelete('cascade'),
          )
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .addColumn('source', 'text', text)
          .execute();
        await db.schema
          .createIndex('operator_sessions_operator_idx')
          .on('operator_sessions')
          .column('operator_id')
          .execute();
        await db.schema
          .createTable('token_counts')
          .addColumn('minute', 'bigint', (c) => c.primaryKey())
          .addColumn('issued', 'bigint', (c) => c.notNull().defaultTo(0))
          .addColumn('refused', 'bigint', (c) => c.notNull().defaultTo(0))
          .execute();
      },
    },
    '0011_typed_actors': {
      // Actors say what kind they are (docs/management.md): `client:<id>`, `operator:<email>`, `cli:<user>`, `tessera`.
      // Before, an admin client was recorded by its bare id, so a client named `tessera` or `anonymous` read as
      // the server itself or as an anonymous login. Client ids have no colon: a bare one is an admin client's; of
      // the rows named `tessera`, the server's own came from no address (the admin API's callers always have one);
      // `anonymous` stood for a failed login for an unknown email, now recorded with no actor.
      async up(db: Kysely<unknown>) {
        await sql`update audit_events set actor = null
          where actor = 'anonymous' and type = 'operator.login_failed'`.execute(db);
        await sql`update audit_events set actor = 'client:' || actor
          where actor is not null and actor not like '%:%' and (actor <> 'tessera' or source is not null)`.execute(
          db,
        );
      },
    },
    // Workload identity federation: a client's federated credentials, a JSON list read with the client (the token
    // path finds them in the directory's cache, as it finds jwks).
    '0012_federated_credentials': addColumns([['clients', 'federated_credentials', 'text']]),
    // DPoP (RFC 9449 §5.2): a client that gets no token without a proof; 0 for every client there is.
    '0013_dpop_bound_access_tokens': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .alterTable('clients')
          .addColumn('dpop_bound_access_tokens', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
      },
    },
    // Revocation (docs/interface.md, "Revocation and introspection"): a client's revoked_before (its tokens issued at or
    // before it, to the second, are inactive; disabling sets it), set now for the clients already disabled, so that
    // enabling one again does not revive its old tokens; and the denylist of single tokens until their exp (seconds
    // since the epoch), which every server loads at start and follows through the change feed.
    '0014_revocation': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('clients').addColumn('revoked_before', 'text', text).execute();
        await sql`update clients set revoked_before = ${new Date().toISOString()} where enabled = 0`.execute(
          db,
        );
        await db.schema
          .createTable('revoked_tokens')
          .addColumn('jti', 'text', (c) => text(c).primaryKey())
          .addColumn('client_id', 'text', (c) => text(c).notNull())
          .addColumn('exp', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('revoked_tokens_exp_idx').on('revoked_tokens').column('exp').execute();
      },
    },
    // Token exchange (docs/interface.md, "Token exchange"): a grant that lets its client exchange a token it received for
    // one of the grant's audience (0 for every grant there is), and an audience's resource servers, the clients that
    // receive its tokens (a JSON list of client ids, sorted; read with the audiences, which every server keeps whole).
    '0015_token_exchange': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .alterTable('grants')
          .addColumn('token_exchange', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
        await db.schema
          .alterTable('audiences')
          .addColumn('resource_server_client_ids', 'text', (c) => c.notNull().defaultTo('[]'))
          .execute();
      },
    },
    // A deleted client's id and when (docs/interface.md, "Revocation and introspection"): a new client given that id starts
    // with its tokens cut at that moment, so that the deleted client's tokens never become active again. Kept until
    // every token of the deleted client has expired, or until the id is given again (the cut is then the new
    // client's revoked_before).
    '0016_client_deletions': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('client_deletions')
          .addColumn('id', 'text', (c) => text(c).primaryKey())
          .addColumn('deleted_at', 'text', (c) => text(c).notNull())
          .execute();
        await db.schema
          .createIndex('client_deletions_at_idx')
          .on('client_deletions')
          .column('deleted_at')
          .execute();
      },
    },
    // Mutual TLS (RFC 8705): a tls_client_auth client's one registered value (its kind, subject_dn, san_dns,
    // san_uri, san_ip or san_email, and the value as given; null for every client there is), and whether a client's
    // tokens are bound to its certificate (0 for every client there is).
    '0017_tls_client_auth': {
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('clients').addColumn('tls_client_auth_kind', 'text', text).execute();
        await db.schema.alterTable('clients').addColumn('tls_client_auth_value', 'text', text).execute();
        await db.schema
          .alterTable('clients')
          .addColumn('tls_client_certificate_bound_access_tokens', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
      },
    },
    // Token profiles (docs/management.md, "Moving in"): the claims an audience's tokens carry beyond RFC 9068's
    // (`auth0`, `keycloak`); null, the default, for every audience there is: rfc9068.
    '0018_token_profile': addColumns([['audiences', 'token_profile', 'text']]),
  };
}

/**
 * A migration that only adds columns (none of them collated), one statement each: SQLite adds columns one at a
 * time.
 */
function addColumns(columns: [table: string, column: string, type: 'integer' | 'text'][]): Migration {
  return {
    async up(db: Kysely<unknown>) {
      for (const [table, column, type] of columns)
        await db.schema.alterTable(table).addColumn(column, type).execute();
    },
  };
}

/** The audit trail's indexes: by time, and by client and time. */
async function auditIndexes(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('audit_events_at_idx').on('audit_events').column('at').execute();
  await db.schema
    .createIndex('audit_events_client_idx')
    .on('audit_events')
    .columns(['client_id', 'at'])
    .execute();
}

/** A new client secret's id: `sec_` and 96 random bits, URL-safe (never the secret, nor derived from it). */
export const newSecretId = (): string => `sec_${randomBytes(12).toString('base64url')}`;

/** A new operator's id: `op_` and 96 random bits, URL-safe. */
export const newOperatorId = (): string => `op_${randomBytes(12).toString('base64url')}`;

/** A new audience's id: `aud_` and 96 random bits, URL-safe. */
export const newAudienceId = (): string => `aud_${randomBytes(12).toString('base64url')}`;

export class StaticMigrationProvider implements MigrationProvider {
  constructor(private readonly list: Record<string, Migration>) {}
  async getMigrations(): Promise<Record<string, Migration>> {
    return this.list;
  }
}
