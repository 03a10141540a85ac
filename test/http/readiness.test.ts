import { afterEach, describe, expect, it } from 'vitest';
import type { Change } from '../../src/store/types.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sleep } from '../helpers/wait.js';

/**
 * /readyz and the change feed: the feed counts as stale only after three poll intervals (at least 10 s, at
 * most TESSERA_STALE_WINDOW) without a good read, so that a healthy instance polling every 10 s does not
 * flap out of its load balancer's rotation between two reads.
 */

const READY = { status: 'ready', checks: { store: 'ok', signing_key: 'ok', change_feed: 'ok' } };
const STALE = { status: 'not_ready', checks: { store: 'ok', signing_key: 'ok', change_feed: 'stale' } };

async function readyz(t: TestServer): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${t.url}/readyz`);
  return { status: response.status, body: await response.json() };
}

/**
 * Replaces the running server's change-feed read (the store is the directory's own object when metrics are
 * off) with `read`, which gets the original.
 */
function interceptFeed(
  t: TestServer,
  read: (original: () => Promise<Change[]>) => Promise<Change[]>,
  calls: number[],
): void {
  const store = t.server.runtime.store;
  const original = store.changesSince.bind(store);
  store.changesSince = (after, limit) => {
    calls.push(Date.now());
    return read(() => original(after, limit));
  };
}

describe('/readyz judges the change feed against the poll interval', () => {
  let t: TestServer | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('TESSERA_CHANGE_POLL_MS=10000, reads that take 1.5 s: ready throughout 12.5 s, across a read of the feed', async () => {
    t = await startTestServer({ TESSERA_CHANGE_POLL_MS: '10000', TESSERA_METRICS: 'false' });
    expect(t.config.changePollMs).toBe(10_000);
    const reads: number[] = [];
    // A slow store, still healthy: every read of the feed takes 1.5 s. With the fixed 10 s of before, the
    // feed looked stale from 10 s after the server was built until its first read ended, 1.5 s later.
    interceptFeed(t, async (original) => (await sleep(1500), original()), reads);
    const started = Date.now();
    const seen: { status: number; body: unknown }[] = [];
    while (Date.now() - started < 12_500) {
      seen.push(await readyz(t));
      await sleep(250);
    }
    // The timer read the feed once meanwhile (at 10 s), and that read ended before the probing did.
    expect(reads.length).toBe(1);
    expect(reads[0]! - started).toBeLessThan(11_000);
    expect(seen.length).toBeGreaterThan(40);
    expect(seen.filter((probe) => probe.status !== 200)).toEqual([]);
    expect(new Set(seen.map((probe) => JSON.stringify(probe.body)))).toEqual(
      new Set([JSON.stringify(READY)]),
    );
  }, 20_000);

  it('a feed that cannot be read is stale once TESSERA_STALE_WINDOW (3 s, below three polls of 1 s and 10 s) has passed, not before', async () => {
    t = await startTestServer({
      TESSERA_CHANGE_POLL_MS: '1000',
      TESSERA_STALE_WINDOW: '3',
      TESSERA_METRICS: 'false',
    });
    await t.sync();
    const lastRead = Date.now();
    const reads: number[] = [];
    // The feed fails from here on; the store itself still answers (store: ok).
    interceptFeed(t, () => Promise.reject(new Error('change feed unreadable')), reads);
    await sleep(2000 - (Date.now() - lastRead));
    expect(await readyz(t)).toEqual({ status: 200, body: READY });
    await sleep(3300 - (Date.now() - lastRead));
    expect(await readyz(t)).toEqual({ status: 503, body: STALE });
    // The timer kept trying meanwhile (every second), and every try failed.
    expect(reads.length).toBeGreaterThanOrEqual(2);
  }, 15_000);
});
