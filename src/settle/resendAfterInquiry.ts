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
}

/**
 * Asks the account system about a row that may have arrived (CONTRACT.md §7), unless its last Sent is too young
 * for a 404 to mean anything: then nothing is asked and `decide` refuses the resend as too young.
 */
export async function inquireBeforeResend(deps: ResendDeps, row: LedgerState, minAgeMs: number): StoreResult<{ inquiry: ResendInquiry; httpStatus: number | null }> {
  const time = await ledgerTime(deps.store, deps.clock);
  if (E.isLeft(time)) return time;
  const at = time.right;
  if (!oldEnoughToAsk(row, at, minAgeMs)) return E.right({ inquiry: { seq: row.lastSeq, at, answer: { kind: 'unknown' } }, httpStatus: null });
  const { answer, httpStatus } = await ask(deps, row.guid);
  return E.right({ inquiry: { seq: row.lastSeq, at, answer }, httpStatus });
}

/** One inquiry (GET /transfer/{guid}), counted: its answer as `decide` takes it, and its HTTP status for the actor. */
async function ask(deps: Pick<ResendDeps, 'account' | 'metrics' | 'trace'>, guid: string): Promise<{ answer: ResendInquiry['answer']; httpStatus: number | null }> {
  const answer = await deps.account.inquire(guid, { parent: deps.trace });
  deps.metrics?.inquiry(answer.kind === 'unknown' && !answer.reached ? 'unreachable' : answer.kind);
  return {
    answer: answer.kind === 'processed' ? { kind: 'processed', code: answer.code, response: answer.body } : { kind: answer.kind },
    httpStatus: inquiryHttpStatus(answer),
  };
}

/**
 * The first send of a GUID the ledger does not know while the continuity window is open (CONTRACT.md §9): the
 * ledger went back at `wentBackAt` and may have forgotten a claim the account system applied, so the account system
 * is asked first (whatever the time: a GUID found processed is settled at once), then the Submit carries the answer
 * into `store.execute`, where `decide` (`firstSendAfterInquiry`) rules: processed → Claimed and Resolved (DONE,
 * nothing sent), absent and at least `--min-age` after the going back → Claimed and Sent, else refused (E901,
 * nothing stored, nothing sent).
 */
export async function claimAfterInquiry(deps: ResendDeps, guid: string, command: Extract<Command, { type: 'Submit' }>, wentBackAt: number, audit?: EventAudit): Promise<TimedWrite<ExecuteResult>> {
  const clock = deps.monotonicNow ?? monotonicNow;
  const time = await ledgerTime(deps.store, deps.clock);
  if (E.isLeft(time)) return { startedAt: clock(), result: time };
  const { answer, httpStatus } = await ask(deps, guid);
  const firstSend: FirstSendInquiry = { wentBackAt, at: time.right, answer };
  const params = { ...audit?.params, inquiryStatus: httpStatus, continuityWentBackAt: wentBackAt };
  return timedWrite(clock, () => deps.store.execute(guid, { ...command, firstSend }, { ...audit, params }, { state: null }));
}

/**
 * The resend of an existing row, shared by a channel's resend and `reprocess`: a row that may have arrived is
 * inquired about first (outside the write transaction), then the Submit or Send carries the answer into `store.execute`,
 * where `decide` takes it with the row as it is then. Applied, the row is SENT (send it) or DONE (the inquiry
 * found it: answer from the stored bytes). `startedAt`: the start of the send window, taken right before the
 * write that records the Sent (after the inquiry, which may take up to its timeout).
 */
export async function resendAfterInquiry(deps: ResendDeps, row: LedgerState, command: Extract<Command, { type: 'Submit' | 'Send' }>, audit?: EventAudit): Promise<TimedWrite<ExecuteResult>> {
  const clock = deps.monotonicNow ?? monotonicNow;
  if (!mayHaveArrived(row)) return timedWrite(clock, () => deps.store.execute(row.guid, command, audit));
  const asked = await inquireBeforeResend(deps, row, command.minAgeMs ?? DEFAULTS.minAgeMs);
  if (E.isLeft(asked)) return { startedAt: clock(), result: asked };
  // The actor of what the inquiry decided keeps its HTTP status (null: too young to ask, or no answer came).
  const inquired = { ...command, inquiry: asked.right.inquiry };
  return timedWrite(clock, () => deps.store.execute(row.guid, inquired, { ...audit, params: { ...audit?.params, inquiryStatus: asked.right.httpStatus } }));
}
