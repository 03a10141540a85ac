import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBE_BACKOFF_MS, REDIS_OUTAGE, RedisBreaker, type Timers } from '../../src/limits/breaker.js';
import { connectRedis, type SharedRedis } from '../../src/limits/redis.js';
import { IssuanceQuotas } from '../../src/limits/quotas.js';
import { throwawayRedis, type ThrowawayRedis } from '../helpers/redis.js';
import { sleep, waitFor } from '../helpers/wait.js';

/**
 * The Redis circuit breaker's states (src/limits/breaker.ts), on a clock the test moves: closed (counts go
 * to Redis), open (counts in memory at once, Redis probed after a growing back-off), and back.
 */

/** How long a count waits for Redis: TESSERA_REDIS_TIMEOUT_MS, at its default (test/config.test.ts). */
const REDIS_TIMEOUT_MS = 100;

/** Timers on a clock that moves only when the test says so. */
class ManualClock implements Timers {
  now = 1_000_000;
  private seq = 0;
  private pending: { at: number; seq: number; run: () => void; cancelled: boolean }[] = [];

  after(ms: number, run: () => void): () => void {
    const timer = { at: this.now + ms, seq: this.seq++, run, cancelled: false };
    this.pending.push(timer);
    return () => (timer.cancelled = true);
  }

  /** Moves the clock forward by `ms`, running what falls due in order (and what that settles). */
  async advance(ms: number): Promise<void> {
    const until = this.now + ms;
    for (;;) {
      await settle();
      const due = this.pending
        .filter((t) => !t.cancelled && t.at <= until)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (due === undefined) break;
      due.cancelled = true;
      this.now = due.at;
      due.run();
    }
    this.now = until;
    await settle();
  }
}

/** Lets every promise callback that can run, run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A promise the test resolves or rejects. */
function deferred<T = unknown>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

interface Line {
  level: number;
  msg: string;
  failingForMs?: number;
  downForMs?: number;
  err?: { message: string };
}

function setUp(timeoutMs = REDIS_TIMEOUT_MS) {
  const clock = new ManualClock();
  const lines: Line[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as Line) });
  /** What each probe answers: set by the test; each call is recorded with its time. */
  const probes: number[] = [];
  let answer: () => Promise<unknown> = () => Promise.reject(new Error('refused'));
  const breaker = new RedisBreaker({
    logger,
    timeoutMs,
    now: () => clock.now,
    timers: clock,
    probe: () => {
      probes.push(clock.now);
      return answer();
    },
  });
  const opened = () => lines.filter((l) => l.msg === REDIS_OUTAGE.down);
  const closed = () => lines.filter((l) => l.msg === REDIS_OUTAGE.up);
  return {
    clock,
    lines,
    breaker,
    probes,
    opened,
    closed,
    answerProbesWith(next: () => Promise<unknown>) {
      answer = next;
    },
  };
}

