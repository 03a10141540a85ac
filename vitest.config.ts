import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests start servers and CLI processes; a small pool keeps a 2-core machine from thrashing.
    maxWorkers: 2,
  },
});
