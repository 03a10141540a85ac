/* global process, console, URL */
// Stored bytes per audit event, on each engine: `npm run build && node bench/audit-bytes.js [--events N]`.
// Writes N events (nine in ten issued, one in ten refused, with ids, URLs and addresses shaped like real
// ones) through the store's own batched insert into a fresh SQLite file and a fresh PostgreSQL database,
// then reports the table's and each index's size divided by N.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { openPostgresStore } from '../dist/store/postgres.js';
import { openSqliteStore } from '../dist/store/sqlite.js';
import { AUDIT_BATCH } from '../dist/store/types.js';

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '200000' },
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
  },
});
const N = Number(values.events);

/** `count` events as the token endpoint records them, one second of time apart per 1 000. */
function events(count) {
  const clients = Array.from({ length: 50 }, () => randomBytes(16).toString('hex'));
  const start = Date.parse('2026-11-01T00:00:00Z');
  const list = [];
  for (let i = 0; i < count; i++) {
    const refused = i % 10 === 9;
    list.push({
      at: start + i,
      type: refused ? 'token.refused' : 'token.issued',
      clientId: clients[i % clients.length],
      audience: 'https://api.example.com',
      jti: refused ? null : randomBytes(16).toString('base64url'),
      reason: refused ? 'invalid_client: wrong secret' : null,
      source: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      count: null,
    });
  }
  return list;
}

async function fill(store, list) {
  for (let i = 0; i < list.length; i += AUDIT_BATCH)
    await store.appendAuditEvents(list.slice(i, i + AUDIT_BATCH));
}

async function sqlite(list) {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-audit-bytes-'));
  try {
    const file = join(dir, 'tessera.db');
    const store = openSqliteStore(file);
    await store.migrate();
    await fill(store, list);
    await store.close();
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(file);
    db.exec('VACUUM');
    const rows = db
      .prepare(
        `select name, sum(pgsize) as bytes from dbstat where name = 'audit_events' or name in
           (select name from sqlite_master where tbl_name = 'audit_events' and type = 'index') group by name`,
      )
      .all();
    db.close();
    return rows.map((r) => ({ relation: r.name, bytes: Number(r.bytes) }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function postgres(list) {
  const name = `tessera_bytes_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: values.pg });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = new URL(values.pg);
  url.pathname = `/${name}`;
  try {
    const store = openPostgresStore(url.toString());
    await store.migrate();
    await fill(store, list);
    await store.close();
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    await client.query('vacuum analyze audit_events');
    const { rows } = await client.query(
      `select c.relname as relation, pg_relation_size(c.oid) as bytes from pg_class c
        where c.relname = 'audit_events' or c.oid in
          (select indexrelid from pg_index where indrelid = 'audit_events'::regclass)`,
    );
    await client.end();
    return rows.map((r) => ({ relation: r.relation, bytes: Number(r.bytes) }));
  } finally {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}

const list = events(N);
for (const [engine, measure] of [
  ['sqlite', sqlite],
  ['postgres', postgres],
]) {
  let sizes;
  try {
    sizes = await measure(list);
  } catch (error) {
    console.log(`${engine}: skipped (${error.message})`);
    continue;
  }
  const total = sizes.reduce((sum, s) => sum + s.bytes, 0);
  console.log(`${engine}: ${(total / N).toFixed(1)} bytes per event over ${N} events`);
  for (const s of sizes) console.log(`  ${s.relation.padEnd(28)} ${(s.bytes / N).toFixed(1)}`);
}
process.exit(0);
