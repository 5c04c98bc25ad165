import { oldEnoughToAsk, type Command, type FirstSendInquiry, type ResendInquiry } from '../events/decide.js';
import { DEFAULTS } from '../shared/defaults.js';
import { mayHaveArrived, type LedgerState } from '../events/state.js';
import * as E from 'fp-ts/lib/Either.js';
import type { EventAudit } from '../events/codecs.js';
import type { EventLog, ExecuteResult, LedgerClock, StoreResult } from '../events/store.js';
import { ledgerTime } from '../events/policy.js';
import { inquiryHttpStatus, type AccountClient } from '../account/accountClient.js';
import type { Metrics } from '../telemetry/metrics.js';
import { monotonicNow, timedWrite, type MonotonicClock, type TimedWrite } from './sendWindow.js';
import type { Context } from '../telemetry/tracing.js';

export interface ResendDeps {
  readonly store: EventLog & LedgerClock;
  readonly account: AccountClient;
  /** What the row's age is judged by before asking; default the ledger's clock (`store.now()`). */
  readonly clock?: (() => number | Promise<number>) | undefined;
  readonly metrics?: Metrics | undefined;
  /** What the send window is measured on (sendWindow.ts); default `performance.now`. */
  readonly monotonicNow?: MonotonicClock | undefined;
  /** The trace the inquiry belongs to (the channel request's span, or the claim's kept trace). */
  readonly trace?: Context | undefined;
  /**
   * Set for background work (`reprocess`): its inquiry waits its turn under `--inquiry-rate`, the oldest row first,
   * until `signal` gives up. Unset: a channel's request, whose inquiry does not wait (over the budget it is not made,
   * and the reply says when to come back).
   */
  readonly inquiryWaits?: { readonly signal?: AbortSignal | undefined } | undefined;
}

/** What a send decided after its inquiry, and, when the inquiry budget had no turn for it, when to come back. */
export type AfterInquiry = TimedWrite<ExecuteResult> & { readonly inquiryDeferredMs?: number };

/**
 * Asks the account system about a row that may have arrived (CONTRACT.md §7), unless its last Sent is too young
 * for a 404 to mean anything: then nothing is asked and `decide` refuses the resend as too young.
 */
export async function inquireBeforeResend(deps: ResendDeps, row: LedgerState, minAgeMs: number): StoreResult<Omit<Asked, 'answer'> & { inquiry: ResendInquiry }> {
  const time = await ledgerTime(deps.store, deps.clock);
  if (E.isLeft(time)) return time;
  const at = time.right;
  if (!oldEnoughToAsk(row, at, minAgeMs)) return E.right({ inquiry: { seq: row.lastSeq, at, answer: { kind: 'unknown' } }, httpStatus: null });
  const { answer, ...asked } = await ask(deps, row.guid, row.sentAt ?? row.updatedAt);
  return E.right({ ...asked, inquiry: { seq: row.lastSeq, at, answer } });
}

/** An inquiry's answer as `decide` takes it, its HTTP status for the actor, and `deferredMs` when it was not made. */
interface Asked {
  readonly answer: ResendInquiry['answer'];
  readonly httpStatus: number | null;
  /** The inquiry budget had no turn for it: not asked (decide hears "could not tell"); come back in this long. */
  readonly deferredMs?: number;
}

/**
 * One inquiry (GET /transfer/{guid}), counted, in its turn under `--inquiry-rate`: a channel's request does not wait,
 * background work does (`rowSentAt`: the oldest row first).
 */
async function ask(deps: Pick<ResendDeps, 'account' | 'metrics' | 'trace' | 'inquiryWaits'>, guid: string, rowSentAt = Number.MAX_SAFE_INTEGER): Promise<Asked> {
  const waits = deps.inquiryWaits;
  const answer = await deps.account.inquire(guid, { parent: deps.trace }, waits === undefined ? { waits: false } : { waits: true, rowSentAt, signal: waits.signal });
  if (answer.kind === 'deferred') return { answer: { kind: 'unknown' }, httpStatus: null, deferredMs: answer.retryAfterMs };
  deps.metrics?.inquiry(answer.kind === 'unknown' && !answer.reached ? 'unreachable' : answer.kind);
  return {
    answer: answer.kind === 'processed' ? { kind: 'processed', code: answer.code, response: answer.body } : { kind: answer.kind },
    httpStatus: inquiryHttpStatus(answer),
  };
}

