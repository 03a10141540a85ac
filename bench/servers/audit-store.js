/* global setInterval */
// The audited ceiling's store (ceiling.js with BENCH_AUDIT_DIR): a worker thread with a SQLite connection of its
// own that inserts the events the server sends it, as Tessera's maintenance thread does (store/sqlite-maintenance.ts):
// the same table and indexes, WAL with synchronous = NORMAL, one transaction per batch, the console's per-minute
// token counts added to in it, a PASSIVE checkpoint every 250 ms. The events come as spool lines (one JSON array
// per line, Tessera's encodeRecord), inserted by one statement through json_each: the cheapest way to SQLite.
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

const db = new DatabaseSync(workerData.file);
db.exec(`
  PRAGMA journal_mode = WAL;
  PRAGMA synchronous = NORMAL;
  PRAGMA wal_autocheckpoint = 0;
  PRAGMA cache_size = -16384;
  CREATE TABLE audit_events (
    id integer PRIMARY KEY AUTOINCREMENT, at integer NOT NULL, type text NOT NULL, client_id text, audience text,
    jti text, reason text, source text, count integer, actor text, target text, changes text
  );
  CREATE INDEX audit_events_at_idx ON audit_events (at);
  CREATE INDEX audit_events_client_idx ON audit_events (client_id, at);
  CREATE TABLE token_counts (
    minute bigint PRIMARY KEY, issued bigint NOT NULL DEFAULT 0, refused bigint NOT NULL DEFAULT 0
  );
`);
const events = db.prepare(`
  INSERT INTO audit_events (at, type, client_id, audience, jti, reason, source, count)
  SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6, value ->> 7
  FROM json_each(?)`);
const counts = db.prepare(`
  INSERT INTO token_counts (minute, issued, refused)
  SELECT (value ->> 0) - (value ->> 0) % 60000, sum(value ->> 1 = 'token.issued'), sum(value ->> 1 <> 'token.issued')
  FROM json_each(?) WHERE true GROUP BY 1
  ON CONFLICT (minute) DO UPDATE SET issued = issued + excluded.issued, refused = refused + excluded.refused`);

setInterval(() => {
  try {
    db.exec('PRAGMA wal_checkpoint(PASSIVE)');
  } catch {
    // busy: the next round does it
  }
}, 250);

parentPort.on('message', (lines) => {
  const array = `[${lines.slice(0, -1).replaceAll('\n', ',')}]`;
  db.exec('BEGIN IMMEDIATE');
  events.run(array);
  counts.run(array);
  db.exec('COMMIT');
});
