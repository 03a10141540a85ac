import { systemClock, type Clock, type Job } from '../../src/clock.js';

/**
 * Clocks a test moves on instead of waiting for: a server's (startTestServer's `clock`, the runtime's clock), a
 * store's (its `now`), the management layer's. Only forward: a clock going back is no test of anything the
 * server promises.
 */
export interface TestClock extends Clock {
  /** The time as a Date (a store's clock). */
  date(): Date;
  /** The time as RFC 3339 text, as the store records it. */
  iso(): string;
  /**
   * Moves the clock `ms` on, at once, and runs every job then due (once each, however many of its periods went
   * by: a flush or a prune catches up in one run). Jobs run on the wall's timers besides, so that a server on a
   * test clock goes on as it would (its change feed read, its audit trail written) when the test waits instead.
   */
  advance(ms: number): void;
}

interface Scheduled {
  every: number;
  due: number;
  job: () => void;
}

function clock(read: (offset: number) => number): TestClock {
  let offset = 0;
  const now = () => read(offset);
  const jobs = new Set<Scheduled>();
  return {
    now,
    date: () => new Date(now()),
    iso: () => new Date(now()).toISOString(),
    every(ms, job): Job {
      const scheduled: Scheduled = { every: ms, due: now() + ms, job };
      jobs.add(scheduled);
      const timer = systemClock.every(ms, () => {
        scheduled.due = now() + ms;
        job();
      });
      return {
        stop() {
          timer.stop();
          jobs.delete(scheduled);
        },
      };
    },
    advance(ms) {
      if (ms < 0) throw new Error('a test clock only moves forward');
      offset += ms;
      const at = now();
      for (const scheduled of [...jobs])
        if (scheduled.due <= at && jobs.has(scheduled)) {
          scheduled.due = at + scheduled.every;
          scheduled.job();
        }
    },
  };
}

/** The wall clock plus however far the test has moved it, so that everything else goes on as it would. */
export const testClock = (): TestClock => clock((offset) => Date.now() + offset);

/** A clock that stands still at `at` until the test moves it, for timestamps asserted exactly. */
export const stillClock = (at = Date.parse('2030-01-02T03:04:05.006Z')): TestClock =>
  clock((offset) => at + offset);

/** A clock that reads `now` (a test that sets the time itself), its jobs on the wall's timers. */
export const clockAt = (now: () => number): Clock => ({ now, every: systemClock.every });
