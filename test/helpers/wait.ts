/**
 * Waiting in tests: for a condition (waitFor, pollUntil), which is what a test should wait for, or for a time
 * (sleep), where the time is the scenario: a moment in which nothing may happen, a cadence of probes.
 */

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every `everyMs` until it returns true or `timeoutMs` passes; returns the time it took. */
export async function waitFor(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  everyMs = 25,
): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

/**
 * Reads `read` every `everyMs` until `done` accepts the reading or `timeoutMs` has passed, and resolves with
 * the last reading, accepted or not (the caller's assertion then shows what it was), and the time it took.
 */
export async function pollUntil<T>(
  read: () => Promise<T> | T,
  done: (value: T) => boolean,
  timeoutMs: number,
  everyMs = 25,
): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  for (;;) {
    const value = await read();
    const ms = performance.now() - started;
    if (done(value) || ms > timeoutMs) return { value, ms };
    await sleep(everyMs);
  }
}

/**
 * A timer every 5 ms on this thread: `worst()` is the longest it waited between two runs, so a thread stopped
 * inside a synchronous call (SQLite waiting for a lock) shows as a gap as long as the stop.
 */
export function threadWatch(): { worst(): number; stop(): void } {
  let last = performance.now();
  let worst = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 5);
  return { worst: () => worst, stop: () => clearInterval(ticker) };
}
