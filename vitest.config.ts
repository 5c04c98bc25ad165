import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts'],
    // The writer thread and the child processes run `dist`: rebuild it first when the source is newer.
    globalSetup: ['test/support/buildDist.ts'],
    // The continuity marks of the tests' ledgers (and of every serve and command they spawn) in a folder of this run,
    // not in the home directory; one folder for the run, so that a restarted serve finds its mark.
    env: { GUIDGATE_CONTINUITY_DIR: join(tmpdir(), `guidgate-continuity-test-${process.pid}`) },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: the multi-process and crash tests spawn their own children.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
