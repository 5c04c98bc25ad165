/**
 * The send window (src/send/sendWindow.ts), kept by `sendClaimed` for every path that sends: a claim acknowledged
 * later than half the grace after its write started is not called. A real SQLite ledger and the bundled simulator
 * over loopback; the window is measured on a clock the test moves, and the store's `execute` moves it as a commit
 * whose acknowledgement was held back would, so the cases do not depend on this machine's speed.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/events/decide.js';
import type { EventStore } from '../../src/events/store.js';
import { orThrow } from '../../src/events/storeResult.js';
import { createAccountClient, type AccountClient } from '../../src/account/accountClient.js';
import { buildApp } from '../../src/relay/app.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { relayTransfer } from '../../src/relay/relayTransfer.js';
import type { SendLogger } from '../../src/send/sendClaimed.js';
import { reprocessFailed } from '../../src/commands/reprocess.js';
import { sendWindowMs } from '../../src/send/sendWindow.js';
import { decodeTransferRequest } from '../../src/contract/transferRequest.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { openLedger } from '../support/ledgerStore.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { sleep } from '../support/waitFor.js';

const GRACE_MS = 1000;
const WINDOW_MS = sendWindowMs(GRACE_MS);

/** The clock the window is measured on, moved only by the test (and the store below). */
function testClock() {
  let t = 1_000;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

/**
 * `store` whose `execute` of the commands in `slow` commits at once but is acknowledged `lateMs` later on `clock`:
 * a COMMIT whose reply was held back, or a process frozen right after it.
 */
function lateAcks(store: EventStore, clock: ReturnType<typeof testClock>, slow: ReadonlyArray<Command['type']>, lateMs: number): EventStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop !== 'execute' || typeof value !== 'function') return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      return async (...args: Parameters<EventStore['execute']>) => {
        const result = await store.execute(...args);
        if (slow.includes(args[1].type)) clock.advance(lateMs);
        return result;
      };
    },
  });
}

function collectingLog(): SendLogger & { lines: Array<{ level: string; line: Record<string, unknown>; message: string }> } {
  const lines: Array<{ level: string; line: Record<string, unknown>; message: string }> = [];
  return { lines, warn: (line, message) => lines.push({ level: 'warn', line, message }), error: (line, message) => lines.push({ level: 'error', line, message }) };
}

const body = (guid: string) => Buffer.from(JSON.stringify({ guid, from: 'ACC-1', to: 'ACC-2', amount: 5 }));

/** The request as the relay stores it (body and fingerprint), for rows the test claims itself. */
function claimOf(guid: string) {
  const decoded = decodeTransferRequest(body(guid), undefined);
  if (decoded._tag === 'Left') throw new Error('the test body does not decode');
  return decoded.right;
}

