/**
 * Inquiry pacing (CONTRACT.md §7, `--inquiry-rate`) end to end: the real relay and commands, a real ledger file, the
 * bundled simulator counting the inquiries it receives (the most within any one second). One budget per process for
 * every source: the settler, `resolve`, the inquiry before a resend or a first send.
 */
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { createAccountClient } from '../../src/account/accountClient.js';
import { claimAfterInquiry } from '../../src/send/resendAfterInquiry.js';
import { openLedger } from '../support/ledgerStore.js';
import { orThrow } from '../../src/events/storeResult.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { cli, seedRow, transferBody } from '../support/commandsSeed.js';
import { startHarness, type Harness } from '../support/relayHarness.js';
import { metricAt } from '../support/settle.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { waitFor } from '../support/waitFor.js';

const LONG_AGO = Date.UTC(2020, 0, 1);

describe('inquiry pacing: one budget per process, every source together', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const simulator = async (): Promise<Simulator> => cleanup.use(await startSimulator({ port: 0 }));

  /** A ledger at `db` with these rows, last sent in 2020: UNKNOWN, or FAILED by an inquiry (it may have arrived). */
  const seed = async (db: string, unknown: readonly string[], failedByInquiry: readonly string[] = []): Promise<void> => {
    const old = openLedger(db, { clock: () => LONG_AGO });
    for (const guid of [...unknown, ...failedByInquiry]) await seedRow(old, guid, 'UNKNOWN');
    for (const guid of failedByInquiry) await orThrow(old.execute(guid, { type: 'Resolve', outcome: 'absent' }));
    await old.close();
  };

  it("over the budget, a channel's resend that needs an inquiry gets E901 with Retry-After: nothing asked, nothing sent, counted as deferred", async () => {
    const dir = tmp();
    await seed(join(dir, 'ledger.db'), [], ['PACE-A', 'PACE-B']);
    // One inquiry an hour, and no settler: the first resend's inquiry takes the whole budget.
    const h: Harness = cleanup.use(await startHarness(dir, { relay: { inquiryRate: '1/h', settleEveryMs: 0 } }));
    const a = await h.post(transferBody('PACE-A').body);
    expect(a.json()['code']).toBe('0000');
    expect([h.sim.inquiries('PACE-A'), h.sim.guidStats('PACE-A').calls]).toEqual([1, 1]);

    const b = await h.post(transferBody('PACE-B').body);
    expect([b.status, b.json()['code']]).toEqual([504, 'E901']);
    expect(b.json()['message']).toContain('inquiries are paced (--inquiry-rate)');
    const retryAfter = Number(b.headers['retry-after']);
    // The budget has room again an hour after PACE-A's inquiry.
    expect(retryAfter).toBeGreaterThan(3500);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    expect([h.sim.inquiries('PACE-B'), h.sim.guidStats('PACE-B').calls]).toEqual([0, 0]);
    expect((await h.get('/v1/transfers/PACE-B')).json()).toMatchObject({ status: 'FAILED', attempts: 1 });
    expect(await metricAt(h.relay.url, 'guidgate_inquiries_deferred_total')).toBe(1);
  });

  it('over the budget, a first send in the continuity window is held the same way: E901 material, nothing stored, nothing sent', async () => {
    const dir = tmp();
    const sim = await simulator();
    const store = cleanup.use(openLedger(join(dir, 'ledger.db')));
    const account = createAccountClient({ baseUrl: sim.url, timeoutMs: 1000, inquiryPacing: { rate: { count: 1, perMs: 3_600_000 } } });
    cleanup.add(() => account.close());
    // The budget's one turn, taken by a channel's inquiry.
    expect((await account.inquire('OTHER', undefined, { waits: false })).kind).toBe('absent');
    const t = transferBody('PACE-NEW');
    const claimed = await claimAfterInquiry({ store, account }, 'PACE-NEW', { type: 'Submit', request: t.body, fingerprint: t.fingerprint, timeoutMs: 1000, maxAttempts: 3 }, LONG_AGO);
    expect(claimed.inquiryDeferredMs).toBeGreaterThan(3_500_000);
    expect(E.isRight(claimed.result) && claimed.result.right.kind === 'refused' ? claimed.result.right.refusal.reason : null).toBe('inquiry-unclear');
    expect(await orThrow(store.getLedger('PACE-NEW'))).toBeNull();
    expect([sim.inquiries('PACE-NEW'), sim.stats().totalCalls]).toEqual([0, 0]);
  });

  it('a storm of due UNKNOWN rows: resolve and the settler never let the account system see more than the rate in any second, and settle every row', async () => {
    const rows = Array.from({ length: 60 }, (_, i) => `STORM-${String(i).padStart(3, '0')}`);
    // resolve, a process of its own, at 20/s.
    const sim = await simulator();
    const db = join(tmp(), 'ledger.db');
    await seed(db, rows);
    const r = await cli(['resolve', '--db', db, '--account-url', sim.url, '--inquiry-rate', '20/s', '--concurrency', '16', '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ candidates: 60, absent: 60 });
    expect(sim.inquiryLoad().total).toBe(60);
    expect(sim.inquiryLoad().peakPerSecond).toBeLessThanOrEqual(20);

    // serve's settler at 20/s (background work leaving 2 a second to channels' requests).
    const dir = tmp();
    await seed(join(dir, 'ledger.db'), rows);
    const h: Harness = cleanup.use(await startHarness(dir, { relay: { inquiryRate: '20/s', settleEveryMs: 200 } }));
    const unknown = async (): Promise<number> => ((await h.get('/v1/stats')).json() as { statuses: { UNKNOWN: { count: number } } }).statuses.UNKNOWN.count;
    await waitFor(async () => (await unknown()) === 0, { what: 'the settler settling the storm', timeoutMs: 60_000, intervalMs: 200 });
    expect(h.sim.inquiryLoad().total).toBe(60);
    expect(h.sim.inquiryLoad().peakPerSecond).toBeLessThanOrEqual(20);
    expect(await metricAt(h.relay.url, 'guidgate_inquiries_deferred_total')).toBeGreaterThan(0);
  });
});
