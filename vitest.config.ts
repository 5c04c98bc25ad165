import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: the multi-process and crash tests spawn their own children.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
