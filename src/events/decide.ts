import * as E from 'fp-ts/lib/Either.js';
import { isDefiniteCode, type CallFailedReason, type CallUnknownReason, type NewEvent } from './codecs.js';
import type { LedgerState } from './state.js';

/** What a caller asks of one GUID's stream. `decide` turns it into events or a refusal. */
export type Command =
  /** A channel request: a new GUID is claimed and marked Sent in one step; a FAILED one is sent again. */
  | { type: 'Submit'; request: string; fingerprint: string; channel?: string; timeoutMs: number; maxAttempts: number }
  | { type: 'Claim'; request: string; fingerprint: string; channel?: string }
  /** Resend the stored bytes of a RECEIVED or FAILED row (reprocess). */
  | { type: 'Send'; timeoutMs: number; maxAttempts: number }
  | { type: 'RecordAnswer'; attempt: number; code: string; response: string; latencyMs: number }
  | { type: 'RecordTimeout'; attempt: number; reason: CallUnknownReason; detail?: string }
  | { type: 'RecordConnectFailure'; attempt: number; reason: CallFailedReason; detail?: string }
  | { type: 'SweepOrphan'; graceMs: number }
  | { type: 'Resolve'; outcome: 'processed'; code: string; response: string }
  | { type: 'Resolve'; outcome: 'absent' }
  | { type: 'Purge'; retentionMs: number };

export type RefusalReason =
  | 'not-found'
  | 'exists'
  | 'fingerprint-mismatch'
  | 'wrong-status'
  | 'attempt-cap'
  | 'stale-attempt'
  | 'too-young'
  | 'not-definite';

export interface Refusal {
  readonly reason: RefusalReason;
  readonly state: LedgerState | null;
}

/**
 * Whether a request may see and act on a GUID's row: the same request (fingerprint) and, when the request came
 * with a key, the key that claimed it. Anything else is `fingerprint-mismatch` (E904): nothing sent, nothing
 * changed, and no stored answer shown, since another key's answer is not this key's business.
 */
export function isSameClaim(state: LedgerState, fingerprint: string, channel: string | undefined): boolean {
  return state.fingerprint === fingerprint && (channel === undefined || state.channel === channel);
}

function claimedEvent(command: { request: string; fingerprint: string; channel?: string }, now: number): NewEvent {
  const { request, fingerprint, channel } = command;
  return { type: 'Claimed', at: now, data: { request, fingerprint, ...(channel === undefined ? {} : { channel }) } };
}

const refuse = (reason: RefusalReason, state: LedgerState | null): E.Either<Refusal, never> => E.left({ reason, state });

function sendAgain(state: LedgerState, timeoutMs: number, maxAttempts: number, now: number): E.Either<Refusal, NewEvent[]> {
  if (state.status !== 'FAILED' && state.status !== 'RECEIVED') return refuse('wrong-status', state);
  if (state.attempts >= maxAttempts) return refuse('attempt-cap', state);
  return E.right([{ type: 'Sent', at: now, data: { attempt: state.attempts + 1, timeoutMs } }]);
}

/**
 * The contract's state table as a pure function. Everything it refuses is refused before anything is
 * appended; the store appends exactly what it returns, at `state.lastSeq + 1`.
 */
