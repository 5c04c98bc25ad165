import { describe, it, expect } from 'vitest';
import { decide } from '../../src/events/decide.js';
import { foldEvents, evolve, EvolveError } from '../../src/events/evolve.js';
import { given, ev, GUID } from '../support/given.js';

const submit = { type: 'Submit', request: '{"guid":"G-1"}', fingerprint: 'fp1', timeoutMs: 3000, maxAttempts: 3 } as const;
const NOW = 1_000_000;

describe('decide: allowed transitions of the contract table', () => {
  it('∅ → RECEIVED: Claim appends Claimed at seq 0', () => {
    given().when({ type: 'Claim', request: 'r', fingerprint: 'f' }, NOW).then([{ type: 'Claimed', at: NOW, data: { request: 'r', fingerprint: 'f' } }]);
  });
  it('∅ → SENT: Submit claims and marks the first attempt Sent in one step', () => {
    given().when(submit, NOW).then([
      { type: 'Claimed', at: NOW, data: { request: submit.request, fingerprint: 'fp1' } },
      { type: 'Sent', at: NOW, data: { attempt: 1, timeoutMs: 3000 } },
    ]);
  });
  it('RECEIVED → SENT: Send', () => {
    given(ev.claimed()).when({ type: 'Send', timeoutMs: 2000, maxAttempts: 3 }, NOW).then([{ type: 'Sent', at: NOW, data: { attempt: 1, timeoutMs: 2000 } }]);
  });
  it('FAILED → SENT: a channel resend with the same fingerprint sends again, counting the attempt', () => {
    given(ev.claimed(), ev.sent(1), ev.connectFailed(1)).when(submit, NOW).then([{ type: 'Sent', at: NOW, data: { attempt: 2, timeoutMs: 3000 } }]);
  });
  it('FAILED → SENT: reprocess Send', () => {
    given(ev.claimed(), ev.sent(1), ev.connectFailed(1)).when({ type: 'Send', timeoutMs: 3000, maxAttempts: 3 }, NOW).then([
      { type: 'Sent', at: NOW, data: { attempt: 2, timeoutMs: 3000 } },
    ]);
  });
  it('SENT → DONE: Answered', () => {
    given(ev.claimed(), ev.sent(1)).when({ type: 'RecordAnswer', attempt: 1, code: 'B201', response: 'x', latencyMs: 5 }, NOW).then([
      { type: 'Answered', at: NOW, data: { attempt: 1, code: 'B201', response: 'x', latencyMs: 5 } },
    ]);
  });
  it('SENT → UNKNOWN: TimedOut', () => {
    given(ev.claimed(), ev.sent(1)).when({ type: 'RecordTimeout', attempt: 1, reason: 'reset', detail: 'ECONNRESET' }, NOW).then([
      { type: 'TimedOut', at: NOW, data: { attempt: 1, reason: 'reset', detail: 'ECONNRESET' } },
    ]);
  });
  it('SENT → FAILED: ConnectFailed', () => {
    given(ev.claimed(), ev.sent(1)).when({ type: 'RecordConnectFailure', attempt: 1, reason: 'refused' }, NOW).then([
      { type: 'ConnectFailed', at: NOW, data: { attempt: 1, reason: 'refused' } },
    ]);
  });
  it('RECEIVED → FAILED: an orphaned claim older than the grace was never sent', () => {
    given(ev.claimed(1000)).when({ type: 'SweepOrphan', graceMs: 5000 }, 6000).then([
      { type: 'ConnectFailed', at: 6000, data: { attempt: 0, reason: 'never-sent' } },
    ]);
  });
  it('SENT → UNKNOWN: an orphaned Sent older than its timeout plus the grace', () => {
    given(ev.claimed(1000), ev.sent(1, 1000, 3000)).when({ type: 'SweepOrphan', graceMs: 5000 }, 9000).then([
      { type: 'TimedOut', at: 9000, data: { attempt: 1, reason: 'orphaned' } },
    ]);
  });
  it('UNKNOWN → DONE: Resolved by inquiry, processed', () => {
    given(ev.claimed(), ev.sent(1), ev.timedOut(1)).when({ type: 'Resolve', outcome: 'processed', code: '0000', response: 'r' }, NOW).then([
      { type: 'Resolved', at: NOW, data: { source: 'inquiry', outcome: 'processed', code: '0000', response: 'r' } },
    ]);
  });
  it('UNKNOWN → FAILED: Resolved by inquiry, absent', () => {
    given(ev.claimed(), ev.sent(1), ev.timedOut(1)).when({ type: 'Resolve', outcome: 'absent' }, NOW).then([
      { type: 'Resolved', at: NOW, data: { source: 'inquiry', outcome: 'absent', code: null, response: null } },
    ]);
  });
  it('UNKNOWN → DONE: a late answer after the sweep is recorded, not dropped', () => {
    given(ev.claimed(), ev.sent(1), { type: 'TimedOut', at: 9000, data: { attempt: 1, reason: 'orphaned' } })
      .when({ type: 'RecordAnswer', attempt: 1, code: '0000', response: 'late', latencyMs: 9000 }, NOW)
      .then([{ type: 'Resolved', at: NOW, data: { source: 'late-answer', outcome: 'processed', code: '0000', response: 'late' } }]);
  });
  it('FAILED → DONE: a late answer after an inquiry said absent', () => {
    given(ev.claimed(), ev.sent(1), ev.timedOut(1), { type: 'Resolved', at: 5000, data: { source: 'inquiry', outcome: 'absent', code: null, response: null } })
      .when({ type: 'RecordAnswer', attempt: 1, code: 'E500', response: 'e', latencyMs: 1 }, NOW)
      .then([{ type: 'Resolved', at: NOW, data: { source: 'late-answer', outcome: 'processed', code: 'E500', response: 'e' } }]);
  });
  it('DONE → PURGED: past the retention', () => {
    given(ev.claimed(), ev.sent(1), ev.answered(1, 1100)).when({ type: 'Purge', retentionMs: 1000 }, 2100).then([
      { type: 'Purged', at: 2100, data: { retentionMs: 1000, code: '0000' } },
    ]);
  });
});

