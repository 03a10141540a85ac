/**
 * Operator commands never change the schema of a store in use: only `serve` and `migrate` migrate. Any other
 * command sets up an empty store, and refuses a schema older or newer than its own, changing nothing.
 */
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../src/store/sqlite.js';
import { tessera, tesseraEnv, tesseraOk } from './helpers/process.js';
import { tempDir } from './helpers/server.js';

const applied = (file: string) => {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return (db.prepare('select name from tessera_migrations order by name').all() as { name: string }[]).map(
      (r) => r.name,
    );
  } finally {
    db.close();
  }
};

describe('the schema and operator commands', () => {
  it('an empty store is set up by any command', async () => {
    const dataDir = tempDir();
    const env = tesseraEnv({ TESSERA_DATA_DIR: dataDir });
    expect((await tesseraOk(env, 'client', 'list', '--json')).json).toEqual([]);
    expect(applied(path.join(dataDir, 'tessera.db'))).toContain('0005_change_audit');
  });

  it('a store of an older schema is refused, left as it is, until `tessera migrate`', async () => {
    const dataDir = tempDir();
    const file = path.join(dataDir, 'tessera.db');
    const store = openSqliteStore(file);
    await store.migrate('0004_compact_audit');
    await store.close();
    const env = tesseraEnv({ TESSERA_DATA_DIR: dataDir });
    const refused = await tessera(env, 'audience', 'add', 'https://api.example.com', '--json');
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(JSON.parse(refused.stderr)).toEqual({
      error: 'schema_mismatch',
      message:
        "the store's schema is older than this tessera (0005_change_audit, 0006_ids_and_scopes, 0007_custom_claims, 0008_client_secrets, 0009_private_key_jwt, 0010_console, 0011_typed_actors, 0012_federated_credentials, 0013_dpop_bound_access_tokens, 0014_revocation, 0015_token_exchange, 0016_client_deletions, 0017_tls_client_auth, 0018_token_profile not applied): run `tessera migrate` " +
        '(servers of the older version must be stopped or upgraded first)',
    });
    expect(applied(file)).not.toContain('0005_change_audit');
    await tesseraOk(env, 'migrate');
    expect(applied(file)).toContain('0005_change_audit');
    await tesseraOk(env, 'audience', 'add', 'https://api.example.com');
  });

  it('a store of a newer schema is refused', async () => {
    const dataDir = tempDir();
    const env = tesseraEnv({ TESSERA_DATA_DIR: dataDir });
    await tesseraOk(env, 'migrate');
    const db = new DatabaseSync(path.join(dataDir, 'tessera.db'));
    db.prepare('insert into tessera_migrations (name, timestamp) values (?, ?)').run(
      '9999_from_the_future',
      new Date().toISOString(),
    );
    db.close();
    const refused = await tessera(env, 'client', 'list');
    expect(refused).toMatchObject({
      code: 1,
      stdout: '',
      stderr:
        "tessera: the store's schema is newer than this tessera (9999_from_the_future): use the tessera that migrated it\n",
    });
  });
});
