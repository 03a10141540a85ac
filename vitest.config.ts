import { defineConfig } from 'vitest/config';

/**
 * Tests that hold the server to a latency (a retention delete never stalls a request 50 ms, a paused Redis
 * adds under 5 ms, a refused id answers as fast as a wrong secret) run after all the others, one file at a
 * time: on a 2-core machine, another file's servers and CLI processes running beside them would be measured
 * instead of Tessera.
 */
const TIMED = [
  'test/security/retention.test.ts',
  'test/security/redis-outage.test.ts',
  'test/security/timing.test.ts',
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
          exclude: TIMED,
          // Tests start servers and CLI processes; a small pool keeps a 2-core machine from thrashing.
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...common,
          name: 'timed',
          include: TIMED,
          maxWorkers: 1,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
