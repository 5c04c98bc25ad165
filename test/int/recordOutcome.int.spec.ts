import { join } from 'node:path';
import { describe, it, expect } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { recordOutcome } from '../../src/send/recordOutcome.js';
import { sweepOrphans } from '../../src/send/sweepOrphans.js';
import { useTempDir } from '../support/tmp.js';
import { createAccountClient, type AccountClient } from '../../src/account/accountClient.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { relayTransfer, replyForSend } from '../../src/relay/relayTransfer.js';
import { sendClaimed } from '../../src/send/sendClaimed.js';
import { countSend } from '../../src/commands/reprocess.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { orThrow } from '../../src/events/storeResult.js';
import { expectLeft, refusingStore } from '../support/storeResult.js';
import type { EventLog } from '../../src/events/store.js';
import type { LedgerState } from '../../src/events/state.js';

const submit = { type: 'Submit', request: '{"guid":"L"}', fingerprint: 'f', timeoutMs: 1000, maxAttempts: 3 } as const;
const answer = { kind: 'definite', code: '0000', body: '{"code":"0000","late":true}', status: 200, latencyMs: 9000 } as const;

/** Claims and sends L: the row as its Sent left it, what the relay hands recordOutcome after the call. */
async function sentRow(store: EventLog): Promise<LedgerState> {
  const claimed = await orThrow(store.execute('L', submit));
  if (claimed.kind !== 'applied') throw new Error('claim refused');
  return claimed.state;
}

