/**
 * Clocks a test moves on instead of waiting for: a server's (startTestServer's `now`, the runtime's clock), a
 * store's (its `now`), the management layer's. Only forward: a clock going back is no test of anything the
 * server promises.
 */
export interface TestClock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** The time as a Date (a store's clock). */
  date(): Date;
  /** The time as RFC 3339 text, as the store records it. */
  iso(): string;
  /** Moves the clock `ms` on, at once. */
  advance(ms: number): void;
}

function clock(read: (offset: number) => number): TestClock {
  let offset = 0;
  const now = () => read(offset);
  return {
    now,
    date: () => new Date(now()),
    iso: () => new Date(now()).toISOString(),
    advance(ms) {
      if (ms < 0) throw new Error('a test clock only moves forward');
      offset += ms;
    },
  };
}

/** The wall clock plus however far the test has moved it, so that everything else goes on as it would. */
export const testClock = (): TestClock => clock((offset) => Date.now() + offset);

/** A clock that stands still at `at` until the test moves it, for timestamps asserted exactly. */
export const stillClock = (at = Date.parse('2030-01-02T03:04:05.006Z')): TestClock =>
  clock((offset) => at + offset);
