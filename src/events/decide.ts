import { createHash } from 'node:crypto';
import * as E from 'fp-ts/lib/Either.js';
import { isDefiniteCode, type CallFailedReason, type CallUnknownReason, type ClaimTrace, type NewEvent } from './codecs.js';
import { mayHaveArrived, type LedgerState } from './state.js';
import { DEFAULTS } from '../shared/defaults.js';

/**
 * A fresh inquiry made by the caller before a resend of a row that may have arrived (CONTRACT.md §7), handed to
 * `decide` with the Submit or Send so that the decision stays pure and is taken inside the write transaction.
 */
export interface ResendInquiry {
  /** The row's lastSeq when it was asked about: the answer is about that row and no later one. */
  readonly seq: number;
  /** When the inquiry was made (before the request left). */
  readonly at: number;
  readonly answer: { readonly kind: 'processed'; readonly code: string; readonly response: string } | { readonly kind: 'absent' } | { readonly kind: 'unknown' };
}

/**
 * An inquiry about a GUID the ledger does not know, made while the continuity window is open (CONTRACT.md §9): the
 * ledger went back at `wentBackAt` (by the ledger's clock) and may have lost this GUID's claim, applied already.
 */
export interface FirstSendInquiry {
  readonly wentBackAt: number;
  /** When the inquiry was made (before the request left). */
  readonly at: number;
  readonly answer: ResendInquiry['answer'];
}

/** Whether a row's last Sent is at least `minAgeMs` old at `at`: only then is a 404 believed. */
export function oldEnoughToAsk(state: LedgerState, at: number, minAgeMs: number): boolean {
  return at - (state.sentAt ?? state.updatedAt) >= minAgeMs;
}

/** Whether a row has been sent `maxAttempts` times (refused connections count): no further send (CONTRACT.md §4). */
export function attemptsUsedUp(state: Pick<LedgerState, 'attempts'>, maxAttempts: number): boolean {
  return state.attempts >= maxAttempts;
}

interface ResendRules {
  readonly timeoutMs: number;
  readonly maxAttempts: number;
  /** Default: `--min-age`'s (src/shared/defaults.ts). */
  readonly minAgeMs?: number;
  readonly inquiry?: ResendInquiry;
  /**
   * The continuity inquiry (CONTRACT.md §9): inside the window, made before any send that carries no inquiry of its
   * own (the first send of a GUID the ledger does not know; the resend of a row whose last send the ledger says
   * definitely did not reach, which the forgotten part of the log may have sent and seen applied).
   */
  readonly firstSend?: FirstSendInquiry;
}

/** What a caller asks of one GUID's stream. `decide` turns it into events or a refusal. */
export type Command =
  /**
   * A channel request: a new GUID is claimed and marked Sent in one step; a FAILED one is sent again. In the
   * continuity window a new GUID comes with `firstSend`, the inquiry made about it first.
   */
  | ({ type: 'Submit'; request: string; fingerprint: string; channel?: string; trace?: ClaimTrace } & ResendRules)
  | { type: 'Claim'; request: string; fingerprint: string; channel?: string; trace?: ClaimTrace }
  /** Resend the stored bytes of a RECEIVED or FAILED row (reprocess). */
  | ({ type: 'Send' } & ResendRules)
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
  /**
   * A timeout or refused connection for another attempt than the row's (it carries no answer, so nothing is lost by
   * leaving it out), or an answer for an attempt the row never sent.
   */
  | 'stale-attempt'
  | 'too-young'
  | 'not-definite'
  /** A FAILED row that may have arrived, and no fresh inquiry about it came with the resend. */
  | 'needs-inquiry'
  /** The fresh inquiry got no usable answer: the earlier attempt may still have arrived. */
  | 'inquiry-unclear';

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

function claimedEvent(command: { request: string; fingerprint: string; channel?: string; trace?: ClaimTrace }, now: number): NewEvent {
  const { request, fingerprint, channel, trace } = command;
  return { type: 'Claimed', at: now, data: { request, fingerprint, ...(channel === undefined ? {} : { channel }), ...(trace === undefined ? {} : { trace }) } };
}

/** SHA-256 (hex) of an answer's UTF-8 bytes: what a tombstone (and a StaleAnswer on one) keeps of it. */
const answerSha256 = (response: string): string => createHash('sha256').update(response, 'utf8').digest('hex');

/** SHA-256 (hex) of the stored answer's UTF-8 bytes: what a tombstone keeps of it; null when there was no answer. */
export function responseSha256(response: string | null): string | null {
  return response === null ? null : answerSha256(response);
}

const refuse = (reason: RefusalReason, state: LedgerState | null): E.Either<Refusal, never> => E.left({ reason, state });

/** The answer as a StaleAnswer on `state`: on a PURGED row only its code and SHA-256 are kept, as purge keeps them. */
function staleAnswer(state: LedgerState, answer: Extract<Command, { type: 'RecordAnswer' }>, now: number): NewEvent {
  const { attempt, code, response, latencyMs } = answer;
  return {
    type: 'StaleAnswer',
    at: now,
    data: {
      attempt, currentAttempt: state.attempts, code, response: state.status === 'PURGED' ? null : response,
      responseSha256: answerSha256(response), latencyMs,
    },
  };
}

