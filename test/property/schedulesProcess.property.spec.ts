/**
 * Issue #5, the smaller variant over real processes and sockets: two `bin/guidgate serve` processes on one
 * ledger file, channels over real HTTP to either, SIGKILL and restart at random points, and the operator
 * commands as real `guidgate resolve|reprocess|purge` processes, all interleaved by fast-check's scheduler.
 * Same oracle as the in-process schedules (test/support/model.ts); the real clock throughout.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pActionCount, pScheduleArb, ProcessWorld, runProcessSchedule, type PRunResult, type PSchedule } from '../support/scheduleProcess.js';
import { propertyBudget } from '../support/scheduleBudget.js';

const budget = propertyBudget(25);

describe('property (processes): two relays on one ledger, SIGKILL, and the operator commands as processes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'guidgate-psched-'));
  let world: ProcessWorld;
  beforeAll(async () => {
    world = await ProcessWorld.start(dir);
  });
  afterAll(async () => {
    await world?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`the invariants hold across processes (${budget.seconds}s budget)`, async () => {
    const results: Array<PRunResult & { sc: PSchedule }> = [];
    let runId = 0;
    await fc.assert(
      fc.asyncProperty(pScheduleArb(), fc.scheduler(), async (sc, s) => {
        results.push({ ...(await runProcessSchedule(sc, s, world, runId++)), sc });
      }),
      { interruptAfterTimeLimit: budget.ms, markInterruptAsFailure: false, numRuns: budget.numRuns },
    );
    const largest = Math.max(...results.map((r) => pActionCount(r.sc)));
    const codes: Record<string, number> = {};
    for (const r of results) for (const [c, n] of Object.entries(r.replies)) codes[c] = (codes[c] ?? 0) + n;
    console.log(
      `[schedules/processes] ${results.length} schedules in ${budget.seconds}s budget; largest ${largest} actions; ` +
        `sends ${results.reduce((n, r) => n + r.sends, 0)}, SIGKILLs ${results.reduce((n, r) => n + r.kills, 0)}; replies ${JSON.stringify(codes)}`,
    );
    expect(results.length).toBeGreaterThanOrEqual(2);
    expect(await world.verifyAll()).toEqual([]);
  }, budget.testTimeoutMs + 60_000);
});
