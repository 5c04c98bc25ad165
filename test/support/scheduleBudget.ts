/**
 * Time budgets of the schedule properties. By default each property file gets a slice sized for `npm test`
 * on a 2-core machine; `GUIDGATE_SOAK_SECONDS=N` (what `npm run test:soak` sets) gives each N seconds instead.
 */
export interface Budget {
  readonly seconds: number;
  readonly ms: number;
  /** Runs are bounded by time, not count. */
  readonly numRuns: number;
  /** Vitest's timeout for the test: the budget plus room for the last run, shrinking and cleanup. */
  readonly testTimeoutMs: number;
  readonly soak: boolean;
  /** Fewer completed runs than this are no sample: the test fails, saying the budget was too small. */
  readonly minRuns: number;
}

export function soakSeconds(): number | null {
  const raw = process.env['GUIDGATE_SOAK_SECONDS'];
  if (raw === undefined || raw.trim() === '') return null;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`GUIDGATE_SOAK_SECONDS must be a positive number of seconds, got ${raw}`);
  return n;
}

export function propertyBudget(defaultSeconds: number, minRuns: number): Budget {
  const soak = soakSeconds();
  const seconds = soak ?? defaultSeconds;
  return { seconds, ms: seconds * 1000, numRuns: 1_000_000, testTimeoutMs: seconds * 1000 + 120_000, soak: soak !== null, minRuns };
}

/**
 * A property bounded by time passes only if it ran enough: a budget that a loaded machine cut off after a handful
 * of runs proves little, and must fail rather than pass quietly.
 */
export function expectEnoughRuns(budget: Budget, completed: number, what: string): void {
  if (completed < budget.minRuns) {
    throw new Error(
      `${what}: only ${completed} runs completed in the ${budget.seconds} s budget, fewer than the ${budget.minRuns} a sample needs: ` +
        'the budget is too small for this machine (give it more with GUIDGATE_SOAK_SECONDS=N, or raise the default in the spec)',
    );
  }
}
