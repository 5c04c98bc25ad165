// @ts-check
/**
 * Mutation testing of the safety core: `npm run test:mutation` (not part of `npm test`). The three files decide
 * what may be sent again; the specs that exercise them are listed in vitest.mutation.config.ts.
 * Equivalent survivors (mutants that change no outcome) are listed in docs/testing.md, "Mutation testing".
 *
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  mutate: ['src/events/decide.ts', 'src/events/evolve.ts', 'src/account/classifyFailure.ts'],
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts', related: false },
  plugins: ['@stryker-mutator/vitest-runner'],
  coverageAnalysis: 'perTest',
  // Static mutants (the FAILURE_RULES table, module constants) run every test for each one; the table is
  // checked rule by rule in classifyFailure.unit.spec.ts instead.
  ignoreStatic: true,
  concurrency: 2,
  timeoutMS: 30_000,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  thresholds: { high: 95, low: 90, break: 90 },
  ignorePatterns: ['data', 'reports', '.tmp', '*.db', '*.db-wal', '*.db-shm'],
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
