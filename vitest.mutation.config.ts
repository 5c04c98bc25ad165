import { defineConfig } from 'vitest/config';

/**
 * The specs `npm run test:mutation` runs against each mutant: the fast ones that exercise the safety core
 * (decide, evolve, classifyFailure). No spec that spawns the relay or the commands as processes: those run
 * `dist`, which Stryker does not mutate, and would only slow every mutant down. Not the schedule regressions
 * either (test/property/regressions.spec.ts): their replies depend on timing, and under Stryker's one-thread
 * instrumented dry run on a loaded machine one of them failed in two runs of three, which aborts the whole run.
 */
export const MUTATION_SPECS = [
  'test/unit/decide.unit.spec.ts',
  'test/unit/evolve.unit.spec.ts',
  'test/unit/classifyFailure.unit.spec.ts',
  'test/property/ledger.property.spec.ts',
  'test/int/sqliteStore*.spec.ts',
  'test/int/accountClient.int.spec.ts',
];

// Stryker's sandbox holds a copy of `dist` built by the script before it starts; no globalSetup rebuild there.
export default defineConfig({
  test: { include: MUTATION_SPECS, setupFiles: ['test/support/mutationSetup.ts'], testTimeout: 60_000, hookTimeout: 60_000 },
});
