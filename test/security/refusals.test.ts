/**
 * Refusals that cost nothing (INTERFACE.md, "A blocked caller"): once a source is blocked for failed
 * attempts, whatever it sends is answered 429 from memory, with no store operation and no audit row or log
 * line of its own; the refusals are summed into one `token.throttled` event per caller and minute. A client
 * that presents its exact secret still gets its token from that very address. And an unknown id from a caller
 * not blocked yet costs no store lookup: the server holds every client id, and reads the change feed once
 * (in case the client was created a moment ago) before it answers.
 *
 * Black box: a spawned `tessera serve` (dist/; `npm test` builds it), its /metrics, its log and its store.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { keepAliveLoad } from '../helpers/load.js';
import { provisionClient, tokenForm } from '../helpers/provision.js';
import { tokenRequest } from '../helpers/raw-http.js';
import { startServe, tesseraEnv, type Serve } from '../helpers/process.js';
import { freePort, tempDir } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const AUDIENCE = 'https://api.example.com';
const ATTACKER = '203.0.113.50';

const running: Serve[] = [];
const stores: Store[] = [];
afterEach(async () => {
  for (const serve of running.splice(0)) await serve.stop('SIGKILL');
  for (const store of stores.splice(0)) await store.close();
});

/** Sum of the samples of one metric family in a Prometheus exposition, optionally only those matching. */
function metric(text: string, name: string, labels?: RegExp): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const [series, value] = [line.slice(0, line.lastIndexOf(' ')), line.slice(line.lastIndexOf(' ') + 1)];
    if (series !== name && !series.startsWith(`${name}{`)) continue;
    if (labels && !labels.test(series)) continue;
    sum += Number(value);
  }
  return sum;
}

