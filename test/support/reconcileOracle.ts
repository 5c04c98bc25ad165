/**
 * The reconciliation rules of docs/reconciliation-rules.md ("The categories, first match wins") written out once
 * more, for the property to judge the engine by: from the generator's own terms and codes, not from anything the
 * engine reads or decides (no classify, no parsing of the stored request), so a fault there cannot agree with itself.
 */

export interface OracleTerms {
  readonly from: string;
  readonly to: string;
  readonly amount: number;
  /** null: the request has no currency. */
  readonly currency: string | null;
}

export interface OracleRow {
  readonly status: 'RECEIVED' | 'SENT' | 'UNKNOWN' | 'FAILED' | 'DONE' | 'PURGED';
  /** The row's code: for DONE and PURGED the account system's definite answer. */
  readonly code: string | null;
  /** What the request said; null for a tombstone, which keeps none. */
  readonly terms: OracleTerms | null;
  readonly firstSentAt: number;
}

export interface OracleEntry {
  readonly from: string;
  readonly to: string;
  readonly amount: number;
  readonly currency: string | null;
}

export type OracleVerdict =
  | { readonly category: 'duplicate_in_journal' | 'amount_mismatch' | 'rejected_in_ledger'; readonly severity: 'P1' }
  | { readonly category: 'missing_in_ledger' | 'missing_in_journal'; readonly severity: 'P2' }
  | { readonly category: 'unsettled_in_ledger'; readonly severity: 'P1' | 'P2' }
  | { readonly category: 'matched' | 'pending'; readonly severity: null }
  | { readonly category: 'no_posting'; readonly severity: null; readonly kind: 'rejected' | 'unsettled' };

/** One judged GUID: its row (null: none) and its entries in [from − P, to + P); `to` and P of the window. */
export function expectedVerdict(row: OracleRow | null, entries: readonly OracleEntry[], window: { readonly to: number; readonly pendingMs: number }): OracleVerdict {
  if (entries.length >= 2) return { category: 'duplicate_in_journal', severity: 'P1' };
  const settled = row !== null && (row.status === 'DONE' || row.status === 'PURGED');
  const [entry] = entries;
  if (entry !== undefined) {
    if (row === null) return { category: 'missing_in_ledger', severity: 'P2' };
    if (!settled) return { category: 'unsettled_in_ledger', severity: row.status === 'FAILED' ? 'P1' : 'P2' };
    if (row.code !== '0000') return { category: 'rejected_in_ledger', severity: 'P1' };
    const t = row.terms;
    if (t !== null && (t.from !== entry.from || t.to !== entry.to || t.amount !== entry.amount || t.currency !== entry.currency)) {
      return { category: 'amount_mismatch', severity: 'P1' };
    }
    return { category: 'matched', severity: null };
  }
  if (row === null) throw new Error('the oracle was asked about a GUID with neither a row nor an entry');
  if (!settled) return { category: 'no_posting', severity: null, kind: 'unsettled' };
  if (row.code !== '0000') return { category: 'no_posting', severity: null, kind: 'rejected' };
  return row.firstSentAt >= window.to - window.pendingMs && row.firstSentAt < window.to
    ? { category: 'pending', severity: null }
    : { category: 'missing_in_journal', severity: 'P2' };
}
