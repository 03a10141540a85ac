/**
 * What time it is, and the periodic jobs that run on it: one Clock for every part of a server (runtime/parts.ts),
 * the wall clock in production and a test's clock in tests, which moves time and runs the jobs then due instead
 * of waiting for them.
 *
 * Time of day (a token's iat and exp, a secret's expiry, a key's activation, the audit trail's times, a cache
 * entry's age) is the clock's `now`. How long a real event lasted (an outage, a probe, how long ago the change
 * feed was read) is measured with `performance.now()`, which is monotonic: a wall clock stepped by NTP does not
 * make a fresh feed stale, and a test that moves its clock a day on does not make a store that answers look away.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /**
   * Runs `job` every `ms` milliseconds until the returned job is stopped. A job never keeps the process alive
   * (a server is kept alive by its listener), and a run that is still going when the next is due is the job's
   * to skip (each guards itself: a prune or flush in progress is not started twice).
   */
  every(ms: number, job: () => void): Job;
}

/** A periodic job on a clock. */
export interface Job {
  stop(): void;
}

/** The wall clock, with Node's timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  every(ms, job) {
    const timer = setInterval(job, ms);
    timer.unref();
    return { stop: () => clearInterval(timer) };
  },
};
