import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The machine's PostgreSQL (trust auth). A test run makes its own database and drops it after. */
export const PG_ADMIN_URL = process.env.TESSERA_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function admin<T>(run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

export interface TestDatabase {
  url: string;
  /** A connection URL whose search_path is a fresh schema of this database: a fresh, empty store. */
  freshSchema(): Promise<string>;
  drop(): Promise<void>;
}

/** CREATE DATABASE tessera_test_<random>; drop() removes it, ending any connection still open. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `tessera_test_${randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = withDatabase(PG_ADMIN_URL, name);
  return {
    url,
    async freshSchema() {
      const schema = `s_${randomBytes(6).toString('hex')}`;
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`CREATE SCHEMA ${schema}`);
      await client.end();
      const u = new URL(url);
      u.searchParams.set('options', `-c search_path=${schema}`);
      return u.toString();
    },
    async drop() {
      await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}
