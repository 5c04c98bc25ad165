/**
 * Issue #5: guidgate's promise, shown on every run. fast-check generates schedules of K channels sending and
 * resending N GUIDs (sometimes with a changed payload), the account system's behaviour per GUID (answer,
 * late answer, reset after applying, hold, garbage 502, E500, refused connections; B201/B202 by payload),
 * relay crashes and restarts, the relay frozen and its claims acknowledged late (issue #24), the relay's breaker (--breaker-failures 0/1/2/4), and `resolve`, runs of serve's
 * background settler, `reprocess`, `purge` and clock ticks interleaved with the traffic;
 * fast-check's scheduler picks the order in which each round's actions start. Every step is checked against
 * the contract (test/support/model.ts), then a healing phase must settle every GUID.
 *
 * `npm test` runs a time-bounded slice; `GUIDGATE_SOAK_SECONDS=600 npm run test:soak` runs for as long as asked.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { actionCount, runSchedule, scheduleArb, type RunResult, type Schedule } from '../support/schedule.js';
import { expectEnoughRuns, propertyBudget } from '../support/scheduleBudget.js';
import { useTempDir } from '../support/tmp.js';

// About 100 schedules complete in 40 s on a quiet 2-core machine; 30 is the least that reaches every reply below.
const budget = propertyBudget(40, 30);

describe('property: concurrent duplicate schedules with crashes, faults and operator commands', () => {
  const tmp = useTempDir();

  it(`at most once, no resend while UNKNOWN, byte-for-byte replays, ledger = rebuild, the state table, and healing (${budget.seconds}s budget)`, async () => {
    const dir = tmp();
    const results: Array<RunResult & { largest: Schedule }> = [];
    let runId = 0;
    await fc.assert(
      fc.asyncProperty(scheduleArb(), fc.scheduler(), async (sc, s) => {
        const r = await runSchedule(sc, s, { dir, runId: runId++ });
        results.push({ ...r, largest: sc });
      }),
      { interruptAfterTimeLimit: budget.ms, markInterruptAsFailure: false, numRuns: budget.numRuns },
    );
    const largest = results.reduce((a, b) => (actionCount(b.largest) > actionCount(a.largest) ? b : a), results[0]!);
    const codes: Record<string, number> = {};
    for (const r of results) for (const [c, n] of Object.entries(r.replies)) codes[c] = (codes[c] ?? 0) + n;
    console.log(
      `[schedules] ${results.length} schedules in ${budget.seconds}s budget; largest ${actionCount(largest.largest)} actions ` +
        `(${largest.largest.kinds.length} GUIDs, ${largest.largest.channels} channels, ${largest.largest.rounds.length} rounds); ` +
        `sends ${results.reduce((n, r) => n + r.sends, 0)}, crashes ${results.reduce((n, r) => n + r.crashes, 0)}, ` +
        `max heal rounds ${Math.max(...results.map((r) => r.healRounds))}; breaker refusals ${results.reduce((n, r) => n + r.breakerRefusals, 0)}; freezes and late acknowledgements ${results.reduce((n, r) => n + r.stalls, 0)}; replies ${JSON.stringify(codes)}`,
    );
    // The budget produced a real sample, and the schedules reached the interesting replies.
    expectEnoughRuns(budget, results.length, 'the schedules property');
    for (const c of ['0000', 'E901', 'E903', 'E904', 'E905']) expect(codes[c], `no ${c} reply in the whole run`).toBeGreaterThan(0);
  }, budget.testTimeoutMs);
});
