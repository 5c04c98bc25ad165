import { CATEGORIES, NO_POSTING_KINDS, type Category, type CategoryMoney, type JournalEntry, type LedgerFacts, type NoPostingKind, type NoPostingTally, type Verdict } from './types.js';

function addTo(money: Map<string | null, bigint>, currency: string | null, amount: bigint): void {
  money.set(currency, (money.get(currency) ?? 0n) + amount);
}

const perCategory = <T>(make: () => T): Record<Category, T> =>
  Object.fromEntries(CATEGORIES.map((c) => [c, make()])) as Record<Category, T>;

/**
 * Counts and money per category and per side, exact (BigInt), per currency (no currency is its own bucket).
 * The ledger side sums each GUID's request amount once; the journal side sums every entry (a duplicate counts
 * each posting). A GUID with no posting and no claim of one is in no category: its request's amount is counted
 * apart (`noPosting`), so that each category's two sides sum the same GUIDs (matched: DONE 0000 with its posting).
 */
export class Tally {
  readonly counts: Record<Category, number> = perCategory(() => 0);
  readonly severities = { P1: 0, P2: 0 };
  private readonly ledger = perCategory(() => new Map<string | null, bigint>());
  private readonly journal = perCategory(() => new Map<string | null, bigint>());
  matchedWithoutTerms = 0;
  ledgerRows = 0;

  private readonly noPosting = Object.fromEntries(NO_POSTING_KINDS.map((k) => [k, { count: 0, ledger: new Map<string | null, bigint>() }])) as Record<NoPostingKind, { count: number; ledger: Map<string | null, bigint> }>;

  add(verdict: Verdict, ledger: LedgerFacts | null, entries: readonly JournalEntry[]): void {
    if (verdict.category === 'no_posting') {
      const apart = this.noPosting[verdict.kind];
      apart.count++;
      if (ledger !== null) {
        this.ledgerRows++;
        if (ledger.terms !== null) addTo(apart.ledger, ledger.terms.currency, ledger.terms.amount);
      }
      return;
    }
    const { category, severity } = verdict;
    this.counts[category]++;
    if (severity !== null) this.severities[severity]++;
    if (ledger !== null) {
      this.ledgerRows++;
      if (ledger.terms !== null) addTo(this.ledger[category], ledger.terms.currency, ledger.terms.amount);
      else if (category === 'matched') this.matchedWithoutTerms++;
    }
    for (const e of entries) addTo(this.journal[category], e.currency, e.amount);
  }

  noPostings(): Record<NoPostingKind, NoPostingTally> {
    const copy = (k: NoPostingKind): NoPostingTally => ({ count: this.noPosting[k].count, ledger: new Map(this.noPosting[k].ledger) });
    return { rejected: copy('rejected'), unsettled: copy('unsettled') };
  }

  money(): Record<Category, CategoryMoney> {
    const money = {} as Record<Category, CategoryMoney>;
    for (const c of CATEGORIES) money[c] = { ledger: new Map(this.ledger[c]), journal: new Map(this.journal[c]) };
    return money;
  }
}
