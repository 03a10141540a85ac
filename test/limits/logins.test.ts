/**
 * The console's failed logins (limits/logins.ts, MANAGEMENT.md "Sessions"): counted per email (from any address)
 * and per address (whatever the emails), IPv6 by its /64; a block lasts its time by the injected clock. A login
 * is counted before its password is checked, so that logins begun at once check no more passwords than the
 * limit; one that succeeds, or is refused, gives its places back. In memory, and in Redis when configured
 * (shared by every instance, under the run's own key prefix).
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { FailedAttempts } from '../../src/limits/attempts.js';
import { LoginAttempts } from '../../src/limits/logins.js';
import { connectRedis, type SharedRedis } from '../../src/limits/redis.js';
import { dropPrefix, REDIS_URL, testPrefix } from '../helpers/redis.js';

/** Small limits, so that a test reaches them: 3 failures per email block 30 s, 5 per address block 120 s. */
const LIMITS = {
  perOperator: { failures: 3, windowSeconds: 600, blockSeconds: 30 },
  perSource: { failures: 5, windowSeconds: 600, blockSeconds: 120 },
};

const OPS = 'ops@example.com';

/** A login that gets to check its password (its count begun first, as sessions.login does), and fails. */
async function fail(limits: LoginAttempts, email: string, address: string): Promise<void> {
  const attempt = await limits.begin(email, address);
  expect(attempt.refusedFor, `${email} from ${address}`).toBe(0);
  await attempt.failed();
}

/** A LoginAttempts on a clock that stands still until moved. */
function attempts(options: { redis?: SharedRedis; keyPrefix?: string } = {}) {
  const clock = { now: 1_900_000_000_000 };
  const limits = new LoginAttempts({ ...LIMITS, ...options, now: () => clock.now });
  return { limits, clock };
}

describe('LoginAttempts: the defaults', () => {
  it('10 failures per email in 15 minutes block it 15 minutes; 20 per address in 15 minutes block it 15 minutes', () => {
    const config = loadConfig({});
    expect([config.attemptsLogin, config.attemptsLoginSource]).toEqual([
      { failures: 10, windowSeconds: 900, blockSeconds: 900 },
      { failures: 20, windowSeconds: 900, blockSeconds: 900 },
    ]);
  });
});

describe('LoginAttempts: which blocked logins the audit trail records', () => {
  it('the first of each address (by its /64) in each minute of the clock, and no other', () => {
    const { limits, clock } = attempts();
    clock.now = 1_900_000_040_000; // 20 s into a minute (1_900_000_020_000 is a minute's start)
    expect(limits.refusalToRecord('198.51.100.1')).toBe(true);
    expect(limits.refusalToRecord('198.51.100.1')).toBe(false);
    expect(limits.refusalToRecord('::ffff:198.51.100.1')).toBe(false);
    expect(limits.refusalToRecord('198.51.100.2')).toBe(true);
    expect(limits.refusalToRecord('2001:db8::1')).toBe(true);
    expect(limits.refusalToRecord('2001:db8::ffff')).toBe(false);
    clock.now += 39_999; // the same minute's last millisecond
    expect(limits.refusalToRecord('198.51.100.1')).toBe(false);
    clock.now += 1; // the next minute
    expect(limits.refusalToRecord('198.51.100.1')).toBe(true);
    expect(limits.refusalToRecord('198.51.100.1')).toBe(false);
  });
});

