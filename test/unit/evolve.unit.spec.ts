import { describe, it, expect } from 'vitest';
import type { NewEvent } from '../../src/events/codecs.js';
import { evolve, foldEvents, EvolveError } from '../../src/events/evolve.js';
import type { LedgerState } from '../../src/events/state.js';
import { ev, GUID } from '../support/given.js';

/** RECEIVED at 10, then SENT (attempt 1, at 20, 3 s timeout): the state every outcome below starts from. */
const received: LedgerState = {
  guid: GUID, status: 'RECEIVED', code: null, request: '{"guid":"G-1"}', response: null, fingerprint: 'fp1', channel: null,
  attempts: 0, createdAt: 10, updatedAt: 10, lastSeq: 0, sentAt: null, timeoutMs: null, failedByInquiry: false,
};
const sent: LedgerState = { ...received, status: 'SENT', attempts: 1, updatedAt: 20, lastSeq: 1, sentAt: 20, timeoutMs: 3000 };

describe('evolve: every event gives exactly the contract row', () => {
  it('Claimed starts a stream: RECEIVED, seq 0, no attempt yet', () => {
    expect(evolve(null, ev.claimed(10), GUID)).toEqual(received);
  });

  it('Claimed keeps the guid it is folded for', () => {
    expect(evolve(null, ev.claimed(10), 'other-guid').guid).toBe('other-guid');
  });

  it('Sent: SENT, the attempt and timeout of this Sent, the clock of the call', () => {
    expect(evolve(received, ev.sent(1, 20, 3000), GUID)).toEqual(sent);
  });

  it('Sent again after a failure clears the E902 and counts the new attempt', () => {
    const failed = evolve(sent, ev.connectFailed(1, 30), GUID);
    expect(evolve(failed, ev.sent(2, 40, 700), GUID)).toEqual({
      ...sent, code: null, attempts: 2, updatedAt: 40, lastSeq: 3, sentAt: 40, timeoutMs: 700,
    });
  });

  it('Answered: DONE with the code and the response bytes', () => {
    expect(evolve(sent, ev.answered(1, 30, 'B201', 'resp'), GUID)).toEqual({
      ...sent, status: 'DONE', code: 'B201', response: 'resp', updatedAt: 30, lastSeq: 2,
    });
  });

  it('TimedOut: UNKNOWN, E901, nothing else forgotten', () => {
    expect(evolve(sent, ev.timedOut(1, 30), GUID)).toEqual({ ...sent, status: 'UNKNOWN', code: 'E901', updatedAt: 30, lastSeq: 2 });
  });

  it('ConnectFailed: FAILED, E902', () => {
    expect(evolve(sent, ev.connectFailed(1, 30), GUID)).toEqual({ ...sent, status: 'FAILED', code: 'E902', updatedAt: 30, lastSeq: 2 });
  });

  it('Resolved processed: DONE with the inquiry answer', () => {
    const unknown = evolve(sent, ev.timedOut(1, 30), GUID);
    const resolved: NewEvent = { type: 'Resolved', at: 40, data: { source: 'inquiry', outcome: 'processed', code: '0000', response: 'r' } };
    expect(evolve(unknown, resolved, GUID)).toEqual({ ...sent, status: 'DONE', code: '0000', response: 'r', updatedAt: 40, lastSeq: 3 });
  });

  it('Resolved absent: FAILED, E902, no response, marked as made FAILED by an inquiry (it may have arrived)', () => {
    const unknown = evolve(sent, ev.timedOut(1, 30), GUID);
    const absent: NewEvent = { type: 'Resolved', at: 40, data: { source: 'inquiry', outcome: 'absent', code: null, response: null } };
    expect(evolve(unknown, absent, GUID)).toEqual({ ...sent, status: 'FAILED', code: 'E902', updatedAt: 40, lastSeq: 3, failedByInquiry: true });
  });

  it('Purged: the tombstone keeps guid, fingerprint, final code and times, drops request and response', () => {
    const done = evolve(sent, ev.answered(1, 30, '0000', 'resp'), GUID);
    expect(evolve(done, ev.purged(99, '0000'), GUID)).toEqual({
      ...sent, status: 'PURGED', code: '0000', request: null, response: null, updatedAt: 99, lastSeq: 3,
    });
  });
});

