import { expect } from 'vitest';
import type { NewEvent } from '../../src/events/codecs.js';
import { decide, type Command, type RefusalReason } from '../../src/events/decide.js';
import { foldEvents } from '../../src/events/evolve.js';

export const GUID = 'G-1';

/**
 * Given these events, when this command at this time, then these events (or this refusal).
 * The decider specification of emmett, for our one aggregate.
 */
export function given(...history: NewEvent[]) {
  const state = foldEvents(GUID, history);
  return {
    when(command: Command, now = 1_000_000) {
      const result = decide(state, command, now);
      return {
        then(expected: NewEvent[]) {
          expect(result).toEqual({ _tag: 'Right', right: expected });
          // The new events must also fold: decide never emits what evolve cannot take.
          expect(() => foldEvents(GUID, [...history, ...expected])).not.toThrow();
        },
        thenRefused(reason: RefusalReason) {
          expect(result._tag).toBe('Left');
          if (result._tag === 'Left') expect(result.left.reason).toBe(reason);
        },
      };
    },
  };
}

export const ev = {
  claimed: (at = 1000, request = '{"guid":"G-1"}', fingerprint = 'fp1'): NewEvent => ({ type: 'Claimed', at, data: { request, fingerprint } }),
  sent: (attempt = 1, at = 1000, timeoutMs = 3000): NewEvent => ({ type: 'Sent', at, data: { attempt, timeoutMs } }),
  answered: (attempt = 1, at = 1100, code = '0000', response = '{"code":"0000"}'): NewEvent => ({
    type: 'Answered', at, data: { attempt, code, response, latencyMs: 100 },
  }),
  timedOut: (attempt = 1, at = 4000): NewEvent => ({ type: 'TimedOut', at, data: { attempt, reason: 'timeout' } }),
  connectFailed: (attempt = 1, at = 1010): NewEvent => ({ type: 'ConnectFailed', at, data: { attempt, reason: 'refused' } }),
  purged: (at: number, code = '0000'): NewEvent => ({ type: 'Purged', at, data: { retentionMs: 1000, code } }),
};