/** The same behaviour in memory and in Redis. */
function behaviour(name: string, options: () => { redis?: SharedRedis; keyPrefix?: string }): void {
  describe(`LoginAttempts ${name}`, () => {
    it('nothing is blocked before any failure', () => {
      const { limits } = attempts(options());
      expect(limits.blockedFor(OPS, '198.51.100.1')).toBe(0);
      expect(limits.blockedFor('', 'unknown')).toBe(0);
    });

    it('blocks an email after its limit, whatever the addresses the failures came from, from every address', async () => {
      const { limits } = attempts(options());
      await fail(limits, OPS, '198.51.100.1');
      await fail(limits, OPS, '198.51.100.2');
      expect(limits.blockedFor(OPS, '198.51.100.3')).toBe(0);
      await fail(limits, OPS, '2001:db8::1');
      // Blocked everywhere, even from an address that never failed, for the whole block time.
      for (const address of ['198.51.100.1', '198.51.100.3', '2001:db8:ffff::1', 'unknown'])
        expect(limits.blockedFor(OPS, address), address).toBe(30);
      // Another email from those addresses is not (each address failed once or twice: under its limit of 5).
      expect(limits.blockedFor('other@example.com', '198.51.100.1')).toBe(0);
      expect(limits.blockedFor('other@example.com', '2001:db8::1')).toBe(0);
    });

    it('blocks an address after its limit, whatever the emails, for every email; other addresses go on', async () => {
      const { limits } = attempts(options());
      const emails = ['a@example.com', 'b@example.com', 'c@example.com', 'd@example.com'];
      for (const email of emails) await fail(limits, email, '203.0.113.9');
      expect(limits.blockedFor('e@example.com', '203.0.113.9')).toBe(0);
      await fail(limits, 'e@example.com', '203.0.113.9');
      for (const email of [...emails, 'e@example.com', OPS, ''])
        expect(limits.blockedFor(email, '203.0.113.9'), email).toBe(120);
      // Each email failed once: from elsewhere, none of them is blocked.
      for (const email of emails) expect(limits.blockedFor(email, '203.0.113.10'), email).toBe(0);
    });

    it('a block ends after its time, by the injected clock; the longer of two blocks is the one answered', async () => {
      const { limits, clock } = attempts(options());
      for (let i = 0; i < 3; i++) await fail(limits, OPS, '198.51.100.7');
      expect(limits.blockedFor(OPS, '198.51.100.8')).toBe(30);
      clock.now += 28_500;
      expect(limits.blockedFor(OPS, '198.51.100.8')).toBe(2); // 1.5 s left: rounded up
      clock.now += 1499;
      expect(limits.blockedFor(OPS, '198.51.100.8')).toBe(1);
      clock.now += 1;
      expect(limits.blockedFor(OPS, '198.51.100.8')).toBe(0);

      // Now the address too: 2 more failures from it (5 in all) block it for 120 s, and the email again (30 s).
      await fail(limits, 'x@example.com', '198.51.100.7');
      await fail(limits, OPS, '198.51.100.7');
      expect(limits.blockedFor('x@example.com', '198.51.100.7')).toBe(120);
      expect(limits.blockedFor(OPS, '198.51.100.8')).toBe(30);
      expect(limits.blockedFor(OPS, '198.51.100.7')).toBe(120);
      clock.now += 30_000;
      expect(limits.blockedFor(OPS, '198.51.100.8')).toBe(0);
      expect(limits.blockedFor(OPS, '198.51.100.7')).toBe(90);
      clock.now += 90_000;
      expect(limits.blockedFor(OPS, '198.51.100.7')).toBe(0);
      expect(limits.blockedFor('x@example.com', '198.51.100.7')).toBe(0);
    });

    it('a burst: of 12 logins begun at once for one email, with a limit of 3, 3 may check a password and 9 are refused', async () => {
      const { limits } = attempts(options());
      // Each from another address: only the email's limit is reached.
      const begun = await Promise.all(
        Array.from({ length: 12 }, (_, i) => limits.begin(OPS, `198.51.100.${100 + i}`)),
      );
      const admitted = begun.filter((a) => a.refusedFor === 0);
      expect(admitted).toHaveLength(3);
      // Refused for as long as a block by the email's limit would last: the places are taken by logins under way.
      expect(begun.filter((a) => a.refusedFor > 0).map((a) => a.refusedFor)).toEqual(Array(9).fill(30));
      // Not blocked while they are under way (one of them may have the right password)...
      expect(limits.blockedFor(OPS, '198.51.100.99')).toBe(0);
      const late = await limits.begin(OPS, '198.51.100.98');
      expect(late.refusedFor).toBe(30);
      // ...blocked once the three have failed.
      await Promise.all(admitted.map((a) => a.failed()));
      expect(limits.blockedFor(OPS, '198.51.100.99')).toBe(30);
      // The refused logins are no failures: their addresses took no place (5 more failures block one, not 4).
      for (let i = 0; i < 4; i++) await fail(limits, `x${i}@example.com`, '198.51.100.111');
      expect(limits.blockedFor('y@example.com', '198.51.100.111')).toBe(0);
      await fail(limits, 'x4@example.com', '198.51.100.111');
      expect(limits.blockedFor('y@example.com', '198.51.100.111')).toBe(120);
    });

    it('a burst from one address for many emails, with a limit of 5 there: 5 may check a password', async () => {
      const { limits } = attempts(options());
      const begun = await Promise.all(
        Array.from({ length: 12 }, (_, i) => limits.begin(`spray${i}@example.com`, '203.0.113.30')),
      );
      expect(begun.map((a) => a.refusedFor).sort((x, y) => x - y)).toEqual([
        ...Array<number>(5).fill(0),
        ...Array<number>(7).fill(120),
      ]);
      await Promise.all(begun.map((a) => a.failed()));
      expect(limits.blockedFor(OPS, '203.0.113.30')).toBe(120);
      // The emails refused there took no place: each may still fail twice elsewhere before its limit of 3.
      for (const [i, a] of begun.entries())
        if (a.refusedFor > 0) {
          await fail(limits, `spray${i}@example.com`, `203.0.113.${40 + i}`);
          await fail(limits, `spray${i}@example.com`, `203.0.113.${60 + i}`);
          expect(limits.blockedFor(`spray${i}@example.com`, '203.0.113.99')).toBe(0);
        }
    });

    it('a login that succeeds below the limit gives its places back: the limit still counts failures only', async () => {
      const { limits } = attempts(options());
      await fail(limits, OPS, '198.51.100.40');
      await fail(limits, OPS, '198.51.100.40');
      const right = await limits.begin(OPS, '198.51.100.40');
      expect(right.refusedFor).toBe(0);
      await right.release();
      // The third failure is the limit's: had the success kept its place, this login would have been refused.
      await fail(limits, OPS, '198.51.100.40');
      expect(limits.blockedFor(OPS, '198.51.100.41')).toBe(30);
      // The address counted three failures, not four: two more block it.
      await fail(limits, 'z@example.com', '198.51.100.40');
      expect(limits.blockedFor('w@example.com', '198.51.100.40')).toBe(0);
      await fail(limits, 'w@example.com', '198.51.100.40');
      expect(limits.blockedFor('v@example.com', '198.51.100.40')).toBe(120);
    });

    it('a blocked key refuses a login begun for it, for the rest of the block, and counts nothing; after it, one login at a time', async () => {
      const { limits, clock } = attempts(options());
      for (let i = 0; i < 3; i++) await fail(limits, OPS, `198.51.100.${50 + i}`);
      clock.now += 10_000;
      expect((await limits.begin(OPS, '198.51.100.53')).refusedFor).toBe(20);
      clock.now += 20_000;
      expect(limits.blockedFor(OPS, '198.51.100.53')).toBe(0);
      // The block is over and the window is not: one place, as one failure would block again.
      const [first, second] = await Promise.all([
        limits.begin(OPS, '198.51.100.53'),
        limits.begin(OPS, '198.51.100.54'),
      ]);
      expect([first!.refusedFor, second!.refusedFor]).toEqual([0, 30]);
      await first!.failed();
      expect(limits.blockedFor(OPS, '198.51.100.55')).toBe(30);
      // That address failed once, the other never: the refusals and the block took no place of theirs.
      for (let i = 0; i < 4; i++) await fail(limits, `a${i}@example.com`, '198.51.100.54');
      expect(limits.blockedFor('b@example.com', '198.51.100.54')).toBe(0);
      for (let i = 0; i < 3; i++) await fail(limits, `a${i}@example.com`, '198.51.100.53');
      expect(limits.blockedFor('b@example.com', '198.51.100.53')).toBe(0);
    });

    it('counts IPv6 addresses by their /64, and an IPv4-mapped address as the IPv4 one', async () => {
      const { limits } = attempts(options());
      // Five addresses of one /64, written five ways, each with another email.
      const same = [
        '2001:db8:1:2::1',
        '2001:db8:1:2::2',
        '2001:DB8:1:2:ffff:ffff:ffff:ffff',
        '2001:0db8:0001:0002:0:0:0:9',
        '2001:db8:1:2:a:b:c:d',
      ];
      for (const [i, address] of same.slice(0, 4).entries()) await fail(limits, `u${i}@example.com`, address);
      expect(limits.blockedFor('v@example.com', '2001:db8:1:2::77')).toBe(0);
      await fail(limits, 'u4@example.com', same[4]!);
      expect(limits.blockedFor('v@example.com', '2001:db8:1:2::77')).toBe(120);
      expect(limits.blockedFor('v@example.com', '2001:db8:1:2:ffff::')).toBe(120);
      // The next /64 and another prefix are other addresses.
      expect(limits.blockedFor('v@example.com', '2001:db8:1:3::1')).toBe(0);
      expect(limits.blockedFor('v@example.com', '2001:db8::1')).toBe(0);

      for (let i = 0; i < 4; i++) await fail(limits, `w${i}@example.com`, '::ffff:198.51.100.20');
      await fail(limits, 'w4@example.com', '198.51.100.20');
      expect(limits.blockedFor('v@example.com', '198.51.100.20')).toBe(120);
      expect(limits.blockedFor('v@example.com', '::ffff:198.51.100.20')).toBe(120);
      expect(limits.blockedFor('v@example.com', '198.51.100.21')).toBe(0);
    });
  });
}