describe('evolve: a StaleAnswer is a fact, not a transition', () => {
  const stale = (attempt: number, currentAttempt: number, at = 500): NewEvent => ({
    type: 'StaleAnswer', at, data: { attempt, currentAttempt, code: '0000', response: '{"code":"0000"}', responseSha256: 'x'.repeat(64), latencyMs: 9 },
  });
  const absent: NewEvent = { type: 'Resolved', at: 40, data: { source: 'inquiry', outcome: 'absent', code: null, response: null } };

  it('on every state: only lastSeq moves; status, code, attempts, the stored answer, the times stay', () => {
    const unknown = evolve(sent, ev.timedOut(1, 30), GUID);
    const failedByInquiry = evolve(unknown, absent, GUID);
    const again = evolve(failedByInquiry, ev.sent(2, 50, 700), GUID);
    const done = evolve(again, ev.answered(2, 60, '0000', 'resp'), GUID);
    const purged = evolve(done, ev.purged(99, '0000'), GUID);
    for (const state of [done, purged, evolve(again, ev.timedOut(2, 60), GUID), failedByInquiry]) {
      expect(evolve(state, stale(1, state.attempts), GUID)).toEqual({ ...state, lastSeq: state.lastSeq + 1 });
    }
    // A SENT row only gains the mark a refused connection of its attempt in flight keeps (below).
    expect(evolve(again, stale(1, 2), GUID)).toEqual({ ...again, lastSeq: again.lastSeq + 1, failedByInquiry: true });
  });

  it('an older attempt answered while a later one is in flight: a refused connection of the later one leaves the row may-have-arrived', () => {
    const again = evolve(evolve(sent, ev.connectFailed(1, 30), GUID), ev.sent(2, 50, 700), GUID);
    const refused = evolve(evolve(again, stale(1, 2), GUID), ev.connectFailed(2, 60), GUID);
    expect(refused).toMatchObject({ status: 'FAILED', attempts: 2, failedByInquiry: true });
    // Without that answer, a refused connection is what it always was: nothing left, no inquiry needed.
    expect(evolve(again, ev.connectFailed(2, 60), GUID).failedByInquiry).toBe(false);
  });

  it('keeps a FAILED row marked as may-have-arrived, so the resend after it still inquires first (the min-age trap)', () => {
    const failedByInquiry = evolve(evolve(sent, ev.timedOut(1, 30), GUID), absent, GUID);
    expect(failedByInquiry.failedByInquiry).toBe(true);
    expect(evolve(failedByInquiry, stale(1, 1), GUID).failedByInquiry).toBe(true);
  });

  it('marks a FAILED row by a refused connection may-have-arrived: an older attempt of it did reach the account system', () => {
    const refused = evolve(sent, ev.connectFailed(1, 30), GUID);
    expect(refused.failedByInquiry).toBe(false);
    expect(evolve(refused, stale(1, 1), GUID)).toEqual({ ...refused, lastSeq: refused.lastSeq + 1, failedByInquiry: true });
  });

  it('is an error on an empty stream', () => {
    expect(() => evolve(null, stale(1, 1), GUID)).toThrow(new EvolveError(`${GUID}: StaleAnswer before Claimed`));
  });
});

describe('evolve: a log decide could not have written is an error, not a guess', () => {
  it('anything but Claimed on an empty stream', () => {
    for (const e of [ev.sent(1), ev.answered(1), ev.timedOut(1), ev.connectFailed(1), ev.purged(5)]) {
      expect(() => evolve(null, e, GUID)).toThrow(EvolveError);
      expect(() => evolve(null, e, GUID)).toThrow(`${GUID}: ${e.type} before Claimed`);
    }
  });

  it('Claimed on an existing stream', () => {
    expect(() => evolve(received, ev.claimed(), GUID)).toThrow(new EvolveError(`${GUID}: Claimed on an existing stream`));
  });

  it('EvolveError names itself', () => {
    expect(new EvolveError('x').name).toBe('EvolveError');
  });
});

describe('foldEvents', () => {
  it('projects the contract columns: attempts count every Sent, code follows the state', () => {
    const s = foldEvents(GUID, [ev.claimed(10), ev.sent(1, 10), ev.connectFailed(1, 20), ev.sent(2, 30, 700), ev.answered(2, 40, 'B201', 'resp')]);
    expect(s).toEqual({
      guid: GUID, status: 'DONE', code: 'B201', request: '{"guid":"G-1"}', response: 'resp', fingerprint: 'fp1', channel: null,
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
  it('folds from nothing, or on from a given state', () => {
    expect(foldEvents(GUID, [])).toBeNull();
    expect(foldEvents(GUID, [ev.claimed(10), ev.sent(1, 20, 3000)])).toEqual(sent);
    expect(foldEvents(GUID, [ev.sent(1, 20, 3000)], received)).toEqual(sent);
  });
});