function sendAgain(state: LedgerState, rules: ResendRules, now: number): E.Either<Refusal, NewEvent[]> {
  if (state.status !== 'FAILED' && state.status !== 'RECEIVED') return refuse('wrong-status', state);
  // A row that may have arrived is asked about before the attempt cap counts: on its last allowed attempt an
  // inquiry that finds it processed must still settle it (DONE), never leave an applied transfer FAILED.
  if (mayHaveArrived(state)) {
    // The min-age trap: an inquiry made before a slow account system made the transfer visible said absent.
    // Only a fresh inquiry about this very row, made once its last Sent is old enough, may clear the resend.
    const inquiry = rules.inquiry;
    if (inquiry === undefined || inquiry.seq !== state.lastSeq) return refuse('needs-inquiry', state);
    if (inquiry.answer.kind === 'processed') {
      if (!isDefiniteCode(inquiry.answer.code)) return refuse('not-definite', state);
      return E.right([{ type: 'Resolved', at: now, data: { source: 'inquiry', outcome: 'processed', code: inquiry.answer.code, response: inquiry.answer.response } }]);
    }
    if (!oldEnoughToAsk(state, inquiry.at, rules.minAgeMs ?? DEFAULTS.minAgeMs)) return refuse('too-young', state);
    if (inquiry.answer.kind !== 'absent') return refuse('inquiry-unclear', state);
  } else if (rules.firstSend !== undefined) {
    const ruled = inWindowAfterInquiry(rules.firstSend, rules.minAgeMs ?? DEFAULTS.minAgeMs, now);
    if (E.isLeft(ruled)) return refuse(ruled.left, state);
    if (ruled.right !== null) return E.right([ruled.right]);
  }
  if (attemptsUsedUp(state, rules.maxAttempts)) return refuse('attempt-cap', state);
  return E.right([{ type: 'Sent', at: now, data: { attempt: state.attempts + 1, timeoutMs: rules.timeoutMs } }]);
}

/**
 * The continuity rule (CONTRACT.md §9) for a GUID the ledger does not know, while the window is open: found processed
 * → DONE with that answer, nothing sent; absent, at least `minAgeMs` after the ledger went back → sent as usual (an
 * earlier 404 may only mean the account system had not yet made visible a transfer sent just before); else held.
 */
export function firstSendAfterInquiry(inquiry: FirstSendInquiry, minAgeMs: number): 'processed' | 'send' | 'not-definite' | 'too-young' | 'inquiry-unclear' {
  if (inquiry.answer.kind === 'processed') return isDefiniteCode(inquiry.answer.code) ? 'processed' : 'not-definite';
  if (inquiry.at - inquiry.wentBackAt < minAgeMs) return 'too-young';
  return inquiry.answer.kind === 'absent' ? 'send' : 'inquiry-unclear';
}

/**
 * The one continuity rule for a send the ledger would make without an inquiry of its own, inside the window (a
 * first send, or the resend of a row last FAILED by a definite not-sent answer): `firstSendAfterInquiry`'s ruling as
 * what to append. Left: refused, nothing sent; Right(Resolved): DONE by inquiry, nothing sent; Right(null): send.
 */
function inWindowAfterInquiry(inquiry: FirstSendInquiry, minAgeMs: number, now: number): E.Either<RefusalReason, NewEvent | null> {
  const ruled = firstSendAfterInquiry(inquiry, minAgeMs);
  const { answer } = inquiry;
  if (ruled === 'processed' && answer.kind === 'processed') {
    return E.right({ type: 'Resolved', at: now, data: { source: 'inquiry', outcome: 'processed', code: answer.code, response: answer.response } });
  }
  return ruled === 'send' ? E.right(null) : E.left(ruled === 'processed' ? 'not-definite' : ruled);
}

/**
 * The contract's state table as a pure function. Everything it refuses is refused before anything is
 * appended; the store appends exactly what it returns, at `state.lastSeq + 1`.
 */
export function decide(state: LedgerState | null, command: Command, now: number): E.Either<Refusal, NewEvent[]> {
  switch (command.type) {
    case 'Submit':
      if (state === null) {
        if (command.firstSend !== undefined) {
          const ruled = inWindowAfterInquiry(command.firstSend, command.minAgeMs ?? DEFAULTS.minAgeMs, now);
          if (E.isLeft(ruled)) return refuse(ruled.left, null);
          if (ruled.right !== null) return E.right([claimedEvent(command, now), ruled.right]);
        }
        return E.right([claimedEvent(command, now), { type: 'Sent', at: now, data: { attempt: 1, timeoutMs: command.timeoutMs } }]);
      }
      if (!isSameClaim(state, command.fingerprint, command.channel)) return refuse('fingerprint-mismatch', state);
      if (state.status !== 'FAILED') return refuse('exists', state);
      return sendAgain(state, command, now);

    case 'Claim':
      if (state !== null) return refuse(isSameClaim(state, command.fingerprint, command.channel) ? 'exists' : 'fingerprint-mismatch', state);
      return E.right([claimedEvent(command, now)]);

    case 'Send':
      if (state === null) return refuse('not-found', state);
      return sendAgain(state, command, now);

    case 'RecordAnswer': {
      if (state === null) return refuse('not-found', state);
      if (!isDefiniteCode(command.code)) return refuse('not-definite', state);
      // An attempt this row never sent: no call of ours can have been answered for it.
      if (command.attempt > state.attempts) return refuse('stale-attempt', state);
      if (command.attempt === state.attempts) {
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
      }
      // An older attempt answered (in any state), or this attempt once an inquiry or purge settled the row: never
      // the row's outcome (a later attempt may have had another), never dropped either.
      return E.right([staleAnswer(state, command, now)]);
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
      // A FAILED row an inquiry finds processed is DONE (contract §4, Resolved: FAILED → DONE), as on the inquiry
      // before a resend: reconcile --settle, when the journal shows a posting for it. Absent leaves it FAILED.
      if (state.status !== 'UNKNOWN' && !(state.status === 'FAILED' && command.outcome === 'processed')) return refuse('wrong-status', state);
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
      return E.right([{ type: 'Purged', at: now, data: { retentionMs: command.retentionMs, code: state.code, responseSha256: responseSha256(state.response) } }]);
  }
}
