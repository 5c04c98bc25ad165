import fc from 'fast-check';

/**
 * Time budgets of the schedule properties. By default each property file gets a slice sized for `npm test`
 * on a 2-core machine; `GUIDGATE_SOAK_SECONDS=N` (what `npm run test:soak` sets) gives each N seconds instead.
 */
export interface Budget {
  readonly seconds: number;
  readonly ms: number;
  /** Runs are bounded by time, and by this count where a property's sample is complete sooner. */
  readonly numRuns: number;
  /** Vitest's timeout for the test: the budget plus room for the last run, shrinking and cleanup. */
  readonly testTimeoutMs: number;
  readonly soak: boolean;
  /** Fewer completed runs than this are no sample: the test fails, saying the budget was too small. */
  readonly minRuns: number;
  /** One counter-example to run again instead (GUIDGATE_PROPERTY_REPLAY), or null. */
  readonly replay: { readonly seed: number; readonly path: string } | null;
}

export function soakSeconds(): number | null {
  const raw = process.env['GUIDGATE_SOAK_SECONDS'];
  if (raw === undefined || raw.trim() === '') return null;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`GUIDGATE_SOAK_SECONDS must be a positive number of seconds, got ${raw}`);
  return n;
}

export function propertyBudget(defaultSeconds: number, minRuns: number, maxRuns = 1_000_000): Budget {
  const soak = soakSeconds();
  const seconds = soak ?? defaultSeconds;
  const replay = replayOf(process.env['GUIDGATE_PROPERTY_REPLAY']);
  // A replay is one run.
  return { seconds, ms: seconds * 1000, numRuns: maxRuns, testTimeoutMs: seconds * 1000 + 120_000, soak: soak !== null, minRuns: replay === null ? minRuns : 1, replay };
}

/**
 * Runs a time-bounded property so that it always makes a sample: `budget.minRuns` runs first, whatever the time
 * they take (a loaded machine is slower, not a reason to prove less), then more while the budget lasts. A run cut
 * off by the time limit is no failure; a counter-example is, with fast-check's report.
 */
export async function checkWithinBudget<Ts extends [unknown, ...unknown[]]>(property: fc.IAsyncProperty<Ts>, budget: Budget): Promise<void> {
  if (budget.replay !== null) {
    await fc.assert(property, { ...budget.replay, numRuns: 1, endOnFailure: true, includeErrorInReport: true });
    return;
  }
  const started = Date.now();
  await fc.assert(property, { numRuns: budget.minRuns, includeErrorInReport: true });
  const left = budget.ms - (Date.now() - started);
  if (left <= 0 || budget.numRuns <= budget.minRuns) return;
  const more = await fc.check(property, {
    interruptAfterTimeLimit: left,
    markInterruptAsFailure: false,
    numRuns: budget.numRuns - budget.minRuns,
    includeErrorInReport: true,
  });
  if (more.failed && more.counterexample !== null) throw new Error(await fc.asyncDefaultReportMessage(more), { cause: more.errorInstance });
}

/**
 * `GUIDGATE_PROPERTY_REPLAY=SEED:PATH` (the seed and path of a failure's report) runs that one counter-example
 * again instead of the budget. Schedules over real processes and clocks may not fail the same way twice.
 */
function replayOf(raw: string | undefined): { seed: number; path: string } | null {
  if (raw === undefined || raw.trim() === '') return null;
  const m = /^(-?\d+):([\d:]+)$/.exec(raw.trim());
  if (m === null) throw new Error(`GUIDGATE_PROPERTY_REPLAY must be SEED:PATH as a failure's report gives them (e.g. 779928300:5), got ${raw}`);
  return { seed: Number(m[1]), path: m[2]! };
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