describe('decide: refused transitions', () => {
  const done = [ev.claimed(), ev.sent(1), ev.answered(1)];
  const unknown = [ev.claimed(), ev.sent(1), ev.timedOut(1)];
  const failed = [ev.claimed(), ev.sent(1), ev.connectFailed(1)];
  const sent = [ev.claimed(), ev.sent(1)];
  const received = [ev.claimed()];
  const purged = [...done, ev.purged(5000)];

  it('Answered on a DONE row', () => given(...done).when({ type: 'RecordAnswer', attempt: 1, code: '0000', response: 'x', latencyMs: 1 }).thenRefused('wrong-status'));
  it('Sent on an UNKNOWN row (never gamble on a resend)', () => given(...unknown).when({ type: 'Send', timeoutMs: 1, maxAttempts: 9 }).thenRefused('wrong-status'));
  it('Submit on an UNKNOWN row', () => given(...unknown).when(submit).thenRefused('exists'));
  it('Submit on SENT, RECEIVED, DONE and PURGED rows', () => {
    for (const h of [sent, received, done, purged]) given(...h).when(submit).thenRefused('exists');
  });
  it('Submit with another fingerprint under a used GUID, in every state', () => {
    for (const h of [sent, received, done, unknown, failed, purged]) given(...h).when({ ...submit, fingerprint: 'other' }).thenRefused('fingerprint-mismatch');
  });
  it('Claim of an existing GUID', () => given(...received).when({ type: 'Claim', request: 'r', fingerprint: 'fp1' }).thenRefused('exists'));
  it('Send of an unknown GUID', () => given().when({ type: 'Send', timeoutMs: 1, maxAttempts: 3 }).thenRefused('not-found'));
  it('Sent once the attempt cap is used up', () => {
    const h = [ev.claimed(), ev.sent(1), ev.connectFailed(1), ev.sent(2), ev.connectFailed(2), ev.sent(3), ev.connectFailed(3)];
    given(...h).when(submit).thenRefused('attempt-cap');
    given(...h).when({ type: 'Send', timeoutMs: 1, maxAttempts: 4 }).then([{ type: 'Sent', at: NOW, data: { attempt: 4, timeoutMs: 1 } }]);
  });
  it('Send on SENT, DONE, PURGED', () => {
    for (const h of [sent, done, purged]) given(...h).when({ type: 'Send', timeoutMs: 1, maxAttempts: 9 }).thenRefused('wrong-status');
  });
  it('an outcome for another attempt than the one in flight', () => {
    given(...sent).when({ type: 'RecordAnswer', attempt: 2, code: '0000', response: 'x', latencyMs: 1 }).thenRefused('stale-attempt');
    given(...sent).when({ type: 'RecordTimeout', attempt: 2, reason: 'timeout' }).thenRefused('stale-attempt');
    given(...sent).when({ type: 'RecordConnectFailure', attempt: 2, reason: 'refused' }).thenRefused('stale-attempt');
  });
  it('a non-definite code can never make a row DONE', () => {
    given(...sent).when({ type: 'RecordAnswer', attempt: 1, code: 'E400', response: 'x', latencyMs: 1 }).thenRefused('not-definite');
    given(...unknown).when({ type: 'Resolve', outcome: 'processed', code: 'E901', response: 'x' }).thenRefused('not-definite');
  });
  it('TimedOut or ConnectFailed on a row that is not SENT', () => {
    for (const h of [received, done, unknown, failed]) {
      given(...h).when({ type: 'RecordTimeout', attempt: 1, reason: 'timeout' }).thenRefused('wrong-status');
      given(...h).when({ type: 'RecordConnectFailure', attempt: 1, reason: 'refused' }).thenRefused('wrong-status');
    }
  });
  it('Resolve on anything but UNKNOWN', () => {
    for (const h of [received, sent, done, failed, purged]) given(...h).when({ type: 'Resolve', outcome: 'absent' }).thenRefused('wrong-status');
  });
  it('Purge of UNKNOWN, FAILED, RECEIVED, SENT, whatever their age', () => {
    for (const h of [unknown, failed, received, sent]) given(...h).when({ type: 'Purge', retentionMs: 0 }, 10 ** 12).thenRefused('wrong-status');
  });
  it('Purge of a DONE row younger than the retention', () => given(...done).when({ type: 'Purge', retentionMs: 1000 }, 2099).thenRefused('too-young'));
  it('the sweep leaves young rows and settled rows alone', () => {
    given(ev.claimed(1000)).when({ type: 'SweepOrphan', graceMs: 5000 }, 5999).thenRefused('too-young');
    given(ev.claimed(1000), ev.sent(1, 1000, 3000)).when({ type: 'SweepOrphan', graceMs: 5000 }, 8999).thenRefused('too-young');
    for (const h of [done, unknown, failed, purged]) given(...h).when({ type: 'SweepOrphan', graceMs: 0 }, 10 ** 12).thenRefused('wrong-status');
  });
  it('a late answer while a later attempt is in flight is refused', () => {
    given(ev.claimed(), ev.sent(1), ev.connectFailed(1), ev.sent(2))
      .when({ type: 'RecordAnswer', attempt: 1, code: '0000', response: 'x', latencyMs: 1 })
      .thenRefused('stale-attempt');
  });
});

