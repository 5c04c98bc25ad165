/** CONTRACT.md §7, inquiry before a resend: the rule in `decide`, and how `evolve` knows which FAILED rows need it. */
import { describe, it, expect } from 'vitest';
import type { NewEvent } from '../../src/events/codecs.js';
import type { ResendInquiry } from '../../src/events/decide.js';
import { foldEvents } from '../../src/events/evolve.js';
import { mayHaveArrived } from '../../src/events/state.js';
import { given, ev, GUID } from '../support/given.js';

const absentByInquiry: NewEvent = { type: 'Resolved', at: 5000, data: { source: 'inquiry', outcome: 'absent', code: null, response: null } };
/** Sent at 1000, UNKNOWN at 4000, FAILED by an inquiry that said absent at 5000 (lastSeq 3). */
const failedByInquiry = [ev.claimed(), ev.sent(1, 1000), ev.timedOut(1), absentByInquiry];
const failedByRefusal = [ev.claimed(), ev.sent(1, 1000), ev.connectFailed(1)];
const MIN_AGE = 60_000;
const OLD = 1000 + MIN_AGE;
const inquiry = (answer: ResendInquiry['answer'], at = OLD, seq = 3): ResendInquiry => ({ seq, at, answer });
const send = (i?: ResendInquiry) => ({ type: 'Send', timeoutMs: 3000, maxAttempts: 5, minAgeMs: MIN_AGE, ...(i === undefined ? {} : { inquiry: i }) }) as const;
const submit = (i?: ResendInquiry) => ({ ...send(i), type: 'Submit', request: '{"guid":"G-1"}', fingerprint: 'fp1' }) as const;

describe('evolve: which FAILED rows may have arrived', () => {
  it('FAILED through an inquiry that said absent: may have arrived', () => {
    expect(mayHaveArrived(foldEvents(GUID, failedByInquiry)!)).toBe(true);
  });
  it('FAILED through a refused connection, or a claim that was never sent: nothing left', () => {
    expect(mayHaveArrived(foldEvents(GUID, failedByRefusal)!)).toBe(false);
    expect(mayHaveArrived(foldEvents(GUID, [ev.claimed(), { type: 'ConnectFailed', at: 9000, data: { attempt: 0, reason: 'never-sent' } }])!)).toBe(false);
  });
  it('a resend after the inquiry that then is refused: FAILED by the refusal, no longer in doubt', () => {
    const state = foldEvents(GUID, [...failedByInquiry, ev.sent(2, OLD + 10), ev.connectFailed(2, OLD + 20)])!;
    expect(state.status).toBe('FAILED');
    expect(mayHaveArrived(state)).toBe(false);
  });
});

describe('decide: a resend of a row that may have arrived', () => {
  for (const [name, cmd] of [['Send (reprocess)', send], ['Submit (channel resend)', submit]] as const) {
    describe(name, () => {
      it('without a fresh inquiry: refused, nothing sent', () => given(...failedByInquiry).when(cmd(), OLD + 5).thenRefused('needs-inquiry'));
      it('the inquiry was about an earlier state of the row: refused', () => given(...failedByInquiry).when(cmd(inquiry({ kind: 'absent' }, OLD, 2)), OLD + 5).thenRefused('needs-inquiry'));
      it('found processed: DONE with its answer (Resolved, source inquiry), nothing sent, whatever its age', () =>
        given(...failedByInquiry).when(cmd(inquiry({ kind: 'processed', code: '0000', response: 'r' }, 2000)), 2001).then([
          { type: 'Resolved', at: 2001, data: { source: 'inquiry', outcome: 'processed', code: '0000', response: 'r' } },
        ]));
      it('absent, but the last Sent is younger than min-age when asked: refused as too young', () =>
        given(...failedByInquiry).when(cmd(inquiry({ kind: 'absent' }, OLD - 1)), OLD + 5).thenRefused('too-young'));
      it('the inquiry could not tell: refused', () => given(...failedByInquiry).when(cmd(inquiry({ kind: 'unknown' })), OLD + 5).thenRefused('inquiry-unclear'));
      it('absent and old enough: sent again', () =>
        given(...failedByInquiry).when(cmd(inquiry({ kind: 'absent' })), OLD + 5).then([{ type: 'Sent', at: OLD + 5, data: { attempt: 2, timeoutMs: 3000 } }]));
    });
  }
  it('a row FAILED by a refused connection needs no inquiry', () =>
    given(...failedByRefusal).when(send(), 1100).then([{ type: 'Sent', at: 1100, data: { attempt: 2, timeoutMs: 3000 } }]));
  // Found in review: with the cap checked first, a row FAILED by an early inquiry on its last allowed attempt was
  // never asked about again, and an applied transfer stayed FAILED (E902, "not sent") for good.
  describe('at the attempt cap, the inquiry still comes first', () => {
    const capped = { ...send(), maxAttempts: 1 };
    it('without a fresh inquiry: refused for want of one (the relay then asks), not for the cap', () =>
      given(...failedByInquiry).when(capped, OLD).thenRefused('needs-inquiry'));
    it('found processed: DONE with its answer, cap or not', () =>
      given(...failedByInquiry).when({ ...capped, inquiry: inquiry({ kind: 'processed', code: '0000', response: 'r' }) }, OLD + 5).then([
        { type: 'Resolved', at: OLD + 5, data: { source: 'inquiry', outcome: 'processed', code: '0000', response: 'r' } },
      ]));
    it('absent and old enough: now the cap refuses the send', () =>
      given(...failedByInquiry).when({ ...capped, inquiry: inquiry({ kind: 'absent' }) }, OLD + 5).thenRefused('attempt-cap'));
  });
});