describe('the send window: a claim acknowledged too late is not called', () => {
  const tmp = useTempDir();
  let sim: Simulator;
  let account: AccountClient;
  const cleanup = useCleanup();
  const setUp = async () => {
    sim = cleanup.use(await startSimulator({ port: 0 }));
    account = cleanup.use(createAccountClient({ baseUrl: sim.url, timeoutMs: 2000 }));
    return cleanup.use(openLedger(join(tmp(), 'l.db')));
  };

  it('a first send whose claim came back past the window: E901, no call, the row stays SENT for the sweep, counted and logged with the elapsed time', async () => {
    const store = await setUp();
    const clock = testClock();
    const log = collectingLog();
    const metrics = createMetrics(store, Date.now);
    const deps = { account, metrics, timeoutMs: 2000, maxAttempts: 3, graceMs: GRACE_MS, monotonicNow: clock.now, sendLog: log };
    const late = await relayTransfer({ ...deps, store: lateAcks(store, clock, ['Submit'], WINDOW_MS + 1) }, body('LATE-1'), undefined);
    expect([late.reply.status, late.reply.code]).toEqual([504, 'E901']);
    expect(sim.guidStats('LATE-1').calls).toBe(0);
    expect(await orThrow(store.getLedger('LATE-1'))).toMatchObject({ status: 'SENT', attempts: 1 });
    expect(log.lines).toEqual([{ level: 'warn', line: { guid: 'LATE-1', attempt: 1, elapsedMs: WINDOW_MS + 1, windowMs: WINDOW_MS }, message: expect.stringContaining('not sent') as string }]);
    expect(await metrics.registry.metrics()).toContain('guidgate_sends_withheld_total{reason="claim-too-slow"} 1');

    // At the window's very edge the call is still made (the rule is "more than the window").
    const edge = await relayTransfer({ ...deps, store: lateAcks(store, clock, ['Submit'], WINDOW_MS) }, body('EDGE-1'), undefined);
    expect(edge.reply.code).toBe('0000');
    expect(sim.guidStats('EDGE-1').calls).toBe(1);
  });

  it('a resend after an inquiry: the window starts at the write after the inquiry, not before the inquiry; that write late is not called', async () => {
    const store = await setUp();
    const clock = testClock();
    // Rows FAILED by an inquiry (their attempt may have arrived), claimed as the relay claims them: a resend inquires first.
    for (const g of ['RE-1', 'RE-2']) {
      const request = claimOf(g);
      for (const c of [
        { type: 'Submit', request: request.body, fingerprint: request.fingerprint, timeoutMs: 2000, maxAttempts: 3 },
        { type: 'RecordTimeout', attempt: 1, reason: 'timeout' },
        { type: 'Resolve', outcome: 'absent' },
      ] satisfies Command[]) await orThrow(store.execute(g, c));
      expect((await orThrow(store.getLedger(g)))?.failedByInquiry).toBe(true);
    }
    // The inquiry itself takes three windows: it is not inside the window, the write after it is.
    const slowInquiry: AccountClient = { transfer: (b, g) => account.transfer(b, g), close: () => Promise.resolve(), inquire: async (g) => { clock.advance(WINDOW_MS * 3); return account.inquire(g); } };
    const deps = { account: slowInquiry, metrics: createMetrics(store, Date.now), timeoutMs: 2000, maxAttempts: 3, minAgeMs: 0, graceMs: GRACE_MS, monotonicNow: clock.now };
    const resent = await relayTransfer({ ...deps, store }, body('RE-1'), undefined);
    expect(resent.reply.code).toBe('0000');
    expect(sim.guidStats('RE-1').calls).toBe(1);

    const late = await relayTransfer({ ...deps, store: lateAcks(store, clock, ['Submit'], WINDOW_MS + 1) }, body('RE-2'), undefined);
    expect(late.reply.code).toBe('E901');
    expect(sim.guidStats('RE-2').calls).toBe(0);
    expect(await orThrow(store.getLedger('RE-2'))).toMatchObject({ status: 'SENT', attempts: 2 });
  });

  it('a call that starts late after the window\'s check keeps the deadline the window allows: past it, no byte is written (E902, the row FAILED)', async () => {
    const store = await setUp();
    const clock = testClock();
    const timeoutMs = 300;
    const fast = cleanup.use(createAccountClient({ baseUrl: sim.url, timeoutMs }));
    // Between the check and the call (a GC pause, a frozen VM, as the relay's monotonic clock sees it): the window
    // left at the check plus the whole timeout, and a little more.
    const late: AccountClient = {
      transfer: async (b, g, trace, latestStart) => {
        await sleep(WINDOW_MS + timeoutMs + 100); // the passage of time is the point
        return fast.transfer(b, g, trace, latestStart);
      },
      inquire: (g) => fast.inquire(g),
      close: () => Promise.resolve(),
    };
    const deps = { account: late, metrics: createMetrics(store, Date.now), timeoutMs, maxAttempts: 3, graceMs: GRACE_MS, monotonicNow: clock.now };
    const r = await relayTransfer({ ...deps, store }, body('SLOW-START-1'), undefined);
    expect(r.reply.code).toBe('E902');
    expect(sim.guidStats('SLOW-START-1').calls).toBe(0);
    expect(await orThrow(store.getLedger('SLOW-START-1'))).toMatchObject({ status: 'FAILED', attempts: 1 });
  });

  it('reprocess, and the operator API\'s reprocess: a row whose Send came back past the window is counted withheld, not sent, left SENT', async () => {
    const store = await setUp();
    const clock = testClock();
    for (const g of ['RP-1', 'RP-2']) {
      await orThrow(store.execute(g, { type: 'Submit', request: body(g).toString(), fingerprint: g, timeoutMs: 2000, maxAttempts: 3 }));
      await orThrow(store.execute(g, { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' }));
    }
    const slow = lateAcks(store, clock, ['Send'], WINDOW_MS + 1);
    const log = collectingLog();
    const summary = await reprocessFailed({ store: slow, account, monotonicNow: clock.now, sendLog: log }, { guid: 'RP-1', maxAttempts: 3, timeoutMs: 2000, graceMs: GRACE_MS, limit: 1 });
    expect(summary).toMatchObject({ candidates: 1, withheld: 1, done: 0, ledgerErrors: 0 });
    expect(sim.guidStats('RP-1').calls).toBe(0);
    expect(await orThrow(store.getLedger('RP-1'))).toMatchObject({ status: 'SENT', attempts: 2 });
    expect(log.lines.map((l) => [l.level, l.line['guid']])).toEqual([['warn', 'RP-1']]);

    const app = buildApp({ store: slow, account, metrics: createMetrics(store, Date.now), timeoutMs: 2000, maxAttempts: 3, graceMs: GRACE_MS, monotonicNow: clock.now, consoleDir: null });
    cleanup.add(() => app.close());
    const r = await app.inject({ method: 'POST', url: '/v1/transfers/RP-2/reprocess', payload: '{}', headers: { 'content-type': 'application/json' } });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ outcome: 'withheld', after: { status: 'SENT', attempts: 2 } });
    expect(sim.guidStats('RP-2').calls).toBe(0);
  });
});