behaviour('in memory', () => ({}));

describe('with Redis', () => {
  const prefix = testPrefix();
  let redis: SharedRedis;

  beforeAll(async () => {
    redis = connectRedis(REDIS_URL, { logger: pino({ level: 'silent' }), keyPrefix: prefix, timeoutMs: 500 });
    await new Promise<void>((resolve) =>
      redis.client.status === 'ready' ? resolve() : redis.client.once('ready', resolve),
    );
  });
  afterAll(async () => {
    await redis?.close();
    await dropPrefix(prefix);
  });

  /** Every key under this run's prefix but the breaker's probe, with its count. */
  async function keys(): Promise<Record<string, string | null>> {
    const found = (await redis.client.keys(`${prefix}:*`)).filter((k) => k !== `${prefix}:probe`).sort();
    const values = await Promise.all(found.map((k) => redis.client.get(k)));
    return Object.fromEntries(found.map((k, i) => [k, values[i]!]));
  }

  // Each test under its own prefix (below the run's), so that counts never carry from one test to another.
  let n = 0;
  behaviour('in Redis', () => ({ redis, keyPrefix: `${prefix}:t${++n}` }));

  it('counts under <prefix>:fail:login:<email> and <prefix>:fail:login-source:<address>, with the window as TTL', async () => {
    const keyPrefix = `${prefix}:keys`;
    const { limits } = attempts({ redis, keyPrefix });
    await fail(limits, OPS, '198.51.100.1');
    await fail(limits, OPS, '2001:db8:1:2::5');
    await fail(limits, 'other@example.com', '198.51.100.1');
    const mine = Object.fromEntries(Object.entries(await keys()).filter(([k]) => k.startsWith(keyPrefix)));
    expect(mine).toEqual({
      [`${keyPrefix}:fail:login-source:198.51.100.1`]: '2',
      [`${keyPrefix}:fail:login-source:2001:db8:1:2::/64`]: '1',
      [`${keyPrefix}:fail:login:ops@example.com`]: '2',
      [`${keyPrefix}:fail:login:other@example.com`]: '1',
    });
    const ttl = await redis.client.pttl(`${keyPrefix}:fail:login:ops@example.com`);
    expect(ttl).toBeGreaterThan(590_000);
    expect(ttl).toBeLessThanOrEqual(600_000);
  });

  it('a burst of 12 for one email, 3 places: 3 counted while under way, the refused taking none (INCR, then given back)', async () => {
    const keyPrefix = `${prefix}:burst`;
    const { limits } = attempts({ redis, keyPrefix });
    const begun = await Promise.all(
      Array.from({ length: 12 }, (_, i) => limits.begin(OPS, `198.51.100.${100 + i}`)),
    );
    const admitted = begun.filter((a) => a.refusedFor === 0);
    expect(admitted).toHaveLength(3);
    // Under way: the three places, and the nine refused gave theirs back.
    expect(await redis.client.get(`${keyPrefix}:fail:login:${OPS}`)).toBe('3');
    await Promise.all(admitted.map((a) => a.failed()));
    expect(limits.blockedFor(OPS, '198.51.100.99')).toBe(30);
    // Three failures, the one that blocked answered by its block (its place given back).
    expect(await redis.client.get(`${keyPrefix}:fail:login:${OPS}`)).toBe('2');
    const sources = Object.entries(await keys())
      .filter(([k]) => k.startsWith(`${keyPrefix}:fail:login-source:`))
      .map(([, v]) => v)
      .sort();
    // Three addresses failed once; the others' counts went up and back down.
    expect(sources).toEqual([...Array<string>(9).fill('0'), '1', '1', '1']);
  });

  it("without a key prefix of its own, uses the Redis connection's (TESSERA_REDIS_PREFIX)", async () => {
    const { limits } = attempts({ redis });
    await fail(limits, 'prefix-check@example.com', '192.0.2.250');
    expect(await redis.client.get(`${prefix}:fail:login:prefix-check@example.com`)).toBe('1');
    expect(await redis.client.get(`${prefix}:fail:login-source:192.0.2.250`)).toBe('1');
    expect(await redis.client.exists('tessera:fail:login:prefix-check@example.com')).toBe(0);
  });

  it('two instances share the counts: failures at A and at B add up; the one that reaches the limit blocks, the other learns at its next failure', async () => {
    const keyPrefix = `${prefix}:shared`;
    const a = attempts({ redis, keyPrefix });
    const b = attempts({ redis, keyPrefix });
    await fail(a.limits, OPS, '198.51.100.1');
    await fail(b.limits, OPS, '198.51.100.2');
    expect(a.limits.blockedFor(OPS, '198.51.100.3')).toBe(0);
    expect(b.limits.blockedFor(OPS, '198.51.100.3')).toBe(0);
    await fail(b.limits, OPS, '198.51.100.3');
    expect(b.limits.blockedFor(OPS, '198.51.100.4')).toBe(30);
    // Blocks are kept in memory: A has not seen this one yet...
    expect(a.limits.blockedFor(OPS, '198.51.100.4')).toBe(0);
    // ...until its own next failure, the fourth: the one that blocked at B gave its place back (a block answers
    // it), so A's attempt takes the limit's last place again, checks its password, fails and blocks at A.
    await fail(a.limits, OPS, '198.51.100.4');
    expect(a.limits.blockedFor(OPS, '198.51.100.5')).toBe(30);
    // Four failures, two of them answered by a block.
    expect(await redis.client.get(`${keyPrefix}:fail:login:${OPS}`)).toBe('2');
  });

  it('login failures are not the token endpoint’s: an address blocked for logins is not for client authentication', async () => {
    const keyPrefix = `${prefix}:apart`;
    const { limits } = attempts({ redis, keyPrefix });
    const tokens = new FailedAttempts({
      redis,
      keyPrefix,
      perClientAndSource: { failures: 3, windowSeconds: 600, blockSeconds: 30 },
      perSource: { failures: 5, windowSeconds: 600, blockSeconds: 120 },
    });
    for (let i = 0; i < 5; i++) await fail(limits, `u${i}@example.com`, '203.0.113.50');
    expect(limits.blockedFor(OPS, '203.0.113.50')).toBe(120);
    expect(tokens.blockedFor('svc', '203.0.113.50')).toBe(0);
    expect(await redis.client.exists(`${keyPrefix}:fail:source:203.0.113.50`)).toBe(0);
    // And the token endpoint's failures are not logins.
    for (let i = 0; i < 5; i++) await tokens.failed(`svc-${i}`, '203.0.113.51');
    expect(tokens.blockedFor('svc', '203.0.113.51')).toBe(120);
    expect(limits.blockedFor(OPS, '203.0.113.51')).toBe(0);
  });

  it('counts in memory while the breaker is open, and blocks all the same', async () => {
    const keyPrefix = `${prefix}:outage`;
    const { limits } = attempts({ redis, keyPrefix });
    redis.breaker.failed(new Error('test: Redis is away'));
    try {
      for (let i = 0; i < 3; i++) await fail(limits, OPS, '198.51.100.60');
      expect(limits.blockedFor(OPS, '198.51.100.61')).toBe(30);
      expect(await redis.client.exists(`${keyPrefix}:fail:login:${OPS}`)).toBe(0);
    } finally {
      redis.breaker.ready();
    }
  });
});
