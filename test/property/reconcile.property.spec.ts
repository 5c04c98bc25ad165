import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareGuids } from '../../src/reconcile/journalStage.js';
import { CATEGORIES, type LedgerRecord, type ReconcileWindow } from '../../src/reconcile/types.js';
import type { Status } from '../../src/events/codecs.js';
import { csvText, ndjsonText, reconcileText, request, type EntrySpec } from '../support/reconcile.js';
import { expectedVerdict, type OracleRow } from '../support/reconcileOracle.js';
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
/** A row as the generator made it (its terms kept for the oracle) and as the ledger stores it. */
const recordArb = (guid: string): fc.Arbitrary<{ row: OracleRow; record: LedgerRecord }> =>
  fc.constantFrom<Status>('RECEIVED', 'SENT', 'UNKNOWN', 'FAILED', 'DONE', 'DONE', 'DONE', 'PURGED').chain((status) =>
    fc
      .record({
        status: fc.constant(status),
        code: fc.constantFrom(...CODES[status]),
        terms: status === 'PURGED' ? fc.constant(null) : fc.record({ from: accountArb, to: accountArb, amount: amountArb, currency: currencyArb }),
        firstSentAt: timeArb,
      })
      .map((row) => ({ row, record: { guid, status: row.status, code: row.code, request: row.terms === null ? null : request(guid, row.terms), firstSentAt: row.firstSentAt } })),
  );

type Terms = NonNullable<OracleRow['terms']>;
/** The posting of a row's own transfer, as written or with one term changed: random entries seldom hit either. */
const echoArb = (guid: string, terms: Terms) =>
  fc.record({
    changed: fc.constantFrom<keyof Terms | null>(null, null, 'from', 'to', 'amount', 'currency'),
    appliedAt: timeArb,
  }).map(({ changed, appliedAt }) => ({
    guid,
    from: changed === 'from' ? `${terms.from}-other` : terms.from,
    to: changed === 'to' ? `${terms.to}-other` : terms.to,
    amount: changed === 'amount' ? terms.amount - 1 : terms.amount,
    currency: changed === 'currency' ? (terms.currency === null ? 'EUR' : null) : terms.currency,
    appliedAt,
  }));

const dayArb = fc
  .uniqueArray(guidArb, { minLength: 1, maxLength: 14 })
  .chain((guids) => fc.subarray(guids).chain((withRow) => fc.tuple(fc.constant(guids), fc.tuple(...withRow.map(recordArb)))))
  .chain(([guids, records]) =>
    fc.record({
      records: fc.constant(records),
      entries: fc
        .tuple(
          fc.array(
            fc.record({ guid: fc.oneof(fc.constantFrom(...guids), guidArb), from: accountArb, to: accountArb, amount: amountArb, currency: currencyArb, appliedAt: timeArb }),
            { maxLength: 12 },
          ),
          fc.tuple(...records.map(({ record, row }) => (row.terms === null ? fc.constant([]) : fc.option(echoArb(record.guid, row.terms), { nil: undefined, freq: 5 }).map((e) => (e === undefined ? [] : [e]))))),
        )
        .chain(([random, echoes]) => fc.shuffledSubarray([...random, ...echoes.flat()], { minLength: random.length + echoes.flat().length })),
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
      fc.asyncProperty(dayArb, async ({ records: generated, entries, pendingMs, csv }) => {
        const records = generated.map((g) => g.record);
        const W: ReconcileWindow = { from: 1000, to: 2000, pendingMs };
        const specs: EntrySpec[] = entries;
        const text = csv ? csvText(specs) : ndjsonText(specs);
        const { summary, breaks, verdicts } = await reconcileText(tempDir(), csv ? 'j.csv' : 'j.ndjson', text, records, W);

        // The model: which GUIDs a run judges, and with which entries (docs/reconciliation-rules.md).
        const inRange = entries.filter((e) => e.appliedAt >= W.from - pendingMs && e.appliedAt < W.to + pendingMs);
        const judged = new Set([
          ...records.filter((r) => r.firstSentAt >= W.from && r.firstSentAt < W.to).map((r) => r.guid),
          ...entries.filter((e) => e.appliedAt >= W.from && e.appliedAt < W.to).map((e) => e.guid),
        ]);
        const byGuid = new Map(generated.map((g) => [g.record.guid, g.row]));
        expect(new Set(verdicts.keys())).toEqual(judged);
        const ledgerMoney = new Map<string | null, bigint>();
        const journalMoney = new Map<string | null, bigint>();
        for (const guid of judged) {
          const row = byGuid.get(guid) ?? null;
          const mine = inRange.filter((e) => e.guid === guid);
          expect(verdicts.get(guid), guid).toEqual(expectedVerdict(row, mine, W));
          if (row?.terms) add(ledgerMoney, row.terms.currency, BigInt(row.terms.amount));
          for (const e of mine) add(journalMoney, e.currency, BigInt(e.amount));
        }

        // A partition: the counts, with the GUIDs that have no posting and are in no category (a rejection, an unsettled
        // row: never matched), add up to the GUIDs judged; breaks are the judged GUIDs with a severity, once each, in order.
        if (summary.noPosting === undefined) throw new Error('a new run counts the GUIDs with no posting (noPosting)');
        const noPosting = [summary.noPosting.rejected, summary.noPosting.unsettled];
        expect(CATEGORIES.reduce((n, c) => n + summary.counts[c], 0) + noPosting.reduce((n, p) => n + p.count, 0)).toBe(judged.size);
        const breakGuids = [...judged].filter((g) => verdicts.get(g)!.severity !== null).sort(compareGuids);
        expect(breaks.map((b) => b.guid)).toEqual(breakGuids);
        expect(summary.breaks).toBe(breakGuids.length);

        // Money adds up per side: over the categories, each side's sums are that side's sums over the GUIDs judged.
        expect(sorted(total([...CATEGORIES.map((c) => summary.money[c].ledger), ...noPosting.map((p) => p.ledger)]))).toEqual(sorted(ledgerMoney));
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
