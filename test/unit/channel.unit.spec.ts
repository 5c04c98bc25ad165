import { describe, it, expect } from 'vitest';
import type { NewEvent } from '../../src/events/codecs.js';
import { foldEvents } from '../../src/events/evolve.js';
import { ev, given, GUID } from '../support/given.js';

const claimedBy = (channel: string): NewEvent => ({ type: 'Claimed', at: 1000, data: { request: '{"guid":"G-1"}', fingerprint: 'fp1', channel } });
const submit = { type: 'Submit', request: '{"guid":"G-1"}', fingerprint: 'fp1', timeoutMs: 3000, maxAttempts: 3 } as const;
const NOW = 1_000_000;

describe('the claiming key (CONTRACT.md §6): Claimed records it, decide enforces it', () => {
  it('Submit with a key records its name as the channel of Claimed', () => {
    given().when({ ...submit, channel: 'bank-a' }, NOW).then([
      { type: 'Claimed', at: NOW, data: { request: submit.request, fingerprint: 'fp1', channel: 'bank-a' } },
      { type: 'Sent', at: NOW, data: { attempt: 1, timeoutMs: 3000 } },
    ]);
  });
  it('Claim with a key records it too; without a key Claimed has no channel', () => {
    given().when({ type: 'Claim', request: 'r', fingerprint: 'f', channel: 'k' }, NOW).then([{ type: 'Claimed', at: NOW, data: { request: 'r', fingerprint: 'f', channel: 'k' } }]);
    given().when({ type: 'Claim', request: 'r', fingerprint: 'f' }, NOW).then([{ type: 'Claimed', at: NOW, data: { request: 'r', fingerprint: 'f' } }]);
  });
  it('the projection keeps the channel through every later event (null when claimed without a key)', () => {
    expect(foldEvents(GUID, [claimedBy('bank-a'), ev.sent(1), ev.answered(1), ev.purged(9000)])?.channel).toBe('bank-a');
    expect(foldEvents(GUID, [ev.claimed(), ev.sent(1)])?.channel).toBeNull();
  });
  it("another key's GUID is fingerprint-mismatch (E904) in every state, even with the same request", () => {
    const histories: NewEvent[][] = [
      [claimedBy('bank-a')],
      [claimedBy('bank-a'), ev.sent(1)],
      [claimedBy('bank-a'), ev.sent(1), ev.answered(1)],
      [claimedBy('bank-a'), ev.sent(1), ev.connectFailed(1)],
      [claimedBy('bank-a'), ev.sent(1), ev.timedOut(1)],
    ];
    for (const h of histories) {
      given(...h).when({ ...submit, channel: 'bank-b' }).thenRefused('fingerprint-mismatch');
      given(...h).when({ type: 'Claim', request: 'r', fingerprint: 'fp1', channel: 'bank-b' }).thenRefused('fingerprint-mismatch');
    }
  });
  it('a keyed request for a GUID claimed without a key is refused; an open-mode request is not checked', () => {
    given(ev.claimed(), ev.sent(1), ev.connectFailed(1)).when({ ...submit, channel: 'bank-a' }).thenRefused('fingerprint-mismatch');
    given(claimedBy('bank-a'), ev.sent(1), ev.connectFailed(1)).when(submit, NOW).then([{ type: 'Sent', at: NOW, data: { attempt: 2, timeoutMs: 3000 } }]);
  });
  it('the claiming key resending its FAILED GUID sends again', () => {
    given(claimedBy('bank-a'), ev.sent(1), ev.connectFailed(1)).when({ ...submit, channel: 'bank-a' }, NOW).then([{ type: 'Sent', at: NOW, data: { attempt: 2, timeoutMs: 3000 } }]);
  });
});