describe('evolve', () => {
  it('projects the contract columns: attempts count every Sent, code follows the state', () => {
    const s = foldEvents(GUID, [ev.claimed(10), ev.sent(1, 10), ev.connectFailed(1, 20), ev.sent(2, 30, 700), ev.answered(2, 40, 'B201', 'resp')]);
    expect(s).toEqual({
      guid: GUID, status: 'DONE', code: 'B201', request: '{"guid":"G-1"}', response: 'resp', fingerprint: 'fp1',
      attempts: 2, createdAt: 10, updatedAt: 40, lastSeq: 4, sentAt: 30, timeoutMs: 700, failedByInquiry: false,
    });
  });
  it('Purged keeps only the tombstone: guid, fingerprint, final code, times', () => {
    const s = foldEvents(GUID, [ev.claimed(10), ev.sent(1, 10), ev.answered(1, 20), ev.purged(99)]);
    expect(s).toMatchObject({ status: 'PURGED', code: '0000', request: null, response: null, fingerprint: 'fp1', createdAt: 10, updatedAt: 99 });
  });
  it('rejects a log that does not start with Claimed or claims twice', () => {
    expect(() => evolve(null, ev.sent(1), GUID)).toThrow(EvolveError);
    expect(() => foldEvents(GUID, [ev.claimed(), ev.claimed()])).toThrow(EvolveError);
  });
  it('decide on the folded state never emits what evolve refuses (Submit on a fresh GUID)', () => {
    const r = decide(null, submit, 5);
    expect(r._tag).toBe('Right');
  });
});