describe('recording an outcome against a row that moved', () => {
  const tmp = useTempDir();

  it('an answer that arrives after the sweep made the row UNKNOWN is recorded as Resolved late-answer, not dropped', async () => {
    let now = 1000;
    const store = openLedger(join(tmp(), 'l.db'), { clock: () => now });
    const sent = await sentRow(store);
    now = 1000 + 1000 + 500;
    expect(await orThrow(sweepOrphans(store, 500, now))).toEqual({ neverSent: 0, orphaned: 1 });
    // The row the relay holds (SENT) is out of date: the store must decide on the row as it is (UNKNOWN).
    const r = await orThrow(recordOutcome(store, sent, answer));
    expect(r).toMatchObject({ recorded: true, state: { status: 'DONE', code: '0000', response: answer.body } });
    expect((await orThrow(store.readStream('L'))).map((e) => e.type)).toEqual(['Claimed', 'Sent', 'TimedOut', 'Resolved']);
    expect((await orThrow(store.readStream('L'))).at(-1)?.data).toMatchObject({ source: 'late-answer' });
    await store.close();
  });

  it('the sweep leaves a SENT row alone until its own timeout plus the grace has passed', async () => {
    let now = 1000;
    const store = openLedger(join(tmp(), 'l.db'), { clock: () => now });
    const sent = await sentRow(store);
    now = 2499;
    expect(await orThrow(sweepOrphans(store, 500, now))).toEqual({ neverSent: 0, orphaned: 0 });
    const r = await orThrow(recordOutcome(store, sent, answer));
    expect(r).toMatchObject({ recorded: true, state: { status: 'DONE' } });
    expect((await orThrow(store.readStream('L'))).map((e) => e.type)).toEqual(['Claimed', 'Sent', 'Answered']);
    await store.close();
  });

  it('a timeout for a row the sweep already settled changes nothing', async () => {
    let now = 1000;
    const store = openLedger(join(tmp(), 'l.db'), { clock: () => now });
    const sent = await sentRow(store);
    now = 10_000;
    await orThrow(sweepOrphans(store, 500, now));
    const r = await orThrow(recordOutcome(store, sent, { kind: 'unknown', reason: 'timeout', detail: 'x', latencyMs: 1 }));
    expect(r).toMatchObject({ recorded: false, state: { status: 'UNKNOWN' } });
    expect(await orThrow(store.readStream('L'))).toHaveLength(3);
    await store.close();
  });

  it('an answer to attempt 1 after attempt 2 was sent and answered: kept as a StaleAnswer, counted, logged as a possible double application; the reply is the ledger\'s', async () => {
    let now = 1000;
    const store = openLedger(join(tmp(), 'l.db'), { clock: () => now });
    const attempt1 = await sentRow(store);
    // Meanwhile the row was swept, found absent, sent again (attempt 2) and answered.
    now = 10_000;
    for (const c of [
      { type: 'RecordTimeout', attempt: 1, reason: 'timeout' },
      { type: 'Resolve', outcome: 'absent' },
      { type: 'Send', timeoutMs: 1000, maxAttempts: 3, minAgeMs: 0, inquiry: { seq: 3, at: now, answer: { kind: 'absent' } } },
      { type: 'RecordAnswer', attempt: 2, code: '0000', response: '{"code":"0000","n":2}', latencyMs: 3 },
    ] as const) await orThrow(store.execute('L', c));
    const lines: Array<[string, Record<string, unknown>, string]> = [];
    const sendLog = { warn: (l: Record<string, unknown>, m: string) => lines.push(['warn', l, m]), error: (l: Record<string, unknown>, m: string) => lines.push(['error', l, m]) };
    const metrics = createMetrics(store, Date.now);
    // Attempt 1's call, made late (a claim acknowledged late), answers now.
    const lateAccount = { transfer: async () => ({ kind: 'definite', code: '0000', body: '{"code":"0000","n":1}', status: 200, latencyMs: 5 }) as const, inquire: () => Promise.reject(new Error('not asked')), close: async () => {} };
    const r = await sendClaimed({ store, account: lateAccount, metrics, sendWindowMs: 2500, sendLog }, { state: attempt1, startedAt: performance.now() });
    expect(r).toMatchObject({ sent: true, recorded: { _tag: 'Right', right: { recorded: false, state: { status: 'DONE', attempts: 2 }, stale: { attempt: 1, currentAttempt: 2, code: '0000' } } } });
    // The channel that made attempt 1 hears the ledger's answer (attempt 2's), never a second one.
    expect(replyForSend(r)).toMatchObject({ code: '0000', body: '{"code":"0000","n":2}', replayed: true });
    expect((await orThrow(store.readStream('L'))).at(-1)).toMatchObject({ type: 'StaleAnswer', data: { attempt: 1, currentAttempt: 2, response: '{"code":"0000","n":1}' } });
    expect(lines).toEqual([['error', { guid: 'L', attempt: 1, currentAttempt: 2, code: '0000' }, 'possible double application of GUID L (attempt 1 answered after attempt 2)']]);
    expect(await metrics.registry.metrics()).toContain('guidgate_stale_answers_total{attempt="older"} 1');
    await store.close();
  });

  it('a call that left (answered, or its outcome unknown) while its row became FAILED is answered E901, never E902 "not sent"', async () => {
    let now = 1000;
    const store = openLedger(join(tmp(), 'l.db'), { clock: () => now });
    const attempt1 = await sentRow(store);
    // Meanwhile the row was swept, found absent, sent again (attempt 2), and attempt 2's connection was refused: FAILED.
    now = 10_000;
    for (const c of [
      { type: 'RecordTimeout', attempt: 1, reason: 'timeout' },
      { type: 'Resolve', outcome: 'absent' },
      { type: 'Send', timeoutMs: 1000, maxAttempts: 3, minAgeMs: 0, inquiry: { seq: 3, at: now, answer: { kind: 'absent' } } },
      { type: 'RecordConnectFailure', attempt: 2, reason: 'refused' },
    ] as const) await orThrow(store.execute('L', c));
    const late = (outcome: Awaited<ReturnType<AccountClient['transfer']>>) => ({ transfer: async () => outcome, inquire: () => Promise.reject(new Error('not asked')), close: async () => {} });
    const send = (outcome: Awaited<ReturnType<AccountClient['transfer']>>) =>
      sendClaimed({ store, account: late(outcome), metrics: createMetrics(store, Date.now), sendWindowMs: 2500 }, { state: attempt1, startedAt: performance.now() });
    // Attempt 1 reached the account system and was answered: the transfer may be applied, so "not sent" would be false.
    const answered = await send(answer);
    expect(answered).toMatchObject({ sent: true, recorded: { _tag: 'Right', right: { recorded: false, state: { status: 'FAILED' }, stale: { attempt: 1 } } } });
    expect(replyForSend(answered).code).toBe('E901');
    expect(countSend(answered).outcome).toBe('unknown');
    // Attempt 1's request left and timed out: its outcome is unknown, as the contract's E901 says.
    const timedOut = await send({ kind: 'unknown', reason: 'timeout', detail: 'x', latencyMs: 1000 });
    expect(timedOut).toMatchObject({ sent: true, recorded: { _tag: 'Right', right: { recorded: false, state: { status: 'FAILED' } } } });
    expect(replyForSend(timedOut).code).toBe('E901');
    expect(countSend(timedOut).outcome).toBe('unknown');
    // A call that never left is still "not sent".
    const refused = await send({ kind: 'failed', reason: 'refused', detail: 'x', latencyMs: 1 });
    expect([replyForSend(refused).code, countSend(refused).outcome]).toEqual(['E902', 'failed']);
    await store.close();
  });

  it('a ledger that cannot be written comes back as a Left (the caller answers E901)', async () => {
    const store = openLedger(join(tmp(), 'l.db'));
    const sent = await sentRow(store);
    await store.close();
    await expectLeft(recordOutcome(store, sent, answer), 'LEDGER_CLOSED');
  });
});

