/**
 * CONTRACT.md §7 end to end: background settling, inquiry before a resend (the min-age trap), the breaker. The real
 * relay (`serve`) on a real ledger file, the bundled simulator, loopback sockets.
 */
import { describe, it, expect } from 'vitest';
import { createAccountClient } from '../../src/account/accountClient.js';
import { reprocessFailed } from '../../src/commands/reprocess.js';
import { resolveUnknown } from '../../src/commands/resolve.js';
import { openLedger } from '../support/ledgerStore.js';
import { startSimulator } from '../../src/simulator/index.js';
import { transferBody } from '../support/commandsSeed.js';
import { freePort, startHarness, type Harness } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { sleep, waitFor } from '../support/waitFor.js';
import { aWholeSettleRun, metricAt } from '../support/settle.js';
import { orThrow } from '../../src/events/storeResult.js';

const metric = (h: Harness, name: string): Promise<number> => metricAt(h.relay.url, name);

describe('settling without an operator (CONTRACT.md §7)', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const harness = async (...args: Parameters<typeof startHarness>): Promise<Harness> => cleanup.use(await startHarness(...args));

  it('an answer later than the channel timeout: serve settles the row by itself, the resend gets the stored answer, one POST /transfer', async () => {
    const h = await harness(tmp(), {
      sim: { faults: { mode: 'late-answer', lateMs: 5000 } },
      relay: { timeoutMs: 300, settleEveryMs: 500, minAgeMs: 1000 },
    });
    const t = transferBody('SETTLE-1');
    const first = await h.post(t.body);
    expect(first.json()['code']).toBe('E901');
    const unknownSince = Date.now();
    await waitFor(async () => (await h.get('/v1/transfers/SETTLE-1')).json()['status'] === 'DONE', { what: 'the settler settling SETTLE-1' });
    const answer = await (await fetch(`${h.sim.url}/transfer/SETTLE-1`)).text();
    const resend = await h.post(t.body);
    expect([resend.status, resend.body, resend.headers['idempotent-replayed']]).toEqual([200, answer, 'true']);
    expect(h.sim.guidStats('SETTLE-1')).toMatchObject({ calls: 1, applied: 1 });
    expect(await metric(h, 'guidgate_settlement_lag_seconds_count')).toBe(1);
    expect(await metric(h, 'guidgate_settle_last_run_timestamp_seconds')).toBeGreaterThan(unknownSince / 1000);
  });

  it('a GUID that stays unknown is asked again at growing intervals, persisted: a restarted relay does not ask before it is due', async () => {
    const dir = tmp();
    const first = await startHarness(dir, { sim: { faults: { mode: 'late-answer', lateMs: 60_000 } }, relay: { timeoutMs: 200, settleEveryMs: 0 } });
    const closeFirst = cleanup.add(() => first.close());
    for (const guid of ['STAYS-1', 'FRESH-1']) expect((await first.post(transferBody(guid).body)).json()['code']).toBe('E901');
    await closeFirst();
    const store = openLedger(first.db);
    const closeStore = cleanup.add(() => store.close());
    const sentAt = (await orThrow(store.getLedger('STAYS-1')))!.sentAt!;
    const recorded = [];
    for (const after of [1000, 2000, 4000, 8000]) recorded.push(await orThrow(store.recordUnclearInquiry('STAYS-1', sentAt, sentAt + after, 1000)));
    // min-age, then twice, four times, … as long.
    expect(recorded).toEqual([
      { inquiries: 1, nextInquiryAt: sentAt + 2000 },
      { inquiries: 2, nextInquiryAt: sentAt + 4000 },
      { inquiries: 3, nextInquiryAt: sentAt + 8000 },
      { inquiries: 4, nextInquiryAt: sentAt + 16_000 },
    ]);
    const due = async (at: number) => (await orThrow(store.queryLedger({ statuses: ['UNKNOWN'], inquiryDueBy: at }))).map((r) => r.guid);
    expect([await due(sentAt + 15_999), await due(sentAt + 16_000)]).toEqual([['FRESH-1'], ['FRESH-1', 'STAYS-1']]);
    await closeStore();

    // A restarted relay (a fresh simulator, which would say absent to any inquiry): its settler asks about
    // FRESH-1 (FAILED) but not about STAYS-1, whose next inquiry is not due yet.
    const h = await harness(dir, { relay: { timeoutMs: 200, settleEveryMs: 100, minAgeMs: 1 } });
    await waitFor(async () => (await h.get('/v1/transfers/FRESH-1')).json()['status'] === 'FAILED', { what: 'the settler settling FRESH-1' });
    // The run that settled FRESH-1 may still be under way: STAYS-1 stays unasked through it and a whole run after.
    await aWholeSettleRun(h.relay.url);
    expect((await h.get('/v1/transfers/STAYS-1')).json()['status']).toBe('UNKNOWN');
    expect([h.sim.inquiries('STAYS-1'), h.sim.inquiries('FRESH-1')]).toEqual([0, 1]);
  });

  it('the min-age trap: resolve too early says absent; the channel resend and reprocess inquire first and find it, zero second applications', async () => {
    // Applied at once, answered only after 30 s, visible to inquiry only 1.5 s after applying.
    const h = await harness(tmp(), {
      sim: { faults: { mode: 'late-answer', lateMs: 30_000, processingMs: 1500 } },
      relay: { timeoutMs: 300, settleEveryMs: 0, minAgeMs: 2500 },
    });
    const store = cleanup.use(openLedger(h.db));
    const account = cleanup.use(createAccountClient({ baseUrl: h.sim.url, timeoutMs: 1000 }));
    const a = transferBody('TRAP-CHANNEL');
    const b = transferBody('TRAP-REPROCESS');
    expect((await Promise.all([h.post(a.body), h.post(b.body)])).map((r) => r.json()['code'])).toEqual(['E901', 'E901']);
    const early = await resolveUnknown({ store, account }, { minAgeMs: 100, graceMs: 1000 });
    expect(early).toMatchObject({ absent: 2 });
    expect(await orThrow(store.getLedger('TRAP-CHANNEL'))).toMatchObject({ status: 'FAILED', failedByInquiry: true });
    h.sim.setFaults({ mode: 'answer' });

    // Too young (its last Sent is under the relay's min-age): E901, nothing sent, nothing asked.
    const young = await h.post(a.body);
    expect(young.json()['code']).toBe('E901');
    expect(young.json()['message']).toContain('too soon');
    const youngReprocess = await reprocessFailed({ store, account }, { maxAttempts: 5, timeoutMs: 1000, minAgeMs: 2500 });
    expect(youngReprocess).toMatchObject({ candidates: 2, held: 2, done: 0 });
    expect(h.sim.stats().totalCalls).toBe(2);

    // Old enough: the fresh inquiry finds both processed.
    const sentAt = (await orThrow(store.getLedger('TRAP-CHANNEL')))!.sentAt!;
    // The point of the test: the same requests, once the last Sent is older than --min-age (2500 ms).
    await sleep(Math.max(0, sentAt + 2600 - Date.now()));
    const answer = await (await fetch(`${h.sim.url}/transfer/TRAP-CHANNEL`)).text();
    const resend = await h.post(a.body);
    expect([resend.status, resend.body, resend.headers['idempotent-replayed']]).toEqual([200, answer, 'true']);
    const r = await reprocessFailed({ store, account }, { maxAttempts: 5, timeoutMs: 1000, minAgeMs: 2500 });
    expect(r).toMatchObject({ candidates: 1, found: 1, done: 1, held: 0 });
    for (const guid of ['TRAP-CHANNEL', 'TRAP-REPROCESS']) {
      expect(h.sim.guidStats(guid)).toMatchObject({ calls: 1, applied: 1 });
      expect((await orThrow(store.readStream(guid))).at(-1)).toMatchObject({ type: 'Resolved', data: { source: 'inquiry', outcome: 'processed' } });
    }
    expect(h.sim.stats().doubleApplied).toEqual([]);
  });

  it('inquiry before a resend, when it truly never arrived: the resend goes out once', async () => {
    // The black hole takes the request and never applies it: UNKNOWN, then absent.
    const h = await harness(tmp(), { sim: { faults: { mode: 'hold' } }, relay: { timeoutMs: 300, settleEveryMs: 0, minAgeMs: 400 } });
    const store = cleanup.use(openLedger(h.db));
    const account = cleanup.use(createAccountClient({ baseUrl: h.sim.url, timeoutMs: 1000 }));
    const t = transferBody('NEVER-1');
    expect((await h.post(t.body)).json()['code']).toBe('E901');
    // resolve and the resend ask only about a row whose last Sent is older than --min-age (400 ms): let it age.
    const sentAt = (await orThrow(store.getLedger('NEVER-1')))!.sentAt!;
    await sleep(Math.max(0, sentAt + 450 - Date.now()));
    expect(await resolveUnknown({ store, account }, { minAgeMs: 400, graceMs: 1000 })).toMatchObject({ absent: 1 });
    h.sim.setFaults({ mode: 'answer' });
    const resend = await h.post(t.body);
    expect(resend.json()['code']).toBe('0000');
    expect(h.sim.guidStats('NEVER-1')).toMatchObject({ calls: 2, applied: 1 });
    expect(await orThrow(store.getLedger('NEVER-1'))).toMatchObject({ status: 'DONE', attempts: 2 });
  });

  for (const kind of ['refuses', 'black-holes'] as const) {
    it(`the breaker: an account system that ${kind} every call; after N calls stop, E902 at once, nothing stored; one trial call closes it`, async () => {
      const port = await freePort();
      const sim = kind === 'black-holes' ? cleanup.use(await startSimulator({ port, faults: { mode: 'hold' } })) : null;
      const N = 3;
      const h = await harness(tmp(), {
        relay: { accountUrl: `http://127.0.0.1:${port}`, timeoutMs: 200, settleEveryMs: 0, breakerFailures: N, breakerCooldownMs: 1500 },
      });
      const first = await Promise.all(Array.from({ length: N }, (_, i) => h.post(transferBody(`BRK-${i}`).body)));
      expect(first.map((r) => r.json()['code'])).toEqual(Array(N).fill(kind === 'refuses' ? 'E902' : 'E901'));
      expect(await metric(h, 'guidgate_breaker_open')).toBe(1);

      const refused = 20;
      for (let i = 0; i < refused; i++) {
        const r = await h.post(transferBody(`BRK-OPEN-${i}`).body);
        expect([r.status, r.json()['code']]).toEqual([503, 'E902']);
        expect(r.json()['message']).toContain('unavailable');
      }
      for (let i = 0; i < refused; i++) expect((await h.get(`/v1/transfers/BRK-OPEN-${i}`)).status).toBe(404);
      // "At once": no call was made for any of them (the calls the relay counts, and those the black hole saw).
      expect(await metric(h, 'guidgate_account_calls_total')).toBe(N);
      if (sim !== null) expect(sim.stats().totalCalls).toBe(N);

      if (sim !== null) {
        // Found in review: a resend of a row an inquiry made FAILED, while the breaker is open, was told E902 ("not
        // sent") about an attempt that may have been applied. It is E901: unknown until an inquiry, nothing sent.
        const store = cleanup.use(openLedger(h.db));
        const account = cleanup.use(createAccountClient({ baseUrl: sim.url, timeoutMs: 1000 }));
        expect(await resolveUnknown({ store, account }, { minAgeMs: 0, graceMs: 1000, limit: 1 })).toMatchObject({ absent: 1 });
        expect(await orThrow(store.getLedger('BRK-0'))).toMatchObject({ status: 'FAILED', failedByInquiry: true });
        const doubt = await h.post(transferBody('BRK-0').body);
        expect([doubt.status, doubt.json()['code']]).toEqual([504, 'E901']);
        expect(sim.stats().totalCalls).toBe(N);
      }

      // Recovery: an account system that answers; after the cooldown one trial call closes the breaker.
      const healthy = sim ?? cleanup.use(await startSimulator({ port }));
      healthy.setFaults({ mode: 'answer' });
      // E902 (nothing stored, nothing sent) until the cooldown has run out; then the same transfer is the trial call.
      const trial = await waitFor(async () => {
        const r = await h.post(transferBody('BRK-TRIAL').body);
        return r.json()['code'] === 'E902' ? null : r;
      }, { intervalMs: 50, what: 'the end of the breaker cooldown' });
      expect(trial.json()['code']).toBe('0000');
      expect(healthy.guidStats('BRK-TRIAL')).toMatchObject({ calls: 1, applied: 1 });
      expect(await metric(h, 'guidgate_breaker_open')).toBe(0);
      expect(await metric(h, 'guidgate_breaker_trips_total')).toBe(1);
      expect((await h.post(transferBody('BRK-AFTER').body)).json()['code']).toBe('0000');
    });
  }
});
