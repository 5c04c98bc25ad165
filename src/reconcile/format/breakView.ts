import { maskAccount } from '../../shared/maskAccount.js';
import type { Break, JournalEntry, MoneyByCurrency, TransferTerms } from '../types.js';

export interface ReportOptions {
  /**
   * Print account numbers whole. Off by default: as everywhere guidgate shows them, only their last 4 characters
   * (`differs` still says which terms disagree when the masks look alike).
   */
  readonly showAccounts?: boolean;
}

export interface LedgerView {
  readonly status: string;
  readonly code: string | null;
  readonly firstSentAt: number;
  /** The request's terms; null for a tombstone (PURGED), which keeps no request. */
  readonly from: string | null;
  readonly to: string | null;
  readonly amount: bigint | null;
  readonly currency: string | null;
}

/** A posting as a break shows it: the journal's entry without the GUID the break already names. */
export type EntryView = Omit<JournalEntry, 'guid'>;

/** A break as every format shows it: plain values (amounts still exact BigInts), accounts masked unless asked. */
export interface BreakView {
  readonly guid: string;
  readonly category: Break['category'];
  readonly severity: Break['severity'];
  /** For amount_mismatch: the terms that differ between the request and the posting (from, to, amount, currency). */
  readonly differs: readonly string[];
  readonly ledger: LedgerView | null;
  readonly journal: readonly EntryView[];
  readonly firstSeen: string | null;
}

export function differingTerms(terms: TransferTerms, entry: JournalEntry): string[] {
  const differs: string[] = [];
  if (terms.from !== entry.from) differs.push('from');
  if (terms.to !== entry.to) differs.push('to');
  if (terms.amount !== entry.amount) differs.push('amount');
  if (terms.currency !== entry.currency) differs.push('currency');
  return differs;
}

export function viewOf(b: Break, opts: ReportOptions = {}): BreakView {
  const account = opts.showAccounts === true ? (a: string) => a : maskAccount;
  const terms = b.ledger?.terms ?? null;
  const entry = b.journal[0];
  return {
    guid: b.guid,
    category: b.category,
    severity: b.severity,
    differs: b.category === 'amount_mismatch' && terms !== null && entry !== undefined ? differingTerms(terms, entry) : [],
    ledger:
      b.ledger === null
        ? null
        : {
            status: b.ledger.status,
            code: b.ledger.code,
            firstSentAt: b.ledger.firstSentAt,
            from: terms === null ? null : account(terms.from),
            to: terms === null ? null : account(terms.to),
            amount: terms?.amount ?? null,
            currency: terms?.currency ?? null,
          },
    journal: b.journal.map((e) => ({
      ref: e.ref,
      from: account(e.from),
      to: account(e.to),
      amount: e.amount,
      currency: e.currency,
      appliedAt: e.appliedAt,
      line: e.line,
    })),
    firstSeen: b.firstSeen,
  };
}

/** Money as a list, no currency (null) first, then by currency code: JSON keys cannot be null. */
export function moneyList(money: MoneyByCurrency): Array<{ currency: string | null; amount: bigint }> {
  return [...money]
    .map(([currency, amount]) => ({ currency, amount }))
    .sort((a, b) => (a.currency === b.currency ? 0 : a.currency === null ? -1 : b.currency === null ? 1 : a.currency < b.currency ? -1 : 1));
}
