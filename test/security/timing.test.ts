import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request } from 'node:http';
import { startWithClient, type TestClient, type TestServer } from '../helpers/server.js';

/**
 * INTERFACE.md: an unknown client and a known client with a wrong secret are indistinguishable in status,
 * body and time. Both take the same path (a cache or store lookup, then a SHA-256 and a constant-time
 * compare against the client's digest or a dummy one). Measured here over many interleaved requests on
 * keep-alive connections, warm (both answered from memory) and cold (both looked up in the store once).
 */

const API = 'https://api.example.com';
const ROUNDS = 400;

let ip = 0;
/** Each request from its own address, so the failed-attempt limits do not step in. */
const nextSource = () => `10.${(++ip >> 16) & 255}.${(ip >> 8) & 255}.${ip & 255}`;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}
const p90 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length * 0.9)]!;

describe('timing: unknown client vs wrong secret', () => {
  let t: TestServer;
  let client: TestClient;
  let agent: Agent;
  const cold: TestClient[] = [];

  beforeAll(async () => {
    ({ t, client } = await startWithClient(API, {
      TESSERA_TRUST_PROXY: 'loopback',
      TESSERA_CACHE_MAX: '100000',
    }));
    for (let i = 0; i < 100; i++) cold.push(await t.createClient([API]));
    // Only the first client is warm: the others have never been looked up.
    await t.server.runtime.directory.poll();
    agent = new Agent({ keepAlive: true, maxSockets: 1 });
  }, 60_000);
  afterAll(async () => {
    agent.destroy();
    await t.close();
  });

  function timed(id: string, secret: string): Promise<{ ms: number; status: number; body: string }> {
    const body = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: id,
      client_secret: secret,
      audience: API,
    });
    const { hostname, port } = new URL(t.url);
    return new Promise((resolve, reject) => {
      const started = process.hrtime.bigint();
      const req = request(
        {
          hostname,
          port,
          path: '/oauth/token',
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': nextSource() },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
          res.on('end', () =>
            resolve({
              ms: Number(process.hrtime.bigint() - started) / 1e6,
              status: res.statusCode!,
              body: text,
            }),
          );
        },
      );
      req.on('error', reject);
      req.end(body.toString());
    });
  }

  it('warm: the same answer in the same time', async () => {
    const unknownId = 'c0ffee00c0ffee00c0ffee00c0ffee00'; // a possible id that does not exist
    for (let i = 0; i < 50; i++) {
      await timed(unknownId, 'x');
      await timed(client.id, 'wrong');
    }
    const unknown: number[] = [];
    const wrong: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      // Interleaved, in alternating order, so drift on a shared machine hits both alike.
      const first = i % 2 === 0;
      const a = await timed(first ? unknownId : client.id, first ? 'x' : 'wrong');
      const b = await timed(first ? client.id : unknownId, first ? 'wrong' : 'x');
      expect([a.status, b.status]).toEqual([401, 401]);
      expect(a.body).toBe(b.body);
      (first ? unknown : wrong).push(a.ms);
      (first ? wrong : unknown).push(b.ms);
    }
    const figures = {
      unknown_median_ms: median(unknown),
      wrong_secret_median_ms: median(wrong),
      unknown_p90_ms: p90(unknown),
      wrong_secret_p90_ms: p90(wrong),
    };
    console.log('timing (warm)', JSON.stringify(figures));
    // A tolerance for a noisy 2-core machine; a real difference (a store round trip, a second hash) is larger.
    const gap = Math.abs(figures.unknown_median_ms - figures.wrong_secret_median_ms);
    expect(gap).toBeLessThan(Math.max(0.1, 0.2 * figures.wrong_secret_median_ms));
  }, 60_000);

  it('cold: a first lookup of an unknown id costs what a first lookup of a known one does', async () => {
    const unknown: number[] = [];
    const wrong: number[] = [];
    for (let i = 0; i < cold.length; i++) {
      const first = i % 2 === 0;
      const known = cold[i]!.id;
      const made = `deadbeef${String(i).padStart(24, '0')}`;
      const a = await timed(first ? made : known, 'wrong');
      const b = await timed(first ? known : made, 'wrong');
      expect([a.status, b.status]).toEqual([401, 401]);
      (first ? unknown : wrong).push(a.ms);
      (first ? wrong : unknown).push(b.ms);
    }
    const figures = { unknown_median_ms: median(unknown), wrong_secret_median_ms: median(wrong) };
    console.log('timing (cold, one store lookup each)', JSON.stringify(figures));
    const gap = Math.abs(figures.unknown_median_ms - figures.wrong_secret_median_ms);
    expect(gap).toBeLessThan(Math.max(0.15, 0.25 * figures.wrong_secret_median_ms));
  }, 60_000);
});
