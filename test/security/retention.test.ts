/**
 * TESSERA_AUDIT_RETENTION: events older than the retention are deleted, the others kept; and deleting a
 * million of them on SQLite (where every statement runs on the server's own thread) never holds a request up
 * for more than a few milliseconds: the deletes go in small statements with pauses between them.
 *
 * Black box: a spawned `tessera serve` (dist/; `npm test` builds it) on a store filled beforehand.
 */
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite.js';
import { keepAliveLoad } from '../helpers/load.js';
import { provisionClient } from '../helpers/provision.js';
import { tokenRequest } from '../helpers/raw-http.js';
import { startServe, tesseraEnv, type Serve } from '../helpers/process.js';
import { freePort, tempDir } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const AUDIENCE = 'https://api.example.com';
const DAY = 86_400_000;

const running: Serve[] = [];
afterEach(async () => {
  for (const serve of running.splice(0)) await serve.stop('SIGKILL');
});

/** A store with an audience, a client, and `expired` events two days old plus `recent` ones of the last minute. */
async function filledStore(dataDir: string, expired: number, recent: number) {
  const file = path.join(dataDir, 'tessera.db');
  const store = openSqliteStore(file);
  const { id, form } = await provisionClient(store, AUDIENCE, 'c');
  await store.close();
  const db = new DatabaseSync(file);
  const insert = db.prepare(
    'insert into audit_events (at, type, client_id, audience, jti, reason, source) values (?, ?, ?, ?, ?, ?, ?)',
  );
  const now = Date.now();
  db.exec('begin');
  for (let i = 0; i < expired; i++)
    insert.run(
      now - 2 * DAY + Math.floor(i / 10),
      'token.issued',
      id,
      AUDIENCE,
      `old-${i}`,
      null,
      '10.0.0.1',
    );
  for (let i = 0; i < recent; i++)
    insert.run(now - 60_000 + i, 'token.issued', id, AUDIENCE, `recent-${i}`, null, '10.0.0.1');
  db.exec('commit');
  db.close();
  return { file, form };
}

describe('TESSERA_AUDIT_RETENTION', { timeout: 120_000 }, () => {
  it('deletes the events older than the retention, and only those', async () => {
    const dataDir = tempDir();
    const { file } = await filledStore(dataDir, 1000, 10);
    const serve = await startServe(
      tesseraEnv({
        TESSERA_DATA_DIR: dataDir,
        TESSERA_PORT: String(await freePort()),
        TESSERA_HOST: '127.0.0.1',
        TESSERA_AUDIT_RETENTION: '1d',
      }),
    );
    running.push(serve);
    const [line] = await serve.waitForLog('old audit events deleted', 1, 20_000);
    expect(line).toMatchObject({ pruned: 1000 });
    const store = openSqliteStore(file);
    try {
      // The token events (the server's first keys, made at its start, are events of their own).
      const left = await store.queryAuditEvents({ limit: 100, types: ['token.issued'] });
      expect(left.map((e) => e.jti).sort()).toEqual(
        Array.from({ length: 10 }, (_, i) => `recent-${i}`).sort(),
      );
    } finally {
      await store.close();
    }
  });

  it('a million expired events are deleted while requests never wait over 50 ms', async () => {
    const dataDir = tempDir();
    const { form } = await filledStore(dataDir, 1_000_000, 0);
    const port = await freePort();
    const serve = await startServe(
      tesseraEnv({
        TESSERA_DATA_DIR: dataDir,
        TESSERA_PORT: String(port),
        TESSERA_HOST: '127.0.0.1',
        TESSERA_AUDIT_RETENTION: '1d',
        TESSERA_LOG_LEVEL: 'warn',
      }),
    );
    running.push(serve);
    // Retention starts with the server; requests go on the whole time it deletes, at about 2 000 a second
    // (4 connections, one request each per 2 ms): a busy server, not a saturated one, so that what is measured
    // is what the deletes hold a request up, not the run queue of a 2-core machine shared with the load.
    const load = keepAliveLoad(port, tokenRequest(port, form), 4, { intervalMs: 2 });
    const started = Date.now();
    let done = false;
    await waitFor(
      async () => {
        const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        // The delete statements are timed like every store call; when none has run for a second, it is over.
        const count = Number(
          /tessera_store_operation_duration_seconds_count\{operation="pruneAuditEvents",outcome="ok"\} (\d+)/.exec(
            text,
          )?.[1] ?? 0,
        );
        done = count > 0 && !anyExpired(dataDir);
        return done;
      },
      100_000,
      500,
    );
    const result = await load.stop();
    const sorted = [...result.latencies].sort((a, b) => a - b);
    const worst = sorted.at(-1)!;
    const over = sorted.filter((ms) => ms > 50).length;
    console.log(
      `retention of 1 000 000 events took ${Date.now() - started} ms; ${result.latencies.length} requests meanwhile, ` +
        `p50 ${sorted[Math.floor(sorted.length / 2)]!.toFixed(2)} ms, p99 ${sorted[Math.floor(sorted.length * 0.99)]!.toFixed(2)} ms, worst ${worst.toFixed(2)} ms, ${over} over 50 ms`,
    );
    expect([...result.statuses.keys()]).toEqual([200]);
    expect(result.latencies.length).toBeGreaterThan(1000);
    expect(worst).toBeLessThan(50);
  });
});

/** Whether expired events are still in the store (read beside the server, as the CLI would: one index seek). */
function anyExpired(dataDir: string): boolean {
  const db = new DatabaseSync(path.join(dataDir, 'tessera.db'), { readOnly: true });
  try {
    return db.prepare('select 1 from audit_events where at < ? limit 1').get(Date.now() - DAY) !== undefined;
  } finally {
    db.close();
  }
}
