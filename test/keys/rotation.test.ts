import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { keyState, selectKeys } from '../../src/keys/lifecycle.js';
import { parseMasterKey } from '../../src/keys/master-key.js';
import { generateSigningKey, planFirstKey, planRetire, planRotation } from '../../src/keys/rotation.js';
import { KeyRotator } from '../../src/keys/rotator.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { SigningKey, Store } from '../../src/store/types.js';
import { clockAt } from '../helpers/clock.js';

const T = Date.parse('2026-01-01T00:00:00.000Z');
const MIN = 60_000;
const DAY = 86_400_000;
const TTL = DAY; // the longest a token may live
const master = parseMasterKey(randomBytes(32).toString('base64'));

const iso = (ms: number) => new Date(ms).toISOString();
/** A key row without real key material: the plans and the lifecycle only read kid, alg and times. */
const row = (
  kid: string,
  activatesAt: number,
  retiredAt: number | null = null,
  alg = 'ES256',
): SigningKey => ({
  kid,
  alg: alg as SigningKey['alg'],
  publicJwk: '{}',
  privateJwkSealed: '',
  createdAt: iso(activatesAt),
  activatesAt: iso(activatesAt),
  retiredAt: retiredAt === null ? null : iso(retiredAt),
});

describe('selectKeys and keyState', () => {
  const old = row('old', T - 40 * DAY, T - 10 * DAY); // retired long ago: expired
  const prev = row('prev', T - 30 * DAY, T - 1000); // retired a second ago: still published
  const cur = row('cur', T - 1000);
  const next = row('next', T + 10 * MIN);

  it('publishes everything but expired keys, signs with the latest activated one, and knows when that changes', () => {
    const selection = selectKeys([old, prev, cur, next], T, TTL);
    expect(selection.published.map((k) => k.kid)).toEqual(['prev', 'cur', 'next']);
    expect(selection.active.get('ES256')?.kid).toBe('cur');
    expect(selection.changesAt).toBe(T + 10 * MIN);
    expect([old, prev, cur, next].map((k) => keyState(k, selection, T))).toEqual([
      'expired',
      'retired',
      'active',
      'next',
    ]);
  });

  it('at the next key activation, it signs; a retired key leaves the JWKS when its last token expires', () => {
    const later = selectKeys([prev, cur, next], T + 10 * MIN, TTL);
    expect(later.active.get('ES256')?.kid).toBe('next');
    expect(keyState(cur, later, T + 10 * MIN)).toBe('superseded');
    const expired = selectKeys([prev, cur, next], T - 1000 + TTL, TTL);
    expect(expired.published.map((k) => k.kid)).toEqual(['cur', 'next']);
  });

  it('a key with a retirement scheduled signs until then', () => {
    const retiring = row('retiring', T - DAY, T + 5 * MIN);
    expect(selectKeys([retiring], T, TTL).active.get('ES256')?.kid).toBe('retiring');
    expect(selectKeys([retiring], T + 5 * MIN, TTL).active.size).toBe(0);
    expect(selectKeys([retiring], T, TTL).changesAt).toBe(T + 5 * MIN);
  });
});

describe('planFirstKey', () => {
  it('inserts when no key of the algorithm signs now', () => {
    const candidate = row('new', T);
    expect(planFirstKey(candidate, () => T)([row('rsa', T - DAY, null, 'RS256')])).toEqual({
      insert: candidate,
    });
    expect(planFirstKey(candidate, () => T)([row('future', T + MIN)])).toEqual({ insert: candidate });
  });

  it('does nothing when a key signs now, judged by the clock when the plan runs (inside the lock)', () => {
    // Another instance inserted its first key while this one was generating (at T): at plan time it signs.
    const theirs = row('theirs', T + 500);
    expect(planFirstKey(row('mine', T), () => T + 1000)([theirs])).toBeUndefined();
  });
});