export function decide(state: LedgerState | null, command: Command, now: number): E.Either<Refusal, NewEvent[]> {
  switch (command.type) {
    case 'Submit':
      if (state === null) {
        return E.right([claimedEvent(command, now), { type: 'Sent', at: now, data: { attempt: 1, timeoutMs: command.timeoutMs } }]);
      }
      if (!isSameClaim(state, command.fingerprint, command.channel)) return refuse('fingerprint-mismatch', state);
      if (state.status !== 'FAILED') return refuse('exists', state);
      return sendAgain(state, command.timeoutMs, command.maxAttempts, now);

    case 'Claim':
      if (state !== null) return refuse(isSameClaim(state, command.fingerprint, command.channel) ? 'exists' : 'fingerprint-mismatch', state);
      return E.right([claimedEvent(command, now)]);

    case 'Send':
      if (state === null) return refuse('not-found', state);
      return sendAgain(state, command.timeoutMs, command.maxAttempts, now);

    case 'RecordAnswer': {
      if (state === null) return refuse('not-found', state);
      if (!isDefiniteCode(command.code)) return refuse('not-definite', state);
      if (state.attempts !== command.attempt) return refuse('stale-attempt', state);
      if (state.status === 'SENT') {
        return E.right([
          { type: 'Answered', at: now, data: { attempt: command.attempt, code: command.code, response: command.response, latencyMs: command.latencyMs } },
        ]);
      }
      // The sweep (or an inquiry that came too early) got there first: a definite answer is still the truth.
      if (state.status === 'UNKNOWN' || state.status === 'FAILED') {
        return E.right([
          { type: 'Resolved', at: now, data: { source: 'late-answer', outcome: 'processed', code: command.code, response: command.response } },
        ]);
      }
      return refuse('wrong-status', state);
    }

    case 'RecordTimeout':
      if (state === null) return refuse('not-found', state);
      if (state.status !== 'SENT') return refuse('wrong-status', state);
      if (state.attempts !== command.attempt) return refuse('stale-attempt', state);
      return E.right([
        { type: 'TimedOut', at: now, data: { attempt: command.attempt, reason: command.reason, ...(command.detail === undefined ? {} : { detail: command.detail }) } },
      ]);

    case 'RecordConnectFailure':
      if (state === null) return refuse('not-found', state);
      if (state.status !== 'SENT') return refuse('wrong-status', state);
      if (state.attempts !== command.attempt) return refuse('stale-attempt', state);
      return E.right([
        { type: 'ConnectFailed', at: now, data: { attempt: command.attempt, reason: command.reason, ...(command.detail === undefined ? {} : { detail: command.detail }) } },
      ]);

    case 'SweepOrphan': {
      if (state === null) return refuse('not-found', state);
      // A RECEIVED row never had its Sent: the owner died before the call, so nothing left.
      if (state.status === 'RECEIVED') {
        if (now - state.updatedAt < command.graceMs) return refuse('too-young', state);
        return E.right([{ type: 'ConnectFailed', at: now, data: { attempt: state.attempts, reason: 'never-sent' } }]);
      }
      // A SENT row may have reached the account system; only after its own call timeout plus the grace can
      // we be sure its owner is gone and will never record the outcome, and even then the outcome is unknown.
      if (state.status === 'SENT') {
        const deadline = (state.sentAt ?? state.updatedAt) + (state.timeoutMs ?? 0) + command.graceMs;
        if (now < deadline) return refuse('too-young', state);
        return E.right([{ type: 'TimedOut', at: now, data: { attempt: state.attempts, reason: 'orphaned' } }]);
      }
      return refuse('wrong-status', state);
    }

    case 'Resolve':
      if (state === null) return refuse('not-found', state);
      if (state.status !== 'UNKNOWN') return refuse('wrong-status', state);
      if (command.outcome === 'absent') {
        return E.right([{ type: 'Resolved', at: now, data: { source: 'inquiry', outcome: 'absent', code: null, response: null } }]);
      }
      if (!isDefiniteCode(command.code)) return refuse('not-definite', state);
      return E.right([
        { type: 'Resolved', at: now, data: { source: 'inquiry', outcome: 'processed', code: command.code, response: command.response } },
      ]);

    case 'Purge':
      if (state === null) return refuse('not-found', state);
      if (state.status !== 'DONE') return refuse('wrong-status', state);
      if (now - state.updatedAt < command.retentionMs) return refuse('too-young', state);
      return E.right([{ type: 'Purged', at: now, data: { retentionMs: command.retentionMs, code: state.code } }]);
  }
}
