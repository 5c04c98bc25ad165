import { isDefiniteCode } from '../events/codecs.js';
import { LedgerSourceError } from './errors.js';
import type { JournalEntry, LedgerFacts, ReconcileWindow, TransferTerms, Verdict } from './types.js';

/**
 * One GUID's category (CONTRACT.md §8), from what the ledger holds for it (null: no row and no tombstone) and
 * every journal entry of it the run read. Pure: the rules, their order and the edges are in
 * docs/reconciliation-rules.md; in short, first match wins:
 *
 *  1. two or more entries → duplicate_in_journal, P1, whatever the ledger says (a FAILED, rejected or unknown
 *     row, or none at all): a double debit is the worst break, and the one to act on first;
 *  2. one entry and no row → missing_in_ledger, P2;
 *  3. one entry and a row not settled (RECEIVED, SENT, UNKNOWN, FAILED) → unsettled_in_ledger, P1 when FAILED
 *     (a resend would apply it twice), else P2;
 *  4. one entry and a row DONE (or PURGED: the tombstone's final code) with B2xx or E500 → rejected_in_ledger, P1;
 *  5. one entry and 0000: from, to, amount or currency differ from the request → amount_mismatch, P1; else
 *     matched. A tombstone keeps no request: its terms cannot be compared, so it is matched on its code alone;
 *  6. no entry and 0000 → pending when first sent within `pendingMs` before `to` (it may still be posted), else
 *     missing_in_journal, P2;
 *  7. no entry and any other row → no posting, counted apart (not a category, not a break, and not `matched`,
 *     which is DONE 0000 with one posting): `rejected` for B2xx or E500, `unsettled` for a row not settled.
 *     Neither side shows money moved (a rejection or a failed send has no posting; a row still unknown is for
 *     `resolve` to settle, not a difference between the two sides).
 */
// One frozen value per outcome: a day has a million verdicts, none of which needs its own object.
const V = {
  duplicate: { category: 'duplicate_in_journal', severity: 'P1' },
  missingInLedger: { category: 'missing_in_ledger', severity: 'P2' },
  unsettledFailed: { category: 'unsettled_in_ledger', severity: 'P1' },
  unsettled: { category: 'unsettled_in_ledger', severity: 'P2' },
  rejected: { category: 'rejected_in_ledger', severity: 'P1' },
  mismatch: { category: 'amount_mismatch', severity: 'P1' },
  matched: { category: 'matched', severity: null },
  pending: { category: 'pending', severity: null },
  missingInJournal: { category: 'missing_in_journal', severity: 'P2' },
  rejectedNoPosting: { category: 'no_posting', severity: null, kind: 'rejected' },
  unsettledNoPosting: { category: 'no_posting', severity: null, kind: 'unsettled' },
} as const satisfies Record<string, Verdict>;
Object.values(V).forEach((v) => Object.freeze(v));

export function classify(ledger: LedgerFacts | null, entries: readonly JournalEntry[], window: ReconcileWindow): Verdict {
  if (entries.length >= 2) return V.duplicate;
  const entry = entries[0];
  if (ledger === null) {
    if (entry === undefined) throw new Error('classify: a GUID with neither a ledger row nor a journal entry');
    return V.missingInLedger;
  }
  const settledCode = settledCodeOf(ledger);
  if (entry !== undefined) {
    if (settledCode === null) return ledger.status === 'FAILED' ? V.unsettledFailed : V.unsettled;
    if (settledCode !== '0000') return V.rejected;
    if (ledger.terms !== null && !sameTerms(ledger.terms, entry)) return V.mismatch;
    return V.matched;
  }
  if (settledCode === '0000') return ledger.firstSentAt >= window.to - window.pendingMs ? V.pending : V.missingInJournal;
  return settledCode === null ? V.unsettledNoPosting : V.rejectedNoPosting;
}

/** The definite code of a DONE or PURGED row; null for a row not settled. A settled row without one is corrupt. */
function settledCodeOf(ledger: LedgerFacts): string | null {
  if (ledger.status !== 'DONE' && ledger.status !== 'PURGED') return null;
  if (ledger.code === null || !isDefiniteCode(ledger.code)) {
    throw new LedgerSourceError(`${ledger.guid} is ${ledger.status} without a definite code (${String(ledger.code)})`);
  }
  return ledger.code;
}

export function sameTerms(terms: TransferTerms, entry: JournalEntry): boolean {
  return terms.from === entry.from && terms.to === entry.to && terms.amount === entry.amount && terms.currency === entry.currency;
}
