/**
 * Every counter-example the schedule properties (and the exploration around them) ever found, kept as a named
 * test. The schedules are written out by hand from fast-check's shrunk counter-examples, and run by the same
 * harness and oracle as the property (test/support/schedule.ts, test/support/model.ts), their actions started
 * in the order listed; each one failed against the defect named in its title.
 *
 * To add one: copy the `Counterexample: [{…}]` a failing run prints into a `schedule(…)` here (or replay its
 * `{ seed, path }` with `fc.assert(…, { seed, path })` while the arbitrary is unchanged).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite/sqliteStore.js';
import { createAccountClient } from '../../src/account/accountClient.js';
import { buildApp } from '../../src/relay/app.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { sweepOrphans } from '../../src/send/sweepOrphans.js';
import { resolveUnknown } from '../../src/commands/resolve.js';
import { reprocessFailed } from '../../src/commands/reprocess.js';
import { startSimulator } from '../../src/simulator/index.js';
import { REPO_ROOT } from '../support/children.js';
import { inOrder, runSchedule, type Action, type Round, type Schedule } from '../support/schedule.js';
import { waitFor } from '../support/waitFor.js';
import { useTempDir } from '../support/tmp.js';
import { orThrow } from '../../src/events/storeResult.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';

const tmp = useTempDir();
let runId = 0;

const schedule = (over: Partial<Schedule> & Pick<Schedule, 'rounds'>): Schedule => ({
  kinds: ['ok'],
  channels: 2,
  patienceMs: 10,
  faults: ['answer'],
  e500Rate: 0,
  breakerFailures: 0,
  timeoutMs: 60,
  graceMs: 30,
  maxAttempts: 3,
  processingMs: 0,
  ...over,
});
const round = (actions: Action[], opts: { settle?: boolean; gapsMs?: number[] } = {}): Round => ({ actions, gapsMs: opts.gapsMs ?? [], settle: opts.settle ?? true });
const send = (g: number, v: 'base' | 'cosmetic' | 'header' | 'changed' = 'base', ch = 0): Action => ({ do: 'send', ch, g, v });
const run = (sc: Schedule) => runSchedule(sc, inOrder(), { dir: tmp(), runId: runId++ });

describe('regressions: schedules that once exposed a defect', () => {
  it('a resend while UNKNOWN gets E901 and makes no call (found when relayTransfer resent UNKNOWN rows)', async () => {
    const r = await run(schedule({ kinds: ['ok', 'ok', 'ok'], channels: 1, faults: ['answer', 'answer', 'late-answer'], maxAttempts: 1, rounds: [round([send(0), { do: 'fault', g: 0, mode: 'late-answer' }]), round([send(0)], { settle: false })] }));
    expect(r.replies['E901']).toBeGreaterThanOrEqual(2);
  });

  it('an UNKNOWN row is never sent again, even with a new Sent (found when decide let Submit/Send leave UNKNOWN)', async () => {
    const r = await run(schedule({ faults: ['reset'], rounds: [round([send(0)]), round([{ do: 'reprocess', maxAttempts: 6 }, send(0), send(0, 'cosmetic', 1)])] }));
    expect(r.replies['E901']).toBeGreaterThanOrEqual(3);
  });

  it('a timeout is UNKNOWN, never FAILED: a late answer is found by inquiry, not sent again (found when recordOutcome recorded TimedOut as ConnectFailed)', async () => {
    const r = await run(schedule({ kinds: ['ok', 'ok', 'ok'], faults: ['late-answer', 'answer', 'late-answer'], maxAttempts: 1, rounds: [round([send(0), { do: 'purge', retentionMs: 0 }], { settle: false })] }));
    expect(r.replies['E901']).toBeGreaterThanOrEqual(1);
  });

  it('a changed payload that claimed the GUID first makes the original E904, whatever the state (found when the relay skipped the fingerprint check)', async () => {
    const r = await run(schedule({ channels: 1, maxAttempts: 1, rounds: [round([send(0, 'changed'), send(0)], { settle: false }), round([send(0)], { settle: false })] }));
    expect(r.replies['E904']).toBeGreaterThanOrEqual(2);
  });

  it('a resend of a DONE GUID is the first answer, byte for byte, with Idempotent-Replayed (found when the header was dropped, and when the bytes were re-serialised)', async () => {
    const r = await run(schedule({ faults: ['late-answer'], channels: 1, rounds: [round([send(0)], { settle: false })] }));
    expect(r.replies['E901']).toBe(1);
    const s = await run(schedule({ rounds: [round([send(0)]), round([send(0, 'header'), send(0, 'cosmetic', 1)])] }));
    expect(s.replies['0000']).toBeGreaterThanOrEqual(3);
  });

  it('a claim acknowledged late is not called once the row was settled and sent again (issue #24: a late acknowledgement was called, applied twice)', async () => {
    // The claim of ch0 is committed and acknowledged 1.5 s later; meanwhile time passes, resolve finds it absent
    // (FAILED), and ch1's resend inquires (absent) and sends attempt 2, applied. The acknowledgement comes after.
    const r = await run(
      schedule({
        rounds: [round([{ do: 'delay-ack', ms: 1500 }, send(0, 'base', 0), { do: 'tick', ms: 100_000 }, { do: 'resolve', minAgeMs: 1 }, send(0, 'base', 1)], { gapsMs: [0, 100, 0, 300] })],
      }),
    );
    expect(r.replies['0000']).toBeGreaterThanOrEqual(1);
    expect(r.replies['E901']).toBeGreaterThanOrEqual(1);
  });

  it('a relay frozen between its claim and its call does not call when it runs again, after reprocess sent the row (issue #24)', async () => {
    // ch0's claim is acknowledged 200 ms late, into a freeze of 1.5 s: the relay is stopped with its claim committed
    // and uncalled. Time passes, resolve finds it absent, reprocess sends attempt 2 (applied); then the relay runs.
    const r = await run(
      schedule({
        channels: 1,
        rounds: [round([{ do: 'delay-ack', ms: 200 }, send(0), { do: 'freeze', ms: 1500 }, { do: 'tick', ms: 100_000 }, { do: 'resolve', minAgeMs: 1 }, { do: 'reprocess', maxAttempts: 6 }], { gapsMs: [0, 100, 0, 0, 300] })],
      }),
    );
    expect(r.replies['E901']).toBeGreaterThanOrEqual(1);
  });

  it('a resend while SENT gets E903 at once (found when SENT was answered E901)', async () => {
    const r = await run(schedule({ faults: ['hold'], rounds: [round([send(0, 'base', 0), send(0, 'base', 1)], { gapsMs: [15] })] }));
    expect(r.replies['E903']).toBeGreaterThanOrEqual(1);
  });

  it('purge takes only DONE rows, in the log and the projection alike; a resend then gets E905 (found when the projection missed Purged, and when purge took UNKNOWN rows)', async () => {
    const r = await run(
      schedule({
        kinds: ['ok', 'ok', 'ok'],
        faults: ['e500', 'answer', 'late-answer'],
        rounds: [round([send(0), send(2, 'base', 1), send(1)]), round([{ do: 'tick', ms: 250 }, { do: 'purge', retentionMs: 200 }]), round([send(1), send(2)])],
      }),
    );
    expect(r.replies['E905']).toBeGreaterThanOrEqual(1);
  });

  it('the min-age trap: the account system processes longer than the timeout, and resolve waits for min-age (found when resolve ignored --min-age)', async () => {
    const r = await run(
      schedule({ kinds: ['ok', 'ok'], faults: ['late-answer', 'reset'], processingMs: 250, rounds: [round([send(0), send(1, 'base', 1)]), round([{ do: 'resolve', minAgeMs: 100 }, { do: 'reprocess', maxAttempts: 6 }])] }),
    );
    expect(r.replies['E901']).toBe(2);
  });

  it('a crash mid-flight: the restarted relay answers E903, the sweep makes the row UNKNOWN, resolve settles it, nothing is sent twice', async () => {
    const r = await run(
      schedule({
        faults: ['late-answer'],
        rounds: [round([send(0), { do: 'crash', downMs: 0 }], { settle: false, gapsMs: [20] }), round([send(0)]), round([{ do: 'tick', ms: 250 }, send(0)], { gapsMs: [80] })],
      }),
    );
    expect(r.crashes).toBe(1);
  });

  it('reprocess leaves UNKNOWN rows alone (found when reprocess selected UNKNOWN rows)', async () => {
    const r = await run(schedule({ kinds: ['ok', 'ok'], faults: ['late-answer', 'late-answer'], maxAttempts: 1, rounds: [round([send(0), { do: 'reprocess', maxAttempts: 1 }]), round([{ do: 'reprocess', maxAttempts: 6 }, send(0)], { settle: false }), round([send(0)], { settle: false })] }));
    expect(r.replies['E901']).toBeGreaterThanOrEqual(2);
  });
});

describe('regressions: found while building the schedules', () => {
  /**
   * Two processes opening the same NEW ledger file at once (two `serve`s started together, or `serve` and
   * `resolve`): both read `user_version` 0 before either migrated, and the second then failed with "table
   * events already exists" (22 of 40 processes in 10 rounds of 4). Fixed in src/store/sqlite/schema.ts: the
   * version is read again inside the IMMEDIATE migration transaction.
   */
  it('several processes opening one new ledger file at the same moment all start', async () => {
    const store = join(REPO_ROOT, 'dist', 'src', 'store', 'sqlite', 'sqliteStore.js');
    const projection = join(REPO_ROOT, 'dist', 'src', 'projections', 'ledgerProjection.js');
    const child = (path: string) => `import { openSqliteStore } from ${JSON.stringify(store)};
import { ledgerProjection } from ${JSON.stringify(projection)};
process.stdin.once('data', () => {
  try { const s = openSqliteStore({ projection: ledgerProjection, path: ${JSON.stringify(path)} }); void s.close().then(() => process.exit(0)); }
  catch (e) { process.stdout.write('fail ' + e.message + '\\n'); process.exit(1); }
});
process.stdout.write('ready\\n');`;
    const failures: string[] = [];
    for (let r = 0; r < 4; r++) {
      const path = join(tmp(), `race-${r}.db`);
      const kids = Array.from({ length: 4 }, () => spawn(process.execPath, ['--input-type=module', '-e', child(path)], { stdio: ['pipe', 'pipe', 'pipe'] }));
      const outs = kids.map(() => ({ text: '' }));
      await Promise.all(kids.map((k, i) => new Promise<void>((ready) => k.stdout.on('data', (d: Buffer) => ((outs[i]!.text += d.toString()), outs[i]!.text.includes('ready') && ready())))));
      const exits = kids.map((k) => new Promise<number | null>((done) => k.on('exit', (code) => done(code))));
      for (const k of kids) k.stdin.write('go\n');
      (await Promise.all(exits)).forEach((code, i) => {
        if (code !== 0) failures.push(`round ${r}: exit ${code}: ${outs[i]!.text.trim()}`);
      });
      const check = openSqliteStore({ projection: ledgerProjection, path });
      expect(check.db.pragma('integrity_check', { simple: true })).toBe('ok');
      await check.close();
    }
    expect(failures).toEqual([]);
  }, 60_000);

  /**
   * Found by the schedules (stalled owner, then sweep, resolve and reprocess while its call was still out):
   * `sendClaimed` handed the late E500 of attempt 1 to the channel although the row had been sent again as
   * attempt 2, which was applied (0000): the same GUID got E500 first and 0000 on resend. Fixed: an outcome
   * that cannot be recorded is never replied; the reply follows the ledger as it is now.
   */
  it('a definite answer that arrives after its row was sent again is not given to the channel (found when sendClaimed replied a stale E500)', async () => {
    let now = 1_767_225_600_000;
    const clock = () => now;
    const sim = await startSimulator({ port: 0, latencyMs: 300, faults: { byGuid: { 'STALE-1': 'e500' } } });
    const path = join(tmp(), 'stale.db');
    const store = openSqliteStore({ projection: ledgerProjection, path, clock });
    const ops = openSqliteStore({ projection: ledgerProjection, path, clock });
    const account = createAccountClient({ baseUrl: sim.url, timeoutMs: 1000 });
    const app = buildApp({ store, account, metrics: createMetrics(store, clock), timeoutMs: 1000, maxAttempts: 3 });
    try {
      const body = JSON.stringify({ guid: 'STALE-1', from: 'ACC-1', to: 'ACC-2', amount: 5 });
      const post = () => app.inject({ method: 'POST', url: '/v1/transfers', payload: body, headers: { 'content-type': 'application/json' } });
      const first = post(); // attempt 1: the account system answers E500 (not applied) after 300 ms
      await waitFor(() => sim.guidStats('STALE-1').calls === 1, { what: 'attempt 1 in flight' });
      now += 10_000; // the owner looks dead to the sweep
      expect(await orThrow(sweepOrphans(ops, 100, now))).toEqual({ neverSent: 0, orphaned: 1 });
      expect(await resolveUnknown({ store: ops, account, clock }, { minAgeMs: 1, graceMs: 100 })).toMatchObject({ absent: 1 });
      sim.resetFaults();
      const reprocessed = reprocessFailed({ store: ops, account }, { maxAttempts: 5, timeoutMs: 1000, minAgeMs: 1 }); // attempt 2: 0000
      const firstReply = (await first).body;
      await reprocessed;
      const resend = (await post()).body;
      expect(sim.stats().applied['STALE-1']).toBe(1);
      expect(JSON.parse(resend)).toMatchObject({ code: '0000' });
      expect(firstReply).not.toContain('"E500"');
    } finally {
      await app.close();
      await account.close();
      await store.close();
      await ops.close();
      await sim.close();
    }
  });
});
