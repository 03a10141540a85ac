/**
 * The runtime's clock (openRuntime's `now`, a parameter and not a setting): a server given one reads the time
 * from it wherever it reasons about time, so that a test moves time on instead of waiting for it. Here the
 * clock runs a day ahead of the wall clock, and every time the server hands out is a day ahead too.
 */
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenParams } from './helpers/provision.js';
import { testClock } from './helpers/clock.js';
import { postToken, startWithClient, type TestClient, type TestServer } from './helpers/server.js';

const API = 'https://api.example.com';
const DAY = 86_400_000;

describe('a server started with a clock', () => {
  const clock = testClock();
  clock.advance(DAY);
  let t: TestServer;
  let client: TestClient;
  let from: number;
  beforeAll(async () => {
    from = clock.now();
    ({ t, client } = await startWithClient(API, {}, undefined, { clock }));
  });
  afterAll(async () => t?.close());

  it('issues tokens at its time (iat, exp), and audits them at it', async () => {
    const answer = await postToken(t.url, tokenParams(client.id, client.secret, API));
    expect(answer.status).toBe(200);
    const { iat, exp } = decodeJwt(answer.body.access_token as string);
    expect(iat! * 1000).toBeGreaterThanOrEqual(Math.floor(from / 1000) * 1000);
    expect(iat! * 1000).toBeLessThanOrEqual(clock.now());
    expect(exp! - iat!).toBe(answer.body.expires_in);

    await t.server.runtime.audit.flush();
    const [issued] = await t.server.runtime.store.queryAuditEvents({ types: ['token.issued'], limit: 1 });
    expect(Date.parse(issued!.at)).toBeGreaterThanOrEqual(from);
    expect(Date.parse(issued!.at)).toBeLessThanOrEqual(clock.now());
  });

  it('stamps what the store records, and schedules its signing keys, at its time', async () => {
    const record = await t.server.runtime.store.findClient(client.id);
    expect(Date.parse(record!.createdAt)).toBeGreaterThanOrEqual(from);
    // The first keys sign from the start, a day ahead of the wall clock.
    const keys = await t.server.runtime.store.listSigningKeys();
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) {
      expect(Date.parse(key.createdAt)).toBeGreaterThanOrEqual(from);
      expect(Date.parse(key.activatesAt)).toBeGreaterThanOrEqual(from);
    }
  });

  it('times console sessions by it', () => {
    expect(t.server.runtime.sessionPolicy.now).toBe(clock.now);
  });
});