describe('planRotation', () => {
  it('publishes the next key and schedules the current one to retire when it activates', () => {
    const next = row('next', T + 10 * MIN);
    expect(planRotation(next, T)([row('cur', T - DAY)])).toEqual({
      insert: next,
      update: [{ kid: 'cur', retiredAt: next.activatesAt }],
    });
  });

  it('does nothing when a next key is already scheduled (another instance rotated)', () => {
    expect(
      planRotation(row('mine', T + 10 * MIN), T)([row('cur', T - DAY), row('theirs', T + 9 * MIN)]),
    ).toBeUndefined();
  });

  it('does not touch other algorithms', () => {
    const next = row('next', T + 10 * MIN);
    expect(planRotation(next, T)([row('rsa', T - DAY, null, 'RS256')])).toEqual({ insert: next, update: [] });
  });
});

describe('planRetire', () => {
  const replacement = row('replacement', T);

  it('retires the signing key now and brings the scheduled next key forward', () => {
    const change = planRetire('cur', replacement, T, TTL)([row('cur', T - DAY), row('next', T + 10 * MIN)]);
    expect(change).toEqual({
      update: [
        { kid: 'cur', retiredAt: iso(T) },
        { kid: 'next', activatesAt: iso(T) },
      ],
    });
  });

  it('retires the signing key now and inserts the replacement when nothing is scheduled', () => {
    expect(planRetire('cur', replacement, T, TTL)([row('cur', T - DAY)])).toEqual({
      update: [{ kid: 'cur', retiredAt: iso(T) }],
      insert: replacement,
    });
  });

  it('retires a scheduled key without replacing anything, and ignores an already retired one', () => {
    expect(planRetire('next', replacement, T, TTL)([row('cur', T - DAY), row('next', T + MIN)])).toEqual({
      update: [{ kid: 'next', retiredAt: iso(T) }],
    });
    expect(planRetire('gone', replacement, T, TTL)([row('gone', T - DAY, T - MIN)])).toBeUndefined();
  });

  it('withdrawing a scheduled key cancels the handover: the current key keeps signing, no unpublished key signs', () => {
    const next = row('next', T + 10 * MIN);
    const current = row('cur', T - DAY, T + 10 * MIN); // scheduled to retire when `next` activates
    expect(planRetire('next', replacement, T, TTL)([current, next])).toEqual({
      update: [
        { kid: 'next', retiredAt: iso(T) },
        { kid: 'cur', retiredAt: null },
      ],
    });
  });

  it('refuses an unknown kid', () => {
    expect(() => planRetire('nope', replacement, T, TTL)([])).toThrow('signing key nope does not exist');
  });
});

describe('KeyRotator', () => {
  let dir: string;
  let store: Store;
  let now: number;
  const rotated: string[] = [];

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'tessera-rotator-'));
    store = openSqliteStore(path.join(dir, 'tessera.db'));
    await store.migrate();
    now = T;
    rotated.length = 0;
    const first = await generateSigningKey('ES256', master, T, T);
    await store.changeSigningKeys(() => ({ insert: first }));
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const rotator = () =>
    new KeyRotator(store, master, {
      intervalMs: 30 * DAY,
      publishAheadMs: 10 * MIN,
      maxTokenTtlMs: TTL,
      clock: clockAt(() => now),
      onRotated: (alg) => rotated.push(alg),
      onError: (error) => {
        throw error;
      },
    });

  it('does nothing before the interval has passed', async () => {
    now = T + 30 * DAY - 1;
    await rotator().check();
    expect(rotated).toEqual([]);
    expect(await store.listSigningKeys()).toHaveLength(1);
  });

  it('schedules a successor once due, published ahead, and only once however many instances check', async () => {
    now = T + 30 * DAY;
    await Promise.all([rotator().check(), rotator().check(), rotator().check()]);
    expect(rotated).toEqual(['ES256']);
    const keys = await store.listSigningKeys();
    expect(keys).toHaveLength(2);
    const [current, next] = keys as [SigningKey, SigningKey];
    expect(next.activatesAt).toBe(iso(now + 10 * MIN));
    expect(current.retiredAt).toBe(next.activatesAt);
    // Until it activates, the current key still signs and the next one is only published.
    const selection = selectKeys(keys, now, TTL);
    expect(selection.active.get('ES256')?.kid).toBe(current.kid);
    expect(selection.published.map((k) => k.kid)).toEqual([current.kid, next.kid]);
  });
});
