/** CONTRACT.md §11, the rule: which event makes a notification due, as a pure function of the state and the event. */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Actor, NewEvent } from '../../src/events/codecs.js';
import { foldEvents } from '../../src/events/evolve.js';
import { notificationsDue, retryDelayMs, type NotifyContext } from '../../src/events/notifications.js';
import { webhookSignature, notifySecret } from '../../src/send/notifier.js';
import { ev, GUID } from '../support/given.js';

const actor = (maxAttempts: number): Actor => ({ by: 'serve', host: 'h', pid: 1, params: { maxAttempts } });
const channelReply: NotifyContext = { replied: true, actor: actor(3) };
const noReply: NotifyContext = { replied: false, actor: actor(3) };
const processed = (at = 9000, response = '{"guid":"G-1","code":"0000"}'): NewEvent => ({ type: 'Resolved', at, data: { source: 'inquiry', outcome: 'processed', code: '0000', response } });
const absent = (at = 9000): NewEvent => ({ type: 'Resolved', at, data: { source: 'inquiry', outcome: 'absent', code: null, response: null } });

/** The types made due when `events` are appended after `history`. */
function due(history: NewEvent[], events: NewEvent[], context: NotifyContext): string[] {
  return notificationsDue(GUID, foldEvents(GUID, history), events, context).map((n) => `${n.type}@${n.seq}`);
}

describe('which event makes a notification due', () => {
  const unknown = [ev.claimed(), ev.sent(1), ev.timedOut(1)];

  it('an inquiry settling an UNKNOWN row (settler, resolve, reconcile --settle, the operator API): transfer.settled, whoever writes it', () => {
    expect(due(unknown, [processed()], noReply)).toEqual(['transfer.settled@3']);
    // The inquiry before a channel's resend, written on the resend's behalf: still one (the channel asked long ago).
    expect(due([...unknown, absent()], [processed()], channelReply)).toEqual(['transfer.settled@4']);
  });

  it('a late answer of a swept row: transfer.settled', () => {
    const late: NewEvent = { type: 'Resolved', at: 9000, data: { source: 'late-answer', outcome: 'processed', code: '0000', response: '{}' } };
    expect(due(unknown, [late], channelReply)).toEqual(['transfer.settled@3']);
  });

  it('the answer in the reply to the channel\'s own request: none; the same answer to reprocess, which no channel waits for: one', () => {
    expect(due([ev.claimed(), ev.sent(1)], [ev.answered(1)], channelReply)).toEqual([]);
    expect(due([ev.claimed(), ev.sent(1), ev.connectFailed(1), ev.sent(2)], [ev.answered(2)], noReply)).toEqual(['transfer.settled@4']);
  });

  it('the continuity window\'s inquiry before a first send (Claimed and Resolved in one append): the reply carries it, none', () => {
    expect(due([], [ev.claimed(), processed()], channelReply)).toEqual([]);
  });

  it('FAILED at the attempt cap (a refused connection, an inquiry that found it absent): transfer.dead_letter; under the cap: none', () => {
    expect(due([ev.claimed(), ev.sent(1)], [ev.connectFailed(1)], { replied: true, actor: actor(1) })).toEqual(['transfer.dead_letter@2']);
    expect(due([ev.claimed(), ev.sent(1)], [ev.connectFailed(1)], channelReply)).toEqual([]);
    expect(due([ev.claimed(), ev.sent(1), ev.connectFailed(1), ev.sent(2), ev.connectFailed(2), ev.sent(3), ev.timedOut(3)], [absent()], noReply)).toEqual(['transfer.dead_letter@7']);
    // No cap recorded by the writer: the default (5).
    expect(due(unknown, [absent()], { replied: false, actor: null })).toEqual([]);
    // Serve's settler knows its --max-attempts without recording it among its parameters.
    expect(due(unknown, [absent()], { replied: false, actor: { by: 'serve', host: 'h', pid: 1, params: { minAgeMs: 1 } }, cap: 1 })).toEqual(['transfer.dead_letter@3']);
  });

  it('nothing else: a claim, a Sent, a timeout, a stale answer, a purge', () => {
    const done = [ev.claimed(), ev.sent(1), ev.answered(1)];
    expect(due([], [ev.claimed(), ev.sent(1)], noReply)).toEqual([]);
    expect(due([ev.claimed(), ev.sent(1)], [ev.timedOut(1)], noReply)).toEqual([]);
    expect(due(done, [ev.purged(99_000)], noReply)).toEqual([]);
    const stale: NewEvent = { type: 'StaleAnswer', at: 9000, data: { attempt: 1, currentAttempt: 1, code: '0000', response: '{}', responseSha256: 'x', latencyMs: 1 } };
    expect(due(done, [stale], noReply)).toEqual([]);
  });

  it('the body: the stored answer byte for byte, no request field but the GUID', () => {
    const response = '{"guid":"G-1", "code":"0000" ,"x":"é"}';
    const [n] = notificationsDue(GUID, foldEvents(GUID, unknown), [processed(Date.UTC(2026, 0, 2), response)], noReply);
    expect(JSON.parse(n!.body)).toEqual({ type: 'transfer.settled', guid: GUID, status: 'DONE', code: '0000', attempts: 1, channel: null, at: '2026-01-02T00:00:00.000Z', response });
  });
});

describe('delivery', () => {
  it('retries from 5 s, doubling, at most 1 h apart', () => {
    expect([1, 2, 3, 4, 10, 11, 12, 50].map(retryDelayMs)).toEqual([5000, 10_000, 20_000, 40_000, 2_560_000, 3_600_000, 3_600_000, 3_600_000]);
  });

  it('signs as Standard Webhooks does, with the file\'s bytes less one trailing newline', () => {
    // The Standard Webhooks reference vector's id, timestamp and body, with a raw (not whsec_) secret.
    const secret = notifySecret(Buffer.from('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n'));
    expect(secret.toString()).toBe('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
    expect(notifySecret(Buffer.from('abc\n\n')).toString()).toBe('abc\n');
    const sig = webhookSignature(secret, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
    expect(sig).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(sig).toBe(`v1,${createHmac('sha256', secret).update('msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}').digest('base64')}`);
  });
});