/** `result` with, when the inquiry was not made for want of a turn, when to come back. */
const deferredBy = (asked: Pick<Asked, 'deferredMs'>, result: TimedWrite<ExecuteResult>): AfterInquiry =>
  asked.deferredMs === undefined ? result : { ...result, inquiryDeferredMs: asked.deferredMs };

/**
 * The first send of a GUID the ledger does not know while the continuity window is open (CONTRACT.md §9): the
 * ledger went back at `wentBackAt` and may have forgotten a claim the account system applied, so the account system
 * is asked first (whatever the time: a GUID found processed is settled at once), then the Submit carries the answer
 * into `store.execute`, where `decide` (`firstSendAfterInquiry`) rules: processed → Claimed and Resolved (DONE,
 * nothing sent), absent and at least `--min-age` after the going back → Claimed and Sent, else refused (E901,
 * nothing stored, nothing sent).
 */
export async function claimAfterInquiry(deps: ResendDeps, guid: string, command: Extract<Command, { type: 'Submit' }>, wentBackAt: number, audit?: EventAudit): Promise<AfterInquiry> {
  return sendAfterWindowInquiry(deps, guid, command, wentBackAt, audit, { state: null });
}

/**
 * Inside the continuity window, a send the ledger would make without an inquiry of its own (a first send, or the
 * resend of a row whose last send definitely did not reach): the account system is asked first and `decide` rules
 * by the one continuity rule (`firstSendAfterInquiry`).
 */
async function sendAfterWindowInquiry(
  deps: ResendDeps, guid: string, command: Extract<Command, { type: 'Submit' | 'Send' }>, wentBackAt: number, audit: EventAudit | undefined,
  expected?: { state: null },
): Promise<AfterInquiry> {
  const clock = deps.monotonicNow ?? monotonicNow;
  const time = await ledgerTime(deps.store, deps.clock);
  if (E.isLeft(time)) return { startedAt: clock(), result: time };
  const asked = await ask(deps, guid);
  const { answer, httpStatus } = asked;
  const firstSend: FirstSendInquiry = { wentBackAt, at: time.right, answer };
  const params = { ...audit?.params, inquiryStatus: httpStatus, continuityWentBackAt: wentBackAt };
  const inquired = { ...command, firstSend };
  return deferredBy(asked, await timedWrite(clock, () => (expected === undefined ? deps.store.execute(guid, inquired, { ...audit, params }) : deps.store.execute(guid, inquired, { ...audit, params }, expected))));
}

/**
 * The resend of an existing row, shared by a channel's resend and `reprocess`: a row that may have arrived is
 * inquired about first (outside the write transaction), then the Submit or Send carries the answer into `store.execute`,
 * where `decide` takes it with the row as it is then. Inside the continuity window (`window`), a row that the ledger
 * says was never received (FAILED by a refused connection, RECEIVED) is inquired about too, by the continuity rule. Applied, the row is SENT (send it) or DONE (the inquiry
 * found it: answer from the stored bytes). `startedAt`: the start of the send window, taken right before the
 * write that records the Sent (after the inquiry, which may take up to its timeout).
 */
export async function resendAfterInquiry(
  deps: ResendDeps, row: LedgerState, command: Extract<Command, { type: 'Submit' | 'Send' }>, audit?: EventAudit,
  /** The continuity window, when open (the ledger went back at `wentBackAt`): a send without an inquiry gets one. */
  window: { readonly wentBackAt: number } | null = null,
): Promise<AfterInquiry> {
  const clock = deps.monotonicNow ?? monotonicNow;
  if (!mayHaveArrived(row)) {
    const wouldSend = row.status === 'FAILED' || row.status === 'RECEIVED';
    if (window !== null && wouldSend) return sendAfterWindowInquiry(deps, row.guid, command, window.wentBackAt, audit);
    return timedWrite(clock, () => deps.store.execute(row.guid, command, audit));
  }
  const asked = await inquireBeforeResend(deps, row, command.minAgeMs ?? DEFAULTS.minAgeMs);
  if (E.isLeft(asked)) return { startedAt: clock(), result: asked };
  // The actor of what the inquiry decided keeps its HTTP status (null: too young to ask, not asked, or no answer came).
  const inquired = { ...command, inquiry: asked.right.inquiry };
  return deferredBy(asked.right, await timedWrite(clock, () => deps.store.execute(row.guid, inquired, { ...audit, params: { ...audit?.params, inquiryStatus: asked.right.httpStatus } })));
}