describe('sendClaimed says what happened; the reply and the reprocess count are read from it', () => {
  const tmp = useTempDir();
  const submit = { type: 'Submit', request: '{"guid":"L","from":"ACC-1","to":"ACC-2","amount":100}', fingerprint: 'f', timeoutMs: 2000, maxAttempts: 3 } as const;

  const withSimulator = async (work: (account: AccountClient, sim: Simulator) => Promise<void>): Promise<void> => {
    const sim = await startSimulator({ port: 0, host: '127.0.0.1' });
    const account = createAccountClient({ baseUrl: sim.url, timeoutMs: 2000 });
    try {
      await work(account, sim);
    } finally {
      await account.close();
      await sim.close();
    }
  };

  it('sent and recorded: the definite answer is the reply and counts as done', async () => {
    const store = openLedger(join(tmp(), 'l.db'));
    const claimed = await orThrow(store.execute('L', submit));
    if (claimed.kind !== 'applied') throw new Error('not claimed');
    await withSimulator(async (account) => {
      const r = await sendClaimed({ store, account, metrics: createMetrics(store, Date.now), sendWindowMs: 2500 }, { state: claimed.state, startedAt: performance.now() });
      expect(r).toMatchObject({ sent: true, call: { kind: 'definite', code: '0000' }, recorded: { _tag: 'Right', right: { recorded: true, state: { status: 'DONE' } } } });
      const reply = replyForSend(r);
      expect([reply.status, reply.code, reply.replayed]).toEqual([200, '0000', false]);
      expect(countSend(r)).toEqual({ outcome: 'done', detail: '0000' });
    });
    await store.close();
  });

  it('sent, but the outcome could not be recorded: E901 (the request left) and a ledger error, never "done"', async () => {
    const store = openLedger(join(tmp(), 'l.db'));
    const claimed = await orThrow(store.execute('L', submit));
    if (claimed.kind !== 'applied') throw new Error('not claimed');
    const metrics = createMetrics(store, Date.now);
    await store.close();
    await withSimulator(async (account, sim) => {
      const r = await sendClaimed({ store, account, metrics, sendWindowMs: 2500 }, { state: claimed.state, startedAt: performance.now() });
      expect(r).toMatchObject({ sent: true, call: { kind: 'definite' }, recorded: { _tag: 'Left', left: { code: 'LEDGER_CLOSED' } } });
      expect(replyForSend(r).code).toBe('E901');
      expect(countSend(r).outcome).toBe('ledger-error');
      expect(sim.guidStats('L')).toMatchObject({ calls: 1 });
    });
  });

  it('through the relay: sent, but the outcome could not be recorded: E901 to the channel and one log line with the store error (found in review)', async () => {
    const store = openLedger(join(tmp(), 'l.db'));
    // The claim commits; every write after it (the outcome) is refused, as by a ledger lost in between.
    let writes = 0;
    const failing = refusingStore(store, (m) => (m === 'execute' || m === 'appendEvents') && ++writes > 1);
    const lines: Record<string, unknown>[] = [];
    await withSimulator(async (account, sim) => {
      const body = Buffer.from(JSON.stringify({ guid: 'LOST-1', from: 'ACC-1', to: 'ACC-2', amount: 7 }));
      const r = await relayTransfer({ store: failing, account, metrics: createMetrics(store, Date.now), timeoutMs: 2000, maxAttempts: 3, log: (l) => lines.push(l) }, body, undefined);
      expect(r.reply.code).toBe('E901');
      expect(sim.guidStats('LOST-1')).toMatchObject({ calls: 1 });
    });
    expect(lines).toEqual([{ guid: 'LOST-1', reply: 'E901', call: 'definite', error: 'LEDGER_UNAVAILABLE', cause: 'disk I/O error', what: 'sent, but the outcome could not be recorded' }]);
    await store.close();
  });

  it('a row without its stored request is not sent: E503 and a ledger error, and the account system is not called', async () => {
    const store = openLedger(join(tmp(), 'l.db'));
    const claimed = await orThrow(store.execute('L', submit));
    if (claimed.kind !== 'applied') throw new Error('not claimed');
    await withSimulator(async (account, sim) => {
      const r = await sendClaimed({ store, account, metrics: createMetrics(store, Date.now), sendWindowMs: 2500 }, { state: { ...claimed.state, request: null }, startedAt: performance.now() });
      expect(r).toEqual({ sent: false, guid: 'L', why: 'no-stored-request' });
      expect(replyForSend(r).code).toBe('E503');
      expect(countSend(r).outcome).toBe('ledger-error');
      expect(sim.stats().totalCalls).toBe(0);
    });
    await store.close();
  });
});
