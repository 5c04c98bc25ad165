/**
 * Issue #5, the smaller variant over real processes and sockets: two `bin/guidgate serve` processes on one
 * ledger, channels over real HTTP to either, SIGKILL and restart at random points, SIGSTOP for a while and (on
 * PostgreSQL) a relay's COMMIT acknowledgement held by a proxy (issue #24), and the operator commands as
 * real `guidgate resolve|reprocess|purge` processes, all interleaved by fast-check's scheduler. Same oracle as
 * the in-process schedules (test/support/model.ts); the real clock throughout. Once on a SQLite file, once on a
 * PostgreSQL database (issue #13: several relays on one database; skipped without one, except under CI).
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { pActionCount, pScheduleArb, ProcessWorld, runProcessSchedule, type PRunResult, type PSchedule } from '../support/scheduleProcess.js';
import { checkWithinBudget, expectEnoughRuns, propertyBudget } from '../support/scheduleBudget.js';
import { postgresForTests, useTestDatabases } from '../support/pg.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { freePorts } from '../support/pgCluster.js';

const { available: pgAvailable } = await postgresForTests();
// A schedule takes 5 to 7 s on a 2-core machine: four are run whatever the time they take, more while the budget lasts.
const MIN_SCHEDULES = 4;

/** The property over one world; `label` names it in the figures line. */
function processSchedules(label: string, seconds: number, start: () => Promise<ProcessWorld>): void {
  const budget = propertyBudget(seconds, MIN_SCHEDULES);
  const cleanup = useCleanup('file');
  let world: ProcessWorld | undefined;
  beforeAll(async () => {
    world = cleanup.use(await start());
  });

  it(`the invariants hold across processes (${budget.seconds}s budget)`, async () => {
    const w = world!;
    const results: Array<PRunResult & { sc: PSchedule }> = [];
    let runId = 0;
    const property = fc.asyncProperty(pScheduleArb(), fc.scheduler(), async (sc, s) => {
      results.push({ ...(await runProcessSchedule(sc, s, w, runId++)), sc });
    });
    // One schedule may take the whole budget on a loaded machine (healing waits out real min-ages): MIN_SCHEDULES
    // first, whatever the budget, then more while it lasts.
    await checkWithinBudget(property, budget);
    const largest = Math.max(...results.map((r) => pActionCount(r.sc)));
    const codes: Record<string, number> = {};
    for (const r of results) for (const [c, n] of Object.entries(r.replies)) codes[c] = (codes[c] ?? 0) + n;
    console.log(
      `[schedules/processes/${label}] ${results.length} schedules in ${budget.seconds}s budget; largest ${largest} actions; ` +
        `sends ${results.reduce((n, r) => n + r.sends, 0)}, SIGKILLs ${results.reduce((n, r) => n + r.kills, 0)}, stalls (SIGSTOP, held COMMIT acknowledgements) ${results.reduce((n, r) => n + r.stalls, 0)}; replies ${JSON.stringify(codes)}`,
    );
    expectEnoughRuns(budget, results.length, `the process schedules (${label})`);
    expect(await w.verifyAll()).toEqual([]);
  }, budget.testTimeoutMs + 180_000);
}

describe('property (processes): two relays on one SQLite file, SIGKILL, and the operator commands as processes', () => {
  const tmp = useTempDir('file');
  processSchedules('sqlite', 20, () => ProcessWorld.start(join(tmp(), 'ledger.db')));
});

describe.skipIf(!pgAvailable)('property (processes): two relays on one PostgreSQL database (a multi-host URL, its first host down), SIGKILL, and the operator commands as processes', () => {
  const dbs = useTestDatabases();
  // A multi-host URL whose first host is down (CONTRACT.md §9): every connection passes it by to the database's server.
  processSchedules('postgres', 18, async () => {
    const [down] = (await freePorts(1)) as [number];
    return ProcessWorld.start(dbs.url().replace(/@([^/@]+)\//, `@127.0.0.1:${down},$1/`));
  });
});
