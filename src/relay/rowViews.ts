import { mayHaveArrived, type LedgerState } from '../events/state.js';
import { maskAccountsInJson } from '../shared/maskAccount.js';

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
