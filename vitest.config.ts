import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts'],
    // The writer thread and the child processes run `dist`: rebuild it first when the source is newer.
    globalSetup: ['test/support/buildDist.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: the multi-process and crash tests spawn their own children.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
