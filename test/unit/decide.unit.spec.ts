import { describe, it, expect } from 'vitest';
import { decide, type Command } from '../../src/events/decide.js';
import type { NewEvent } from '../../src/events/codecs.js';
import { foldEvents } from '../../src/events/evolve.js';
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
  it('an outcome without a detail records none; with one, records it', () => {
    given(ev.claimed(), ev.sent(1)).when({ type: 'RecordTimeout', attempt: 1, reason: 'timeout' }, NOW).then([{ type: 'TimedOut', at: NOW, data: { attempt: 1, reason: 'timeout' } }]);
    given(ev.claimed(), ev.sent(1)).when({ type: 'RecordConnectFailure', attempt: 1, reason: 'connect-timeout', detail: 'UND_ERR_CONNECT_TIMEOUT' }, NOW).then([
      { type: 'ConnectFailed', at: NOW, data: { attempt: 1, reason: 'connect-timeout', detail: 'UND_ERR_CONNECT_TIMEOUT' } },
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
  it('DONE → PURGED: past the retention; the tombstone keeps the code and a SHA-256 of the answer as stored', () => {
    // computed apart: printf '%s' '{"code":"0000"}' | sha256sum
    const sha = 'a37095f6da2ff2b50490c66d4d9cffb7d30c320ee07dd1d292e531002eb40863';
    given(ev.claimed(), ev.sent(1), ev.answered(1, 1100)).when({ type: 'Purge', retentionMs: 1000 }, 2100).then([
      { type: 'Purged', at: 2100, data: { retentionMs: 1000, code: '0000', responseSha256: sha } },
    ]);
  });
  it('DONE → PURGED by an inquiry that brought no answer body: responseSha256 is null', () => {
    given(ev.claimed(), ev.sent(1), ev.timedOut(1), { type: 'Resolved', at: 1500, data: { source: 'inquiry', outcome: 'processed', code: '0000', response: null } })
      .when({ type: 'Purge', retentionMs: 100 }, 2100)
      .then([{ type: 'Purged', at: 2100, data: { retentionMs: 100, code: '0000', responseSha256: null } }]);
  });
});

describe('decide: refused transitions', () => {
  const done = [ev.claimed(), ev.sent(1), ev.answered(1)];
  const unknown = [ev.claimed(), ev.sent(1), ev.timedOut(1)];
  const failed = [ev.claimed(), ev.sent(1), ev.connectFailed(1)];
  const sent = [ev.claimed(), ev.sent(1)];
  const received = [ev.claimed()];
  const purged = [...done, ev.purged(5000)];

  it('Answered on a DONE row: never a second outcome (the answer is kept as a StaleAnswer, below)', () => {
    const r = decide(foldEvents(GUID, done), { type: 'RecordAnswer', attempt: 1, code: '0000', response: 'x', latencyMs: 1 }, NOW);
    expect(r._tag === 'Right' && r.right.map((e) => e.type)).toEqual(['StaleAnswer']);
  });
  it('Sent on an UNKNOWN row (never gamble on a resend)', () => given(...unknown).when({ type: 'Send', timeoutMs: 1, maxAttempts: 9 }).thenRefused('wrong-status'));
  it('Submit on an UNKNOWN row', () => given(...unknown).when(submit).thenRefused('exists'));
  it('Submit on SENT, RECEIVED, DONE and PURGED rows', () => {
    for (const h of [sent, received, done, purged]) given(...h).when(submit).thenRefused('exists');
  });
  it('Submit with another fingerprint under a used GUID, in every state', () => {
    for (const h of [sent, received, done, unknown, failed, purged]) given(...h).when({ ...submit, fingerprint: 'other' }).thenRefused('fingerprint-mismatch');
  });
  it('Claim of an existing GUID', () => given(...received).when({ type: 'Claim', request: 'r', fingerprint: 'fp1' }).thenRefused('exists'));
  it('Claim of an existing GUID with another request', () => given(...received).when({ type: 'Claim', request: 'r', fingerprint: 'other' }).thenRefused('fingerprint-mismatch'));
  it('every command but Submit and Claim on a GUID never seen', () => {
    const commands: Command[] = [
      { type: 'Send', timeoutMs: 1, maxAttempts: 3 },
      { type: 'RecordAnswer', attempt: 1, code: '0000', response: 'x', latencyMs: 1 },
      { type: 'RecordTimeout', attempt: 1, reason: 'timeout' },
      { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' },
      { type: 'SweepOrphan', graceMs: 0 },
      { type: 'Resolve', outcome: 'absent' },
      { type: 'Purge', retentionMs: 0 },
    ];
    for (const command of commands) given().when(command).thenRefused('not-found');
  });
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
  it('Resolve on anything but UNKNOWN, except a FAILED row found processed (reconcile --settle)', () => {
    for (const h of [received, sent, done, failed, purged]) given(...h).when({ type: 'Resolve', outcome: 'absent' }).thenRefused('wrong-status');
    for (const h of [received, sent, done, purged]) given(...h).when({ type: 'Resolve', outcome: 'processed', code: '0000', response: 'x' }).thenRefused('wrong-status');
    given(...failed).when({ type: 'Resolve', outcome: 'processed', code: 'E901', response: 'x' }).thenRefused('not-definite');
    given(...failed).when({ type: 'Resolve', outcome: 'processed', code: '0000', response: 'x' }, NOW).then([
      { type: 'Resolved', at: NOW, data: { source: 'inquiry', outcome: 'processed', code: '0000', response: 'x' } },
    ]);
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
  it('an answer for an attempt the row never sent', () => {
    given(...sent).when({ type: 'RecordAnswer', attempt: 2, code: '0000', response: 'x', latencyMs: 1 }).thenRefused('stale-attempt');
    given(...received).when({ type: 'RecordAnswer', attempt: 1, code: '0000', response: 'x', latencyMs: 1 }).thenRefused('stale-attempt');
  });
});

describe('decide: an answer the row has moved past is kept as a StaleAnswer, never dropped', () => {
  // computed apart: printf '%s' '{"code":"0000"}' | sha256sum
  const sha = 'a37095f6da2ff2b50490c66d4d9cffb7d30c320ee07dd1d292e531002eb40863';
  const late = (attempt: number, code = '0000') => ({ type: 'RecordAnswer', attempt, code, response: '{"code":"0000"}', latencyMs: 7 }) as const;
  const stale = (attempt: number, currentAttempt: number, response: string | null = '{"code":"0000"}', code = '0000'): NewEvent => ({
    type: 'StaleAnswer', at: NOW, data: { attempt, currentAttempt, code, response, responseSha256: sha, latencyMs: 7 },
  });
  const absent: NewEvent = { type: 'Resolved', at: 5000, data: { source: 'inquiry', outcome: 'absent', code: null, response: null } };
  const again = [ev.claimed(), ev.sent(1), ev.timedOut(1), absent, ev.sent(2, 6000)];

  it('attempt 1 answered while attempt 2 is in flight, done, unknown or failed', () => {
    given(...again).when(late(1), NOW).then([stale(1, 2)]);
    given(...again, ev.answered(2, 7000)).when(late(1), NOW).then([stale(1, 2)]);
    given(...again, ev.timedOut(2, 9000)).when(late(1), NOW).then([stale(1, 2)]);
    given(...again, ev.connectFailed(2, 6001)).when(late(1), NOW).then([stale(1, 2)]);
    given(...again, ev.timedOut(2, 9000), { ...absent, at: 9500 }).when(late(1, 'B201'), NOW).then([stale(1, 2, '{"code":"0000"}', 'B201')]);
  });
  it('attempt 1 answered on a PURGED row: code and SHA-256, no body', () => {
    given(...again, ev.answered(2, 7000), ev.purged(99_000)).when(late(1), NOW).then([stale(1, 2, null)]);
  });
  it('the current attempt answered after an inquiry settled the row (DONE) or after purge: kept too, the row unchanged', () => {
    const settled = [ev.claimed(), ev.sent(1), ev.timedOut(1), { type: 'Resolved', at: 5000, data: { source: 'inquiry', outcome: 'processed', code: '0000', response: 'r' } } as NewEvent];
    given(...settled).when(late(1), NOW).then([stale(1, 1)]);
    given(...settled, ev.purged(99_000)).when(late(1), NOW).then([stale(1, 1, null)]);
  });
  it('attempt 1 answered while attempt 2 is in flight, then attempt 2 refused: a resend still inquires first (attempt 1 reached the account system)', () => {
    const refusedAfterStale = [...again, stale(1, 2), ev.connectFailed(2, 6001)];
    given(...refusedAfterStale).when(submit, NOW).thenRefused('needs-inquiry');
    given(...refusedAfterStale).when({ type: 'Send', timeoutMs: 3000, maxAttempts: 3 }, NOW).thenRefused('needs-inquiry');
  });
  it('a non-definite code is still refused: it is no answer', () => {
    given(...again).when({ ...late(1), code: 'E400' }).thenRefused('not-definite');
  });
});

describe('decide and evolve agree', () => {
  /** One history per state, and per way into it that leaves different columns behind. */
  const histories: Record<string, NewEvent[]> = {
    none: [],
    received: [ev.claimed()],
    sent: [ev.claimed(), ev.sent(1)],
    done: [ev.claimed(), ev.sent(1), ev.answered(1)],
    unknown: [ev.claimed(), ev.sent(1), ev.timedOut(1)],
    failed: [ev.claimed(), ev.sent(1), ev.connectFailed(1)],
    'failed by inquiry': [ev.claimed(), ev.sent(1), ev.timedOut(1), { type: 'Resolved', at: 5000, data: { source: 'inquiry', outcome: 'absent', code: null, response: null } }],
    'sent again': [ev.claimed(), ev.sent(1), ev.connectFailed(1), ev.sent(2)],
    purged: [ev.claimed(), ev.sent(1), ev.answered(1), ev.purged(5000)],
  };
  const commands: Command[] = [
    submit,
    { ...submit, fingerprint: 'other' },
    { type: 'Claim', request: 'r', fingerprint: 'fp1' },
    { type: 'Send', timeoutMs: 1, maxAttempts: 9 },
    // The resend of a row an inquiry made FAILED (seq 3 in 'failed by inquiry'), after a fresh inquiry.
    { type: 'Send', timeoutMs: 1, maxAttempts: 9, minAgeMs: 0, inquiry: { seq: 3, at: 10 ** 12, answer: { kind: 'absent' } } },
    { type: 'Send', timeoutMs: 1, maxAttempts: 9, minAgeMs: 0, inquiry: { seq: 3, at: 10 ** 12, answer: { kind: 'processed', code: '0000', response: 'r' } } },
    { type: 'RecordAnswer', attempt: 1, code: '0000', response: 'x', latencyMs: 1 },
    { type: 'RecordAnswer', attempt: 2, code: 'B201', response: 'x', latencyMs: 1 },
    { type: 'RecordTimeout', attempt: 1, reason: 'timeout' },
    { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' },
    { type: 'SweepOrphan', graceMs: 0 },
    { type: 'Resolve', outcome: 'absent' },
    { type: 'Resolve', outcome: 'processed', code: '0000', response: 'r' },
    { type: 'Purge', retentionMs: 0 },
  ];

  it('every event decide emits, on every state, folds with evolve into the state the contract table names', () => {
    const expectedStatus: Partial<Record<NewEvent['type'], string>> = {
      Claimed: 'RECEIVED', Sent: 'SENT', Answered: 'DONE', TimedOut: 'UNKNOWN', ConnectFailed: 'FAILED', Purged: 'PURGED',
    };
    let emitted = 0;
    for (const [name, history] of Object.entries(histories)) {
      const state = foldEvents(GUID, history);
      for (const command of commands) {
        const result = decide(state, command, 10 ** 12);
        if (result._tag === 'Left') continue;
        emitted++;
        const next = foldEvents(GUID, result.right, state);
        const last = result.right[result.right.length - 1]!;
        expect(next?.lastSeq, `${name} + ${command.type}`).toBe((state?.lastSeq ?? -1) + result.right.length);
        if (last.type === 'Resolved') expect(next?.status).toBe(last.data.outcome === 'processed' ? 'DONE' : 'FAILED');
        else if (last.type === 'StaleAnswer') expect(next?.status, `${name} + ${command.type}`).toBe(state?.status);
        else expect(next?.status, `${name} + ${command.type}`).toBe(expectedStatus[last.type]);
      }
    }
    // Most pairs are refusals; the allowed ones must all have been folded, not skipped.
    expect(emitted).toBeGreaterThanOrEqual(20);
  });
});

describe('decide: the continuity window (CONTRACT.md §9), a GUID the ledger does not know, inquired about first', () => {
  const WENT_BACK = NOW - 10_000;
  const withInquiry = (answer: Extract<Command, { type: 'Submit' }>['firstSend'] extends infer F ? F extends { answer: infer A } ? A : never : never, at = NOW, minAgeMs = 5_000) =>
    ({ ...submit, minAgeMs, firstSend: { wentBackAt: WENT_BACK, at, answer } }) as Command;
  const refusalOf = (command: Command) => {
    const r = decide(null, command, NOW);
    return r._tag === 'Left' ? r.left.reason : 'applied';
  };

  it('found processed → Claimed and Resolved (source inquiry) with its answer: DONE, nothing sent, whatever the time', () => {
    const r = decide(null, withInquiry({ kind: 'processed', code: '0000', response: '{"code":"0000"}' }, WENT_BACK + 1), NOW);
    expect(r).toEqual({ _tag: 'Right', right: [
      { type: 'Claimed', at: NOW, data: { request: submit.request, fingerprint: 'fp1' } },
      { type: 'Resolved', at: NOW, data: { source: 'inquiry', outcome: 'processed', code: '0000', response: '{"code":"0000"}' } },
    ] });
    const state = foldEvents(GUID, r._tag === 'Right' ? r.right : []);
    expect([state?.status, state?.code, state?.attempts]).toEqual(['DONE', '0000', 0]);
  });
  it('absent, at least --min-age after the going back → Claimed and Sent as usual', () => {
    expect(decide(null, withInquiry({ kind: 'absent' }, WENT_BACK + 5_000), NOW)).toMatchObject({ _tag: 'Right', right: [{ type: 'Claimed' }, { type: 'Sent', data: { attempt: 1 } }] });
  });
  it('absent too soon after the going back, or no clear answer, or a non-definite code → refused: nothing claimed, nothing sent', () => {
    expect(refusalOf(withInquiry({ kind: 'absent' }, WENT_BACK + 4_999))).toBe('too-young');
    expect(refusalOf(withInquiry({ kind: 'unknown' }, WENT_BACK + 60_000))).toBe('inquiry-unclear');
    expect(refusalOf(withInquiry({ kind: 'processed', code: 'X999', response: '{}' }))).toBe('not-definite');
  });
  it('a GUID the ledger knows is decided as before: the inquiry about an unknown GUID does not apply', () => {
    given(ev.claimed(), ev.sent(1)).when(withInquiry({ kind: 'processed', code: '0000', response: '{}' }), NOW).thenRefused('exists');
  });
  it('a row FAILED by a refused connection, resent inside the window: the same rule (the forgotten log may have sent it since)', () => {
    const refused = [ev.claimed(), ev.sent(1), ev.connectFailed(1)] as const;
    const resolved = { type: 'Resolved', at: NOW, data: { source: 'inquiry', outcome: 'processed', code: '0000', response: '{}' } } as const;
    given(...refused).when(withInquiry({ kind: 'processed', code: '0000', response: '{}' }, WENT_BACK + 1), NOW).then([resolved]);
    given(...refused).when({ type: 'Send', timeoutMs: 2000, maxAttempts: 3, minAgeMs: 5_000, firstSend: { wentBackAt: WENT_BACK, at: NOW, answer: { kind: 'processed', code: '0000', response: '{}' } } }, NOW).then([resolved]);
    given(...refused).when(withInquiry({ kind: 'absent' }, WENT_BACK + 4_999), NOW).thenRefused('too-young');
    given(...refused).when(withInquiry({ kind: 'unknown' }, WENT_BACK + 60_000), NOW).thenRefused('inquiry-unclear');
    given(...refused).when(withInquiry({ kind: 'absent' }, WENT_BACK + 5_000), NOW).then([{ type: 'Sent', at: NOW, data: { attempt: 2, timeoutMs: submit.timeoutMs } }]);
  });
});
