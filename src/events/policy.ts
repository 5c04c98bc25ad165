import type { RefusalReason } from './decide.js';
import { attemptsUsedUp } from './decide.js';
import type { LedgerClock, LedgerQuery } from './store.js';
import { mayHaveArrived, type LedgerState } from './state.js';
import { storeResult, type StoreResult } from './storeResult.js';
import { maskAccountsInJson } from '../shared/maskAccount.js';

/**
 * The settlement rules that the relay, the operator API, the command line and the metrics share, each written
 * once: which rows are dead letters, which refusals hold a resend back, what each audience may see of a row, and
 * the clock every age is judged by. The state table itself is `decide` (decide.ts).
 */

// ---- Dead letters ----

/**
 * A FAILED row at the attempt cap: nothing sends it again on its own (a channel's resend gets E902, `reprocess`
 * leaves it), so a person decides. `stats`, the operator API's overview and `guidgate_dead_letters` count them.
 */
export function isDeadLetter(row: Pick<LedgerState, 'status' | 'attempts'>, maxAttempts: number): boolean {
  return row.status === 'FAILED' && attemptsUsedUp(row, maxAttempts);
}

/** The dead letters as a ledger query (`isDeadLetter` as the store selects it). */
export function deadLetterRows(maxAttempts: number): Pick<LedgerQuery, 'statuses' | 'attemptsAtLeast'> {
  return { statuses: ['FAILED'], attemptsAtLeast: maxAttempts };
}

/** The FAILED rows under the cap: the ones `reprocess` may send again (every FAILED row that is no dead letter). */
export function resendableRows(maxAttempts: number): Pick<LedgerQuery, 'statuses' | 'attemptsBelow'> {
  return { statuses: ['FAILED'], attemptsBelow: maxAttempts };
}

// ---- Held resends ----

/**
 * The refusals that mean "the last attempt may have arrived: not sent again now" (CONTRACT.md §7): too young to
 * ask the account system, asked and it could not tell, or not asked yet. The channel gets E901, `reprocess`
 * counts the row as `held` (its detail is the reason).
 */
export const HELD_REASONS = ['too-young', 'inquiry-unclear', 'needs-inquiry'] as const satisfies readonly RefusalReason[];
export type HeldReason = (typeof HELD_REASONS)[number];

export function isHeld(reason: RefusalReason): reason is HeldReason {
  return (HELD_REASONS as readonly RefusalReason[]).includes(reason);
}

/** Why a resend was held, in words: the channel's E901 says it, and so does `reprocess` of each held row. */
export function heldWhy(reason: HeldReason): string {
  return reason === 'too-young' ? 'too soon to ask the account system' : 'the account system could not tell';
}

/** The E901 message of a held resend: why it was not sent again. */
export function heldReplyMessage(reason: HeldReason): string {
  return `sent earlier, outcome unknown (${heldWhy(reason)}); not sent again, resend later`;
}

// ---- What each audience may see of a row ----
//
//                     channel (GET /v1/transfers/{guid})   operator (the operator API; ledger --json and the dry runs' rows)
//  request            never                                 never (history shows it, per GUID, to an auditor)
//  response           a DONE row's, accounts masked         never (history, per GUID)
//  fingerprint        never (CONTRACT.md §2 v2)             never (an unsalted hash of the account numbers)
//  lastSeq, timeoutMs shown                                 not shown
//  guid, status, code, attempts, createdAt, updatedAt, sentAt, channel, failedByInquiry: shown to both (failedByInquiry
//  says of a FAILED row that one of its attempts may have arrived, `mayHaveArrived`). One view per audience: the
//  command line shows the operator API's `operatorRow`, never a view of its own.

/**
 * How every HTTP view shows a request or an answer the ledger stored (its raw JSON text): account numbers masked
 * (src/shared/maskAccount.ts), otherwise as stored; null when it is not JSON, since nothing in it could be masked.
 * The channel's own POST reply is not a view: it is the answer byte for byte (CONTRACT.md §2).
 */
export function shownStoredJson(text: string): string | null {
  return maskAccountsInJson(text);
}

/**
 * What the operator API shows of a row: never the request, the answer nor the fingerprint (account numbers).
 * `failedByInquiry` tells a FAILED row one of whose attempts left (a resend inquires first) from one never sent: both say E902.
 */
export function operatorRow(row: LedgerState) {
  const { guid, status, code, attempts, createdAt, updatedAt, sentAt, channel } = row;
  return { guid, status, code, attempts, createdAt, updatedAt, sentAt, channel, failedByInquiry: mayHaveArrived(row) };
}

/**
 * What GET /v1/transfers/{guid} shows of a row: the operator's row, the last Sent's details, and a DONE row's answer
 * as `shownStoredJson` shows it; never the request nor the fingerprint (CONTRACT.md §2 v2).
 */
export function transferView(row: LedgerState): Record<string, unknown> {
  const { lastSeq, timeoutMs } = row;
  const shown = { ...operatorRow(row), lastSeq, timeoutMs };
  return row.status === 'DONE' ? { ...shown, response: row.response === null ? null : shownStoredJson(row.response) } : shown;
}

// ---- The ledger's clock ----

/**
 * The time every age is judged by (min-age, grace, retention, `--older-than`, the ages `stats` and the metrics
 * show): the ledger's clock (`store.now()`, LedgerClock in store.ts: on PostgreSQL the database server's, so that
 * every process judges a row alike), or `clock` when the caller was given one (tests, a fixed time). What the
 * clock throws is a Left, as a failing ledger clock is.
 */
export function ledgerTime(store: LedgerClock, clock?: (() => number | Promise<number>) | undefined): StoreResult<number> {
  return clock === undefined ? store.now() : storeResult('clock', clock);
}
