import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/reconcile/classify.js';
import { compareGuids } from '../../src/reconcile/journalStage.js';
import { factsOf } from '../../src/reconcile/ledgerFacts.js';
import { CATEGORIES, type JournalEntry, type LedgerRecord, type ReconcileWindow } from '../../src/reconcile/types.js';
import type { Status } from '../../src/events/codecs.js';
import { csvText, ndjsonText, reconcileText, request, type EntrySpec } from '../support/reconcile.js';
import { useTempDir } from '../support/tmp.js';

const tempDir = useTempDir();

// GUIDs from a few characters whose UTF-16 order and UTF-8 byte order disagree ('😀' vs '\uffff'), so the staged
// journal (sorted by SQLite) and the ledger side (sorted by compareGuids) must agree for the merge to pair them.
const guidArb = fc.string({ unit: fc.constantFrom('a', 'B', '-', 'é', '中', '\uffff', '😀', '\ue000'), minLength: 1, maxLength: 3 });
const accountArb = fc.constantFrom('ACC-1', 'ACC-2', 'ACC-3');
const currencyArb = fc.constantFrom<string | null>('CNY', 'USD', null);
const amountArb = fc.constantFrom(100, 250, 9007199254740991);
const timeArb = fc.integer({ min: 500, max: 2600 });

const CODES: Record<Status, readonly (string | null)[]> = {
  RECEIVED: [null], SENT: [null], UNKNOWN: ['E901'], FAILED: ['E902'], DONE: ['0000', '0000', 'B201', 'E500'], PURGED: ['0000', 'B202'],
};
const recordArb = (guid: string): fc.Arbitrary<LedgerRecord> =>
  fc.constantFrom<Status>('RECEIVED', 'SENT', 'UNKNOWN', 'FAILED', 'DONE', 'DONE', 'DONE', 'PURGED').chain((status) =>
    fc.record({
      guid: fc.constant(guid),
      status: fc.constant(status),
      code: fc.constantFrom(...CODES[status]),
      request: status === 'PURGED' ? fc.constant(null) : fc.record({ from: accountArb, to: accountArb, amount: amountArb, currency: currencyArb }).map((t) => request(guid, t)),
      firstSentAt: timeArb,
    }),
  );

const dayArb = fc
  .uniqueArray(guidArb, { minLength: 1, maxLength: 14 })
  .chain((guids) =>
    fc.record({
      records: fc.subarray(guids).chain((withRow) => fc.tuple(...withRow.map(recordArb))),
      entries: fc.array(
        fc.record({ guid: fc.oneof(fc.constantFrom(...guids), guidArb), from: accountArb, to: accountArb, amount: amountArb, currency: currencyArb, appliedAt: timeArb }),
        { maxLength: 30 },
      ),
      pendingMs: fc.constantFrom(0, 150, 400),
      csv: fc.boolean(),
    }),
  );

function add(money: Map<string | null, bigint>, currency: string | null, amount: bigint): void {
  money.set(currency, (money.get(currency) ?? 0n) + amount);
}
function total(maps: Iterable<ReadonlyMap<string | null, bigint>>): Map<string | null, bigint> {
  const sum = new Map<string | null, bigint>();
  for (const m of maps) for (const [c, a] of m) add(sum, c, a);
  return sum;
}
const sorted = (m: Map<string | null, bigint>) => [...m].filter(([, a]) => a !== 0n).sort(([a], [b]) => String(a).localeCompare(String(b)));

describe('property: the categories partition the GUIDs of both sides, and money adds up per side', () => {
  it('random ledgers and journals: each judged GUID in exactly one category, as a plain in-memory model judges it', async () => {
    await fc.assert(
      fc.asyncProperty(dayArb, async ({ records, entries, pendingMs, csv }) => {
        const W: ReconcileWindow = { from: 1000, to: 2000, pendingMs };
        const specs: EntrySpec[] = entries;
        const text = csv ? csvText(specs) : ndjsonText(specs);
        const { summary, breaks, verdicts } = await reconcileText(tempDir(), csv ? 'j.csv' : 'j.ndjson', text, records, W);

        // The model: which GUIDs a run judges, and with which entries (docs/reconciliation-rules.md).
        const lines: JournalEntry[] = entries.map((e, i) => ({ ...e, ref: `ref-${i}`, amount: BigInt(e.amount), line: csv ? i + 2 : i + 1 }));
        const inRange = lines.filter((e) => e.appliedAt >= W.from - pendingMs && e.appliedAt < W.to + pendingMs);
        const judged = new Set([
          ...records.filter((r) => r.firstSentAt >= W.from && r.firstSentAt < W.to).map((r) => r.guid),
          ...lines.filter((e) => e.appliedAt >= W.from && e.appliedAt < W.to).map((e) => e.guid),
        ]);
        const byGuid = new Map(records.map((r) => [r.guid, r]));
        expect(new Set(verdicts.keys())).toEqual(judged);
        const ledgerMoney = new Map<string | null, bigint>();
        const journalMoney = new Map<string | null, bigint>();
        for (const guid of judged) {
          const record = byGuid.get(guid);
          const facts = record === undefined ? null : factsOf(record);
          const mine = inRange.filter((e) => e.guid === guid);
          expect(verdicts.get(guid)).toEqual(classify(facts, mine, W));
          if (facts?.terms) add(ledgerMoney, facts.terms.currency, facts.terms.amount);
          for (const e of mine) add(journalMoney, e.currency, e.amount);
        }

        // A partition: the counts add up to the GUIDs judged; breaks are the judged GUIDs with a severity, once each, in order.
        expect(CATEGORIES.reduce((n, c) => n + summary.counts[c], 0)).toBe(judged.size);
        const breakGuids = [...judged].filter((g) => verdicts.get(g)!.severity !== null).sort(compareGuids);
        expect(breaks.map((b) => b.guid)).toEqual(breakGuids);
        expect(summary.breaks).toBe(breakGuids.length);

        // Money adds up per side: over the categories, each side's sums are that side's sums over the GUIDs judged.
        expect(sorted(total(CATEGORIES.map((c) => summary.money[c].ledger)))).toEqual(sorted(ledgerMoney));
        expect(sorted(total(CATEGORIES.map((c) => summary.money[c].journal)))).toEqual(sorted(journalMoney));

        // Every entry read is accounted for: used, outside the range, or near an edge for a GUID not judged.
        const used = inRange.filter((e) => judged.has(e.guid)).length;
        expect(summary.journal.read).toBe(entries.length);
        expect(summary.journal.outsideRange).toBe(entries.length - inRange.length);
        expect(summary.journal.notJudged).toBe(inRange.length - used);
      }),
      { numRuns: 120 },
    );
  });
});