describe('RedisBreaker', () => {
  it('closed: a count goes to Redis and its answer is used; nothing is logged', async () => {
    const { breaker, lines } = setUp();
    expect(await breaker.run(() => Promise.resolve(7))).toBe(7);
    expect(breaker.closed).toBe(true);
    expect(lines).toEqual([]);
  });

  it('an error opens it: one line, and every later count is made in memory at once without asking Redis', async () => {
    const { breaker, opened, closed, clock } = setUp();
    expect(await breaker.run(() => Promise.reject(new Error('READONLY')))).toBeUndefined();
    expect(breaker.closed).toBe(false);
    let asked = 0;
    const started = clock.now;
    for (let i = 0; i < 100; i++) {
      expect(
        await breaker.run(() => {
          asked++;
          return Promise.resolve(1);
        }),
      ).toBeUndefined();
    }
    expect({ asked, waitedMs: clock.now - started }).toEqual({ asked: 0, waitedMs: 0 });
    expect(opened().map((l) => [l.level, l.err?.message])).toEqual([[50, 'READONLY']]);
    expect(closed()).toEqual([]);
  });

  it(`a count that gets no answer within ${REDIS_TIMEOUT_MS} ms opens it, and the counts waiting with it are released at that moment`, async () => {
    const { breaker, clock, opened } = setUp();
    const never = () => new Promise<number>(() => undefined);
    const started = clock.now;
    const done: Record<string, number> = {};
    void breaker.run(never).then((v) => (done.first = v === undefined ? clock.now - started : -1));
    await clock.advance(60);
    void breaker.run(never).then((v) => (done.second = v === undefined ? clock.now - started : -1));
    await clock.advance(39);
    expect(done).toEqual({});
    expect(breaker.closed).toBe(true);
    await clock.advance(1);
    // The second waited 40 ms, not its own 100: the breaker opened and released it.
    expect(done).toEqual({ first: REDIS_TIMEOUT_MS, second: REDIS_TIMEOUT_MS });
    expect(breaker.closed).toBe(false);
    expect(opened().map((l) => l.err?.message)).toEqual([
      `Redis did not answer within ${REDIS_TIMEOUT_MS} ms`,
    ]);
  });

  it('the timeout is the one it is given (TESSERA_REDIS_TIMEOUT_MS): with 250 ms, a count and a probe wait 250 ms', async () => {
    const { breaker, clock, probes, opened, answerProbesWith } = setUp(250);
    expect(breaker.timeoutMs).toBe(250);
    const started = clock.now;
    let waited = -1;
    void breaker.run(() => new Promise<number>(() => undefined)).then(() => (waited = clock.now - started));
    await clock.advance(249);
    expect([waited, breaker.closed]).toEqual([-1, true]);
    await clock.advance(1);
    expect([waited, breaker.closed]).toEqual([250, false]);
    // The probe 1 s later gets no answer either: it is given up on after 250 ms, logged with that figure.
    answerProbesWith(() => new Promise(() => undefined));
    await clock.advance(1000 + 250);
    expect(probes).toEqual([started + 250 + 1000]);
    expect(opened().map((l) => l.err?.message)).toEqual(['Redis did not answer within 250 ms']);
    expect(breaker.backoffMs).toBe(2000);
  });

  it('an answer that arrives after its count was released changes nothing', async () => {
    const { breaker, clock, lines } = setUp();
    const late = deferred<number>();
    const count = breaker.run(() => late.promise);
    await clock.advance(REDIS_TIMEOUT_MS);
    expect(await count).toBeUndefined();
    breaker.ready();
    late.reject(new Error('Command timed out'));
    await settle();
    expect(breaker.closed).toBe(true);
    expect(lines.map((l) => l.msg)).toEqual([REDIS_OUTAGE.down, REDIS_OUTAGE.up]);
  });

  it('while Redis stays bad it is probed after 1 s, then 2, 4, 8, 16, and every 30 s; one line, repeated once a minute; one line when a probe answers', async () => {
    const { breaker, clock, probes, opened, closed, answerProbesWith } = setUp();
    const start = clock.now;
    breaker.failed(new Error('ECONNREFUSED'));
    await clock.advance(150_000);
    const gaps = probes.map((at, i) => at - (i === 0 ? start : probes[i - 1]!));
    expect(gaps).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
    expect(PROBE_BACKOFF_MS).toEqual({ initial: 1000, max: 30_000 });
    // Eight failed probes, three lines: when it opened, then at the first failure a minute or more later
    // (61 s), and the next (121 s).
    expect(opened().map((l) => l.failingForMs)).toEqual([undefined, 61_000, 121_000]);
    expect(breaker.closed).toBe(false);

    answerProbesWith(() => Promise.resolve('OK'));
    await clock.advance(30_000);
    expect(breaker.closed).toBe(true);
    expect(closed().map((l) => [l.level, l.downForMs])).toEqual([[30, 151_000]]);
    expect(await breaker.run(() => Promise.resolve(3))).toBe(3);
  });

  it(`a probe that gets no answer within ${REDIS_TIMEOUT_MS} ms fails; when its answer comes late, Redis is asked again at once`, async () => {
    const { breaker, clock, probes, closed, answerProbesWith } = setUp();
    const hung = deferred();
    answerProbesWith(() => hung.promise);
    breaker.failed(new Error('Redis did not answer within 100 ms'));
    await clock.advance(1000 + REDIS_TIMEOUT_MS);
    expect(probes.length).toBe(1);
    expect(breaker.closed).toBe(false);
    // The next probe is due in 2 s; Redis resumes after 500 ms and answers the pending probe.
    await clock.advance(500);
    answerProbesWith(() => Promise.resolve('OK'));
    hung.resolve('OK');
    await settle();
    await clock.advance(0);
    expect(probes.length).toBe(2);
    expect(probes[1]! - probes[0]!).toBe(REDIS_TIMEOUT_MS + 500);
    expect(breaker.closed).toBe(true);
    expect(closed().length).toBe(1);
    // No probe is left scheduled.
    await clock.advance(60_000);
    expect(probes.length).toBe(2);
  });

  it('a count that timed out and is answered late brings the probe forward: a short hang ends the outage when it ends', async () => {
    const { breaker, clock, probes, closed, answerProbesWith } = setUp();
    answerProbesWith(() => Promise.resolve('OK'));
    const hung = deferred<number>();
    const count = breaker.run(() => hung.promise);
    await clock.advance(REDIS_TIMEOUT_MS);
    expect(await count).toBeUndefined();
    expect(breaker.closed).toBe(false);
    await clock.advance(300); // the hang lasts 400 ms; the first probe is due at 1 s
    hung.resolve(1);
    await clock.advance(0);
    expect(probes.map((at) => at - probes[0]!)).toEqual([0]);
    expect(breaker.closed).toBe(true);
    expect(closed().map((l) => l.downForMs)).toEqual([300]);
    // A late answer while closed prompts nothing.
    const again = deferred<number>();
    const released = breaker.run(() => again.promise);
    breaker.failed(new Error('the connection to Redis closed'));
    expect(await released).toBeUndefined();
    breaker.ready();
    again.resolve(2);
    await clock.advance(0);
    expect(probes.length).toBe(1);
  });

  it("the connection's events feed it: 'close' or 'error' opens it with no count failing, 'ready' closes it", async () => {
    const { breaker, clock, lines } = setUp();
    breaker.failed(new Error('the connection to Redis closed'));
    expect(breaker.closed).toBe(false);
    // Reconnection attempts keep failing every 200 ms..2 s: still one line.
    for (let i = 0; i < 20; i++) {
      breaker.failed(new Error('connect ECONNREFUSED'));
      await clock.advance(1000);
    }
    breaker.ready();
    expect(breaker.closed).toBe(true);
    breaker.ready();
    expect(lines.map((l) => l.msg)).toEqual([REDIS_OUTAGE.down, REDIS_OUTAGE.up]);
  });

  it('a breaker that opens again within 30 s of closing resumes its back-off; after 30 s closed it starts at 1 s', async () => {
    const { breaker, clock, answerProbesWith } = setUp();
    answerProbesWith(() => Promise.resolve('OK'));
    const delays: number[] = [];
    const flap = async () => {
      breaker.failed(new Error('flap'));
      delays.push(breaker.backoffMs);
      await clock.advance(breaker.backoffMs);
      expect(breaker.closed).toBe(true);
    };
    for (let i = 0; i < 7; i++) await flap();
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]);
    await clock.advance(29_999);
    await flap();
    expect(delays.at(-1)).toBe(30_000);
    await clock.advance(30_000);
    await flap();
    expect(delays.at(-1)).toBe(1000);
  });

  it('stop(): the counts waiting are released, and no probe runs after', async () => {
    const { breaker, clock, probes } = setUp();
    const waiting = breaker.run(() => new Promise<number>(() => undefined));
    breaker.stop();
    expect(await waiting).toBeUndefined();
    breaker.failed(new Error('closing'));
    await clock.advance(120_000);
    expect(probes).toEqual([]);
  });
});

