import { CATEGORIES, type Category, type CategoryMoney, type JournalEntry, type LedgerFacts, type Verdict } from './types.js';

function addTo(money: Map<string | null, bigint>, currency: string | null, amount: bigint): void {
  money.set(currency, (money.get(currency) ?? 0n) + amount);
}

const perCategory = <T>(make: () => T): Record<Category, T> =>
  Object.fromEntries(CATEGORIES.map((c) => [c, make()])) as Record<Category, T>;

/**
 * Counts and money per category and per side, exact (BigInt), per currency (no currency is its own bucket).
 * The ledger side sums each GUID's request amount once; the journal side sums every entry (a duplicate counts
 * each posting), so each side's total over the categories is that side's total over the GUIDs judged.
 */
export class Tally {
  readonly counts: Record<Category, number> = perCategory(() => 0);
  readonly severities = { P1: 0, P2: 0 };
  private readonly ledger = perCategory(() => new Map<string | null, bigint>());
  private readonly journal = perCategory(() => new Map<string | null, bigint>());
  matchedWithoutTerms = 0;
  ledgerRows = 0;

  add({ category, severity }: Verdict, ledger: LedgerFacts | null, entries: readonly JournalEntry[]): void {
    this.counts[category]++;
    if (severity !== null) this.severities[severity]++;
    if (ledger !== null) {
      this.ledgerRows++;
      if (ledger.terms !== null) addTo(this.ledger[category], ledger.terms.currency, ledger.terms.amount);
      else if (category === 'matched') this.matchedWithoutTerms++;
    }
    for (const e of entries) addTo(this.journal[category], e.currency, e.amount);
  }

  money(): Record<Category, CategoryMoney> {
    const money = {} as Record<Category, CategoryMoney>;
    for (const c of CATEGORIES) money[c] = { ledger: new Map(this.ledger[c]), journal: new Map(this.journal[c]) };
    return money;
  }
}