async function setUp() {
  const dataDir = tempDir();
  const port = await freePort();
  const env = tesseraEnv({
    TESSERA_DATA_DIR: dataDir,
    TESSERA_PORT: String(port),
    TESSERA_HOST: '127.0.0.1',
    TESSERA_LOG_LEVEL: 'info',
    TESSERA_TRUST_PROXY: 'loopback',
    TESSERA_SHUTDOWN_DELAY: '0',
  });
  const store = openSqliteStore(path.join(dataDir, 'tessera.db'));
  stores.push(store);
  const { id, secret } = await provisionClient(store, AUDIENCE, 'good');
  const serve = await startServe(env);
  running.push(serve);
  const form = (clientId: string, clientSecret: string) => tokenForm(clientId, clientSecret, AUDIENCE);
  const post = async (body: string, source: string) => {
    const response = await fetch(`http://127.0.0.1:${port}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': source },
      body,
    });
    return {
      status: response.status,
      body: (await response.json()) as Record<string, unknown>,
      headers: response.headers,
    };
  };
  const scrape = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  /** Until the audit writer has caught up: no event waits in memory or on the spool. */
  const auditWritten = () =>
    waitFor(async () => metric(await scrape(), 'tessera_audit_events_queued') === 0, 10_000, 50);
  return { port, serve, store, good: { id, secret }, form, post, scrape, auditWritten };
}

const storeOperations = (text: string) => metric(text, 'tessera_store_operation_duration_seconds_count');

describe('a blocked source spraying client ids', { timeout: 90_000 }, () => {
  it('10 000 more requests: 429 from memory, under 100 store operations and audit rows, one summary event', async () => {
    const t = await setUp();
    // The good client is in the server's memory (it got a token from this very address before).
    expect((await t.post(t.form(t.good.id, t.good.secret), ATTACKER)).status).toBe(200);

    // 100 failures with made-up ids block the source (README: 100 failures in 5 minutes, 15 minutes' block).
    for (let i = 0; i < 100; i++)
      expect((await t.post(t.form(randomBytes(16).toString('hex'), 'x'), ATTACKER)).status).toBe(401);
    const blocked = await t.post(t.form(randomBytes(16).toString('hex'), 'x'), ATTACKER);
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toMatch(/^(89\d|900)$/);
    expect(blocked.body).toEqual({
      error: 'invalid_request',
      error_description: 'too many failed attempts; try again later',
    });
    await t.auditWritten();
    const rowsBefore = (await t.store.queryAuditEvents({ limit: 100_000 })).length;
    const before = await t.scrape();
    const opsBefore = storeOperations(before);
    const missesBefore = metric(before, 'tessera_client_cache_lookups_total', /result="miss"/);
    const logBefore = t.serve.logs.length;

    // The spray: every request a new id, a wrong secret for the good client, or junk, from the blocked source.
    let n = 0;
    const spray = () => {
      n++;
      const body =
        n % 3 === 0
          ? t.form(t.good.id, 'not-the-secret')
          : n % 3 === 1
            ? t.form(randomBytes(16).toString('hex'), randomBytes(8).toString('hex'))
            : 'grant_type=client_credentials&client_id=&audience=x';
      return tokenRequest(t.port, body, { 'X-Forwarded-For': ATTACKER });
    };
    const load = keepAliveLoad(t.port, spray, 20);
    const good: number[] = [];
    while (load.answered() < 10_000)
      good.push((await t.post(t.form(t.good.id, t.good.secret), ATTACKER)).status);
    const result = await load.stop();
    const refused = result.statuses.get(429) ?? 0;
    expect([...result.statuses.keys()]).toEqual([429]);
    expect(refused).toBeGreaterThanOrEqual(10_000);
    // Never locked out: the exact secret of a client in memory gets its token from the blocked address.
    expect(good.length).toBeGreaterThan(0);
    expect(new Set(good)).toEqual(new Set([200]));

    await t.auditWritten();
    const after = await t.scrape();
    const opsAfter = storeOperations(after);
    // The change feed's polls (2 a second) and the good client's audit writes are all there is.
    expect(opsAfter - opsBefore).toBeLessThan(100);
    // No store lookup for any sprayed id: misses did not move.
    expect(metric(after, 'tessera_client_cache_lookups_total', /result="miss"/)).toBe(missesBefore);
    const spray429Logs = t.serve.logs.slice(logBefore).filter((l) => l.msg === 'token refused');
    expect(spray429Logs).toEqual([]);

    // At shutdown the current minute's sum is recorded.
    expect((await t.serve.stop('SIGTERM')).code).toBe(0);
    const rows = await t.store.queryAuditEvents({ limit: 100_000 });
    const added = rows.length - rowsBefore;
    expect(added - good.length).toBeLessThan(100);
    const summaries = rows.filter((e) => e.type === 'token.throttled' && e.source === ATTACKER);
    expect(summaries.length).toBeGreaterThanOrEqual(1);
    expect(summaries.length).toBeLessThanOrEqual(2); // the spray may straddle a minute
    expect(summaries.reduce((sum, e) => sum + e.count!, 0)).toBe(refused + 1); // + the first 429 above
    expect(summaries[0]).toMatchObject({
      type: 'token.throttled',
      clientId: null,
      audience: null,
      jti: null,
      reason: 'invalid_request: too many failed attempts; try again later',
      source: ATTACKER,
    });
    expect(t.serve.logs.filter((l) => l.msg === 'token requests throttled').length).toBe(summaries.length);
    console.log(
      `blocked spray: ${refused} refused, ${opsAfter - opsBefore} store operations, ${added - good.length} audit rows besides the good client's ${good.length}`,
    );
  });

  it('an unknown id from a source not blocked yet costs no store lookup: one read of the feed, then memory', async () => {
    const t = await setUp();
    const lookups = async (result: string) =>
      metric(await t.scrape(), 'tessera_client_cache_lookups_total', new RegExp(`result="${result}"`));
    const findClients = async () =>
      metric(await t.scrape(), 'tessera_store_operation_duration_seconds_count', /operation="findClients"/);
    const [misses, unregistered, queries] = [
      await lookups('miss'),
      await lookups('unregistered'),
      await findClients(),
    ];
    const id = randomBytes(16).toString('hex');
    // 9 failures: under the per-client-and-source limit of 10.
    for (let i = 0; i < 9; i++) expect((await t.post(t.form(id, 'x'), '198.51.100.77')).status).toBe(401);
    expect((await lookups('miss')) - misses).toBe(0);
    expect((await findClients()) - queries).toBe(0);
    expect((await lookups('unregistered')) - unregistered).toBe(1);
    expect(await lookups('unknown_hit')).toBe(8);
  });
});