describe('the breaker on a real Redis connection (a private redis-server)', () => {
  let redis: ThrowawayRedis;
  let admin: Redis;
  beforeAll(async () => {
    redis = await throwawayRedis();
    await redis.start();
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    admin.disconnect();
    await redis.stop();
  });

  const connect = (lines: string[]): SharedRedis =>
    connectRedis(redis.url, {
      logger: pino({ level: 'info' }, { write: (line: string) => lines.push(line) }),
      keyPrefix: 'breaker-test',
      timeoutMs: REDIS_TIMEOUT_MS,
      // Short back-off so that the test does not wait seconds for a probe.
      breaker: { initialBackoffMs: 50, maxBackoffMs: 200 },
    });

  it('a Redis that answers PING but refuses writes (out of memory) keeps it open; quotas are counted in memory meanwhile, then in Redis again', async () => {
    const lines: string[] = [];
    const shared = connect(lines);
    try {
      await waitFor(() => shared.client.status === 'ready', 5000);
      const quotas = new IssuanceQuotas({ redis: shared });
      const quota = { perMinute: 3, perDay: null };
      expect(await quotas.take('oom', quota)).toBe(0);
      expect(await admin.get('breaker-test:quota:minute:oom')).toBe('1');

      await admin.config('SET', 'maxmemory', '1');
      // Fails open, and the quota holds in memory: 3 more (memory starts its own count), then refused.
      const waits: number[] = [];
      for (let i = 0; i < 4; i++) waits.push(await quotas.take('oom', quota));
      expect(waits.slice(0, 3)).toEqual([0, 0, 0]);
      expect(waits[3]).toBeGreaterThanOrEqual(59);
      expect(shared.breaker.closed).toBe(false);
      // Probes every 50..200 ms, all refused (PING alone would have closed it): still open after a second.
      await sleep(1000);
      expect(shared.breaker.closed).toBe(false);
      expect(await admin.get('breaker-test:quota:minute:oom')).toBe('1');

      await admin.config('SET', 'maxmemory', '0');
      await waitFor(() => shared.breaker.closed, 2000);
      expect(await quotas.take('oom', quota)).toBe(0);
      expect(await admin.get('breaker-test:quota:minute:oom')).toBe('2');
      const messages = lines.map((line) => (JSON.parse(line) as Line).msg);
      expect(messages).toEqual([REDIS_OUTAGE.down, REDIS_OUTAGE.up]);
      expect(JSON.parse(lines[0]!)).toMatchObject({
        level: 50,
        err: { message: expect.stringMatching(/^OOM/) },
      });
    } finally {
      await shared.close();
    }
  });
});
