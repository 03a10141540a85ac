import { defineConfig } from 'vitest/config';

/**
 * Tests that hold the server to a latency (a retention delete never stalls a request 50 ms, a paused Redis
 * adds under 5 ms, a refused id answers as fast as a wrong secret, a shutdown's drain closes every connection
 * open at the signal within its delay) run after all the others, one file at a time: on a 2-core machine,
 * another file's servers and CLI processes running beside them would be measured instead of Tessera. (The
 * drain test ran in the main group until the suite grew: beside the cluster tests of DPoP, federation and
 * revocation, a connection's last answer came ~100 ms after the listener closed, once in three runs.)
 */
const TIMED = [
  'test/cluster/shutdown.test.ts',
  'test/security/retention.test.ts',
  'test/security/redis-outage.test.ts',
  'test/security/timing.test.ts',
];

/**
 * Tests that load the machine for tens of seconds (a headless Chromium; one scrypt password hash after
 * another) run after the others, one file at a time: beside them, timing-sensitive tests would be measuring the
 * browser instead of Tessera.
 */
const HEAVY = [
  'test/console/browser.test.ts',
  'test/console/federation.test.ts',
  'test/console/import.test.ts',
  'test/http/console-session.test.ts',
  // builds the container image (buildah, minutes cold) and runs it (podman)
  'test/deploy/image.test.ts',
];

const common = {
  pool: 'forks' as const,
  testTimeout: 30_000,
  hookTimeout: 30_000,
};

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          ...common,
          name: 'main',
          include: ['test/**/*.test.ts'],
          exclude: [...TIMED, ...HEAVY],
          // Tests start servers and wait on them: four files at once keep a 2-core machine busy without thrashing
          // it (the whole suite 273 s with three, 255 s with four, 267 s with five, 2026-12-03). A worker keeps the
          // modules it loaded from one file to the next (isolate: false; 239 s): no file may leave state behind
          // in a module, which every test's own server, store, clock and environment already ensure.
          maxWorkers: 4,
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...common,
          name: 'heavy',
          include: HEAVY,
          maxWorkers: 1,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          ...common,
          name: 'timed',
          include: TIMED,
          maxWorkers: 1,
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
