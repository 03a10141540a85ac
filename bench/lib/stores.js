/* global process, URL */
// Tessera's stores for the benchmark: a fresh SQLite data directory or a fresh PostgreSQL database, an
// audience and a client made through the CLI, and for the cold-cache run many more clients written straight
// into the store with SQL (one transaction), with digests of secrets the benchmark knows.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
// Built by `npm run bench` before it starts: the same ids, secrets and digests as Tessera's own.
import { digestSecret, generateClientId, generateSecret } from '../../dist/domain/secrets.js';
import { DEFAULT_MAX_LIFETIME, newFederatedCredentialId } from '../../dist/domain/client-auth/index.js';
import { openSqliteStore } from '../../dist/store/sqlite.js';

/**
 * The environment of every Tessera process: none of the caller's TESSERA_* settings, only ours; and none of its
 * OTEL_* either, so that a scenario traces only when it says so (the tracing scenarios set theirs; --env adds more).
 */
export function tesseraEnv(settings) {
  const env = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (name.startsWith('TESSERA_') || name.startsWith('OTEL_') || name === 'NODE_OPTIONS') continue;
    env[name] = value;
  }
  return { ...env, ...settings };
}

/** Runs `tessera <args> --json` on the harness's Node and returns the parsed answer. */
function tesseraCli(root, env, args, timeoutMs = 60_000) {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', join(root, 'bin/tessera.js'), ...args, '--json'],
      { cwd: root, env, timeout: timeoutMs, maxBuffer: 16 << 20 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`tessera ${args.join(' ')} failed: ${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout));
      },
    );
  });
}

/** An audience and one client granted it, through the CLI as an operator would. */
export async function provision(root, env, audience) {
  await tesseraCli(root, env, ['audience', 'add', audience, '--name', 'Benchmark API']);
  const client = await tesseraCli(root, env, ['client', 'create', '--name', 'bench', '--grant', audience]);
  return { clientId: client.client_id, clientSecret: client.client_secret };
}

/**
 * A resource server's client, as README's "Ending tokens early" makes it: its only admin grant is the scope
 * tokens:introspect, so that it may ask POST /oauth/introspect.
 */
export async function provisionResourceServer(root, env) {
  const client = await tesseraCli(root, env, [
    'client',
    'create',
    '--name',
    'bench-resource-server',
    '--admin-scopes',
    'tokens:introspect',
  ]);
  return { clientId: client.client_id, clientSecret: client.client_secret };
}

/**
 * An operator's program reading the admin API: a client whose only admin grant is the scope clients:read, and
 * `count` more clients (each granted `audience`) made by `tessera apply` of a file, as README's bulk example does,
 * so that every page of GET /admin/v1/clients is full. With `dpopBound`, the client is made with --dpop-bound
 * (RFC 9449 dpop_bound_access_tokens): it gets no token without a DPoP proof, and each is bound to the proof's key.
 */
export async function provisionAdminReader(root, env, dataDir, audience, count, { dpopBound = false } = {}) {
  const lines = ['clients:'];
  for (let i = 0; i < count; i++)
    lines.push(
      `  - client_id: listed-${String(i).padStart(6, '0')}`,
      `    name: Listed ${i}`,
      '    grants:',
      `      - audience: ${audience}`,
    );
  const file = join(dataDir, 'listed.yaml');
  writeFileSync(file, lines.join('\n') + '\n');
  await tesseraCli(root, env, ['apply', '-f', file]);
  const client = await tesseraCli(root, env, [
    'client',
    'create',
    '--name',
    'bench-admin-reader',
    '--admin-scopes',
    'clients:read',
    ...(dpopBound ? ['--dpop-bound'] : []),
  ]);
  return { clientId: client.client_id, clientSecret: client.client_secret };
}

/**
 * Token exchange (README, "Calling another service for your caller"): a service that is the resource server of
 * `audience` (the caller's tokens are for it), granted `downstream` with token_exchange. The service and its grant
 * through the CLI; token_exchange and the audience's resource_server_client_ids written to the store, as the
 * management layer would.
 */
export async function provisionExchange(root, env, dataDir, audience, downstream) {
  await tesseraCli(root, env, ['audience', 'add', downstream, '--name', 'Downstream API']);
  const service = await tesseraCli(root, env, [
    'client',
    'create',
    '--name',
    'bench-service',
    '--grant',
    downstream,
  ]);
  const store = openSqliteStore(join(dataDir, 'tessera.db'));
  try {
    await store.putGrant(service.client_id, downstream, [], undefined, null, true);
    await store.updateAudience(audience, { resourceServerClientIds: [service.client_id] });
  } finally {
    await store.close();
  }
  return { clientId: service.client_id, clientSecret: service.client_secret };
}

/** Ten scopes and five custom claims, as a client with permissions and a tenant would have. */
const SCOPES = Array.from({ length: 10 }, (_, i) => `orders.${i}:read`);
const CLAIMS = { tenant_id: 'acme', plan: 'gold', region: 'eu-west-1', org: 'org_8fK2', tier: 3 };

/** Like provision, but the audience defines ten scopes, and the client has them all and five custom claims. */
export async function provisionScoped(root, env, audience) {
  await tesseraCli(root, env, [
    'audience',
    'add',
    audience,
    '--name',
    'Benchmark API',
    ...SCOPES.flatMap((s) => ['--scope', s]),
  ]);
  const client = await tesseraCli(root, env, [
    'client',
    'create',
    '--name',
    'bench',
    '--grant',
    audience,
    '--claims',
    JSON.stringify(CLAIMS),
  ]);
  await tesseraCli(root, env, ['grant', 'set-scopes', client.client_id, audience, SCOPES.join(' ')]);
  return { clientId: client.client_id, clientSecret: client.client_secret };
}

/** Like provision, with a private_key_jwt client whose public keys are `jwks` (inline): no secret. */
export async function provisionKeyClient(root, env, audience, jwks) {
  await tesseraCli(root, env, ['audience', 'add', audience, '--name', 'Benchmark API']);
  const client = await tesseraCli(root, env, [
    'client',
    'create',
    '--name',
    'bench-keys',
    '--grant',
    audience,
    '--auth-method',
    'private_key_jwt',
    '--jwks',
    JSON.stringify(jwks),
  ]);
  return { clientId: client.client_id };
}

/**
 * Like provision, with a tls_client_auth client (RFC 8705 §2.1): no secret, its credential a certificate of a
 * CA of TESSERA_TLS_CLIENT_CA whose subjectAltName carries the URI `sanUri` (tls_client_auth_san_uri).
 */
export async function provisionTlsClient(root, env, audience, sanUri) {
  await tesseraCli(root, env, ['audience', 'add', audience, '--name', 'Benchmark API']);
  const client = await tesseraCli(root, env, [
    'client',
    'create',
    '--name',
    'bench-mtls',
    '--auth-method',
    'tls_client_auth',
    '--tls-san-uri',
    sanUri,
    '--grant',
    audience,
  ]);
  return { clientId: client.client_id };
}

/**
 * Like provision, with a client that authenticates with one federated credential (issuer, subject, audience,
 * the issuer's keys inline `jwks`): a private_key_jwt client with neither jwks nor jwks_uri, made by the CLI,
 * its credential written to the SQLite store in `dataDir` before the server starts (the CLI of federated
 * credentials is another face over the same write).
 */
export async function provisionFederatedClient(root, env, audience, dataDir, trust) {
  await tesseraCli(root, env, ['audience', 'add', audience, '--name', 'Benchmark API']);
  const client = await tesseraCli(root, env, [
    'client',
    'create',
    '--name',
    'bench-federated',
    '--grant',
    audience,
    '--auth-method',
    'private_key_jwt',
  ]);
  const store = openSqliteStore(join(dataDir, 'tessera.db'));
  try {
    const at = new Date().toISOString();
    await store.updateClient(client.client_id, {
      federatedCredentials: [
        {
          id: newFederatedCredentialId(),
          name: 'bench cluster',
          issuer: trust.issuer,
          jwks: trust.jwks,
          jwksUri: null,
          subject: trust.subject,
          audience: trust.audience,
          claims: {},
          maxLifetime: DEFAULT_MAX_LIFETIME,
          once: false,
          createdAt: at,
          updatedAt: at,
        },
      ],
    });
  } finally {
    await store.close();
  }
  return { clientId: client.client_id };
}

/** `count` clients with random ids and secrets, as Tessera would generate them, and their stored digests. */
export function coldClients(count) {
  const ids = new Array(count);
  const secrets = new Array(count);
  const digests = new Array(count);
  for (let i = 0; i < count; i++) {
    ids[i] = generateClientId();
    secrets[i] = generateSecret();
    digests[i] = digestSecret(secrets[i]);
  }
  return { ids, secrets, digests };
}

/** Writes the clients and their grants into a SQLite store (the server must not be running). */
export async function insertSqlite(file, clients, audience) {
  const { DatabaseSync } = await import('node:sqlite');
  const db = new DatabaseSync(file);
  const now = new Date().toISOString();
  try {
    db.exec('PRAGMA busy_timeout = 10000');
    const client = db.prepare(
      'INSERT INTO clients (id, name, secret_digest, enabled, token_ttl, created_at, updated_at, ' +
        'secret_rotated_at, quota_per_minute, quota_per_day) VALUES (?, ?, ?, 1, NULL, ?, ?, ?, NULL, NULL)',
    );
    const grant = db.prepare('INSERT INTO grants (client_id, audience_url, created_at) VALUES (?, ?, ?)');
    // Since migration 0008 a client authenticates with the secrets of client_secrets.
    const secret = db.prepare(
      'INSERT INTO client_secrets (id, client_id, digest, created_at) VALUES (?, ?, ?, ?)',
    );
    db.exec('BEGIN');
    for (let i = 0; i < clients.ids.length; i++) {
      client.run(clients.ids[i], `cold ${i}`, clients.digests[i], now, now, now);
      grant.run(clients.ids[i], audience, now);
      secret.run(`sec_cold_${i}`, clients.ids[i], clients.digests[i], now);
    }
    db.exec('COMMIT');
    db.exec('ANALYZE');
  } finally {
    db.close();
  }
}

/** The same for PostgreSQL: two statements over unnest()ed arrays, in one transaction. */
export async function insertPostgres(url, clients, audience) {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const now = new Date().toISOString();
  try {
    await db.query('BEGIN');
    await db.query(
      'INSERT INTO clients (id, name, secret_digest, enabled, token_ttl, created_at, updated_at, ' +
        'secret_rotated_at, quota_per_minute, quota_per_day) ' +
        "SELECT id, 'cold ' || n, digest, 1, NULL, $3, $3, $3, NULL, NULL " +
        'FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(id, digest, n)',
      [clients.ids, clients.digests, now],
    );
    await db.query(
      'INSERT INTO grants (client_id, audience_url, created_at) SELECT id, $2, $3 FROM unnest($1::text[]) AS t(id)',
      [clients.ids, audience, now],
    );
    // Since migration 0008 a client authenticates with the secrets of client_secrets.
    await db.query(
      "INSERT INTO client_secrets (id, client_id, digest, created_at) SELECT 'sec_cold_' || n, id, digest, $3 " +
        'FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(id, digest, n)',
      [clients.ids, clients.digests, now],
    );
    await db.query('COMMIT');
    await db.query('ANALYZE clients');
    await db.query('ANALYZE grants');
    await db.query('ANALYZE client_secrets');
  } catch (error) {
    await db.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    await db.end();
  }
}

/** A fresh database on the PostgreSQL server of `adminUrl`; returns its URL and a function that drops it. */
export async function createPostgresDatabase(adminUrl) {
  const name = `tessera_bench_${process.pid}_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
  await admin.connect();
  let version;
  try {
    version = (await admin.query('SHOW server_version')).rows[0].server_version;
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    version,
    async drop() {
      const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/** Whether PostgreSQL answers at `adminUrl` (a short attempt). */
export async function postgresAnswers(adminUrl) {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Whether Redis answers at `url` (a short attempt). */
export async function redisAnswers(url) {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 0 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/** Deletes every key under `prefix` (a scenario's TESSERA_REDIS_PREFIX) in the Redis at `url`. */
export async function dropRedisPrefix(url, prefix) {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  try {
    for (let cursor = '0'; ;) {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length > 0) await client.unlink(...keys);
      if (next === '0') break;
      cursor = next;
    }
  } finally {
    client.disconnect();
  }
}
