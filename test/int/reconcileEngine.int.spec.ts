import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseColumns } from '../../src/reconcile/columns.js';
import { LedgerSourceError } from '../../src/reconcile/errors.js';
import { parseWindow } from '../../src/reconcile/instant.js';
import { openJournalFile, reconcile, type Category, type LedgerRecord, type ReconcileWindow } from '../../src/reconcile/index.js';
import { csvText, memoryLedger, ndjsonText, reconcileText, request, type EntrySpec } from '../support/reconcile.js';
import { useTempDir } from '../support/tmp.js';

const tempDir = useTempDir();
const HOUR = 3_600_000;
/** The business day 2024-05-01 in Shanghai, as an operator gives it. */
const W: ReconcileWindow = parseWindow({ from: '2024-05-01T00:00:00+08:00', to: '2024-05-02T00:00:00+08:00', pending: '1h' });
const at = (h: number): number => W.from + h * HOUR;

const done = (guid: string, sent: number, terms: Parameters<typeof request>[1] = {}, code = '0000'): LedgerRecord => ({
  guid, status: 'DONE', code, request: request(guid, terms), firstSentAt: sent,
});
const row = (guid: string, status: LedgerRecord['status'], code: string | null, sent: number): LedgerRecord => ({
  guid, status, code, request: status === 'PURGED' ? null : request(guid), firstSentAt: sent,
});

/** A day with every category made on purpose, and what each GUID should be. */
const ledger: LedgerRecord[] = [
  done('G-matched', at(1)),
  done('G-posting-removed', at(2)),
  done('G-second-posting', at(3)),
  done('G-altered-amount', at(4)),
  done('G-b201-posted', at(5), {}, 'B201'),
  row('G-unknown-posted', 'UNKNOWN', 'E901', at(6)),
  row('G-failed-posted', 'FAILED', 'E902', at(7)),
  done('G-pending', W.to - 10 * 60_000),
  row('G-purged', 'PURGED', '0000', at(8)),
  done('G-usd', at(9), { currency: 'USD', amount: 7 }),
  done('G-no-currency', at(10), { currency: null, amount: 9 }),
];
const journal: EntrySpec[] = [
  { guid: 'G-matched', appliedAt: at(1) + 5 },
  { guid: 'G-second-posting', appliedAt: at(3) + 5, ref: 'tx-a' },
  { guid: 'G-altered-amount', appliedAt: at(4) + 5, amount: 101 },
  { guid: 'G-b201-posted', appliedAt: at(5) + 5 },
  { guid: 'G-unknown-posted', appliedAt: at(6) + 5 },
  { guid: 'G-failed-posted', appliedAt: at(7) + 5 },
  { guid: 'G-purged', appliedAt: at(8) + 5, amount: 55 },
  { guid: 'G-usd', appliedAt: at(9) + 5, currency: 'USD', amount: 7 },
  { guid: 'G-no-currency', appliedAt: at(10) + 5, currency: null, amount: 9 },
  { guid: 'G-unknown-to-guidgate', appliedAt: at(11) },
  { guid: 'G-second-posting', appliedAt: at(12), ref: 'tx-b' },
];
const expected: Record<string, [Category, 'P1' | 'P2' | null]> = {
  'G-matched': ['matched', null],
  'G-posting-removed': ['missing_in_journal', 'P2'],
  'G-second-posting': ['duplicate_in_journal', 'P1'],
  'G-altered-amount': ['amount_mismatch', 'P1'],
  'G-b201-posted': ['rejected_in_ledger', 'P1'],
  'G-unknown-posted': ['unsettled_in_ledger', 'P2'],
  'G-failed-posted': ['unsettled_in_ledger', 'P1'],
  'G-pending': ['pending', null],
  'G-purged': ['matched', null],
  'G-usd': ['matched', null],
  'G-no-currency': ['matched', null],
  'G-unknown-to-guidgate': ['missing_in_ledger', 'P2'],
};

describe('reconcile: golden day, every category made on purpose', () => {
  const forms = [
    ['NDJSON', 'journal.ndjson', () => ndjsonText(journal), undefined],
    ['CSV', 'journal.csv', () => csvText(journal), undefined],
    ['CSV with a core\'s own header names', 'core.csv', () => csvText(journal, { guid: 'TXN_NO', amount: 'AMT', applied_at: 'POSTED_AT' }), 'guid=TXN_NO,amount=AMT,applied_at=POSTED_AT'],
    ['CSV with ISO times in three time zones', 'iso.csv', () => csvText(journal, {}, (ms) => isoIn(ms, [8, -5, 0][ms % 3]!)), undefined],
  ] as const;

  it.each(forms)('%s: each GUID in its category with its severity; breaks in GUID order', async (_form, name, text, columns) => {
    const { summary, breaks, verdicts } = await reconcileText(tempDir(), name, text(), ledger, W, columns === undefined ? {} : { columns: parseColumns(columns) });
    expect(Object.fromEntries([...verdicts].map(([g, v]) => [g, [v.category, v.severity]]))).toEqual(expected);
    expect(breaks.map((b) => [b.guid, b.category, b.severity])).toEqual(
      Object.entries(expected).filter(([, [, s]]) => s !== null).map(([g, [c, s]]) => [g, c, s]).sort(([a], [b]) => (a! < b! ? -1 : 1)),
    );
    expect(summary.counts).toEqual({
      duplicate_in_journal: 1, amount_mismatch: 1, rejected_in_ledger: 1, unsettled_in_ledger: 2,
      missing_in_journal: 1, missing_in_ledger: 1, pending: 1, matched: 4,
    });
    expect(summary.breaks).toBe(7);
    expect(summary.severities).toEqual({ P1: 4, P2: 3 });
    expect(summary.matchedWithoutTerms).toBe(1);
    expect(summary.ledgerRows).toBe(11);
    expect(summary.journal).toEqual({ read: 11, outsideRange: 0, notJudged: 0 });
  });

  it('money per category and per side, exact, per currency, no currency its own bucket', async () => {
    const { summary } = await reconcileText(tempDir(), 'j.ndjson', ndjsonText(journal), ledger, W);
    const money = (c: Category) => ({ ledger: Object.fromEntries(summary.money[c].ledger), journal: Object.fromEntries(summary.money[c].journal) });
    expect(money('duplicate_in_journal')).toEqual({ ledger: { CNY: 100n }, journal: { CNY: 200n } });
    expect(money('amount_mismatch')).toEqual({ ledger: { CNY: 100n }, journal: { CNY: 101n } });
    expect(money('missing_in_journal')).toEqual({ ledger: { CNY: 100n }, journal: {} });
    expect(money('missing_in_ledger')).toEqual({ ledger: {}, journal: { CNY: 100n } });
    expect(money('unsettled_in_ledger')).toEqual({ ledger: { CNY: 200n }, journal: { CNY: 200n } });
    // the tombstone adds its posting to the journal side and nothing to the ledger side
    expect(summary.money.matched.ledger).toEqual(new Map<string | null, bigint>([['CNY', 100n], ['USD', 7n], [null, 9n]]));
    expect(summary.money.matched.journal).toEqual(new Map<string | null, bigint>([['CNY', 155n], ['USD', 7n], [null, 9n]]));
    expect(money('pending')).toEqual({ ledger: { CNY: 100n }, journal: {} });
  });

  it('matched is DONE 0000 with its posting: a rejection and a failed send with no posting are counted apart, and each side of matched sums the same GUIDs', async () => {
    const day: LedgerRecord[] = [
      done('N-done', at(1), { amount: 5200 }),
      done('N-rejected', at(2), { amount: 1999 }, 'B201'),
      done('N-e500', at(3), { amount: 50 }, 'E500'),
      row('N-failed', 'FAILED', 'E902', at(4)),
    ];
    const { summary, breaks } = await reconcileText(tempDir(), 'j.ndjson', ndjsonText([{ guid: 'N-done', appliedAt: at(1) + 5, amount: 5200 }]), day, W);
    expect(breaks).toEqual([]);
    expect(summary.counts.matched).toBe(1);
    expect(summary.money.matched).toEqual({ ledger: new Map([['CNY', 5200n]]), journal: new Map([['CNY', 5200n]]) });
    expect(summary.noPosting).toEqual({
      rejected: { count: 2, ledger: new Map([['CNY', 2049n]]) },
      unsettled: { count: 1, ledger: new Map([['CNY', 100n]]) },
    });
    expect(Object.values(summary.counts).reduce((a, b) => a + b, 0)).toBe(1);
    expect(summary.ledgerRows).toBe(4);
  });

  it('a break carries both sides: the row\'s facts and every entry, firstSeen left for the recorder', async () => {
    const { breaks } = await reconcileText(tempDir(), 'j.ndjson', ndjsonText(journal), ledger, W);
    const dup = breaks.find((b) => b.guid === 'G-second-posting')!;
    expect(dup.ledger).toEqual({ guid: 'G-second-posting', status: 'DONE', code: '0000', firstSentAt: at(3), terms: { from: 'ACC-1001', to: 'ACC-2002', amount: 100n, currency: 'CNY' } });
    expect(dup.journal.map((e) => [e.ref, e.line])).toEqual([['tx-a', 2], ['tx-b', 11]]);
    expect(dup.firstSeen).toBeNull();
  });

  it('an amount past 2^53 is compared and summed exactly', async () => {
    const big = 2n ** 60n + 1n;
    const { verdicts, summary } = await reconcileText(tempDir(), 'j.ndjson', ndjsonText([{ guid: 'G-big', appliedAt: at(1), amount: big }]), [done('G-big', at(1), { amount: 5 })], W);
    expect(verdicts.get('G-big')?.category).toBe('amount_mismatch');
    expect(summary.money.amount_mismatch.journal.get('CNY')).toBe(big);
  });
});

function isoIn(ms: number, offsetHours: number): string {
  const local = new Date(ms + offsetHours * HOUR).toISOString().slice(0, -1);
  const sign = offsetHours < 0 ? '-' : '+';
  return `${local}${sign}${String(Math.abs(offsetHours)).padStart(2, '0')}:00`;
}

describe('reconcile: the window\'s edges', () => {
  const P = W.pendingMs;
  async function judge(records: LedgerRecord[], entries: EntrySpec[]) {
    return reconcileText(tempDir(), 'j.ndjson', ndjsonText(entries), records, W);
  }
  const categoryOf = (o: Awaited<ReturnType<typeof judge>>, g: string) => o.verdicts.get(g)?.category ?? 'not judged';

  it('from is inclusive, to exclusive, for rows (first sent) and for entries (applied)', async () => {
    const o = await judge(
      [done('R-at-from', W.from), done('R-before-from', W.from - 1), done('R-last-ms', W.to - 1), done('R-at-to', W.to)],
      [
        { guid: 'R-at-from', appliedAt: W.from }, { guid: 'R-before-from', appliedAt: W.from - 1 }, { guid: 'R-last-ms', appliedAt: W.to - 1 }, { guid: 'R-at-to', appliedAt: W.to },
        { guid: 'J-at-from', appliedAt: W.from }, { guid: 'J-before-from', appliedAt: W.from - 1 }, { guid: 'J-last-ms', appliedAt: W.to - 1 }, { guid: 'J-at-to', appliedAt: W.to },
      ],
    );
    expect(categoryOf(o, 'R-at-from')).toBe('matched');
    expect(categoryOf(o, 'R-before-from')).toBe('not judged');
    expect(categoryOf(o, 'R-last-ms')).toBe('matched');
    expect(categoryOf(o, 'R-at-to')).toBe('not judged');
    expect(categoryOf(o, 'J-at-from')).toBe('missing_in_ledger');
    expect(categoryOf(o, 'J-before-from')).toBe('not judged');
    expect(categoryOf(o, 'J-last-ms')).toBe('missing_in_ledger');
    expect(categoryOf(o, 'J-at-to')).toBe('not judged');
    expect(o.summary.journal.notJudged).toBe(4);
  });

  it('the pending slack: sent within pending of to, posted up to to + pending is matched; not yet posted is pending', async () => {
    const o = await judge(
      [done('late-posted', W.to - 1), done('late-too-late', W.to - 1), done('edge-of-slack', W.to - P), done('before-slack', W.to - P - 1), done('posted-next-day', at(5))],
      [
        { guid: 'late-posted', appliedAt: W.to + P - 1 },
        { guid: 'late-too-late', appliedAt: W.to + P },
        { guid: 'posted-next-day', appliedAt: W.to + 10 },
      ],
    );
    expect(categoryOf(o, 'late-posted')).toBe('matched');
    expect(categoryOf(o, 'late-too-late')).toBe('pending');
    expect(categoryOf(o, 'edge-of-slack')).toBe('pending');
    expect(categoryOf(o, 'before-slack')).toBe('missing_in_journal');
    // any row of the window is compared with its entries in the slack, not only those sent near to
    expect(categoryOf(o, 'posted-next-day')).toBe('matched');
    expect(o.summary.journal.outsideRange).toBe(1);
  });

  it('an entry in the window for a transfer first sent before from is judged against its row, looked up by GUID', async () => {
    const records = [done('sent-yesterday', W.from - 3 * HOUR), row('failed-yesterday', 'FAILED', 'E902', W.from - 2 * HOUR), done('sent-yesterday-twice', W.from - HOUR)];
    const source = memoryLedger(records);
    const dir = tempDir();
    const path = join(dir, 'j.ndjson');
    (await import('node:fs')).writeFileSync(path, ndjsonText([
      { guid: 'sent-yesterday', appliedAt: at(2) },
      { guid: 'failed-yesterday', appliedAt: at(2) },
      { guid: 'sent-yesterday-twice', appliedAt: W.from - 30 * 60_000 },
      { guid: 'sent-yesterday-twice', appliedAt: at(1) },
      { guid: 'never-sent', appliedAt: at(3) },
    ]));
    const verdicts = new Map<string, string>();
    await reconcile({ window: W, journal: await openJournalFile(path), ledger: source, onBreak: () => {}, onJudged: (g, v) => verdicts.set(g, `${v.category} ${v.severity}`), tempDir: dir });
    expect(Object.fromEntries(verdicts)).toEqual({
      'failed-yesterday': 'unsettled_in_ledger P1',
      'never-sent': 'missing_in_ledger P2',
      'sent-yesterday': 'matched null',
      'sent-yesterday-twice': 'duplicate_in_journal P1',
    });
    expect(source.lookedUp).toEqual([['failed-yesterday', 'never-sent', 'sent-yesterday', 'sent-yesterday-twice']]);
  });

  it('a row sent just after from whose entry the core stamped just before from (clocks apart) is matched, not missing', async () => {
    const o = await judge([done('skewed', W.from + 10)], [{ guid: 'skewed', appliedAt: W.from - 5 }]);
    expect(categoryOf(o, 'skewed')).toBe('matched');
  });

  it('the window given as ms or as ISO in any offset is the same window', () => {
    expect(parseWindow({ from: String(W.from), to: '2024-05-01T16:00:00Z', pending: '1h' })).toEqual(W);
    expect(parseWindow({ from: '2024-04-30T12:00:00-04:00', to: '2024-05-02T01:30:00+09:30', pending: '60m' })).toEqual(W);
  });
});

describe('reconcile: the ledger source and the temporary file', () => {
  it('rows out of GUID order stop the run (a store sorted by another collation would mismatch silently)', async () => {
    const dir = tempDir();
    const path = join(dir, 'j.ndjson');
    (await import('node:fs')).writeFileSync(path, ndjsonText([{ guid: 'b', appliedAt: at(1) }]));
    const unsorted = { async *window() { yield done('b', at(1)); yield done('a', at(1)); }, async lookup() { return []; } };
    await expect(reconcile({ window: W, journal: await openJournalFile(path), ledger: unsorted, onBreak: () => {}, tempDir: dir })).rejects.toThrow(/not in ascending GUID order: a came after b/);
    const outside = { async *window() { yield done('a', W.to); }, async lookup() { return []; } };
    await expect(reconcile({ window: W, journal: await openJournalFile(path), ledger: outside, onBreak: () => {}, tempDir: dir })).rejects.toThrow(LedgerSourceError);
    const stranger = { async *window() {}, async lookup() { return [done('zzz', at(1))]; } };
    await expect(reconcile({ window: W, journal: await openJournalFile(path), ledger: stranger, onBreak: () => {}, tempDir: dir })).rejects.toThrow(/returned zzz, which was not asked for/);
  });

  it('a stored request that does not parse stops the run naming the GUID', async () => {
    const bad: LedgerRecord = { guid: 'G-bad', status: 'DONE', code: '0000', request: '{"from":"A"', firstSentAt: at(1) };
    await expect(reconcileText(tempDir(), 'j.ndjson', '', [bad], W)).rejects.toThrow(/stored request of G-bad is not JSON/);
  });

  it('the staged journal is deleted after a run, and after a failed one', async () => {
    const dir = tempDir();
    const stage = join(dir, 'stage');
    mkdirSync(stage);
    const path = join(dir, 'j.ndjson');
    (await import('node:fs')).writeFileSync(path, ndjsonText(journal));
    await reconcile({ window: W, journal: await openJournalFile(path), ledger: memoryLedger(ledger), onBreak: () => {}, tempDir: stage });
    expect(readdirSync(stage)).toEqual([]);
    const failing = { async *window() { throw new Error('ledger gone'); }, async lookup() { return []; } };
    await expect(reconcile({ window: W, journal: await openJournalFile(path), ledger: failing, onBreak: () => {}, tempDir: stage })).rejects.toThrow('ledger gone');
    expect(readdirSync(stage)).toEqual([]);
  });

  it('reports progress: the journal in bytes up to its size, then the merge in staged entries up to their number', async () => {
    const dir = tempDir();
    const path = join(dir, 'j.ndjson');
    const text = ndjsonText(Array.from({ length: 8000 }, (_, i) => ({ guid: `P-${i}`, appliedAt: at(1) + i })));
    (await import('node:fs')).writeFileSync(path, text);
    const seen: Array<{ phase: string; done: number; total: number | null }> = [];
    await reconcile({ window: W, journal: await openJournalFile(path), ledger: memoryLedger([]), onBreak: () => {}, onProgress: (p) => void seen.push(p), tempDir: dir });
    const journalPhase = seen.filter((p) => p.phase === 'journal');
    const comparePhase = seen.filter((p) => p.phase === 'compare');
    expect(journalPhase.length).toBeGreaterThan(1);
    expect(journalPhase.at(-1)).toEqual({ phase: 'journal', done: Buffer.byteLength(text), total: Buffer.byteLength(text) });
    expect(comparePhase.at(-1)).toEqual({ phase: 'compare', done: 8000, total: 8000 });
    expect(seen.findIndex((p) => p.phase === 'compare')).toBeGreaterThan(seen.findLastIndex((p) => p.phase === 'journal'));
    const dones = comparePhase.map((p) => p.done);
    expect(dones).toEqual([...dones].sort((a, b) => a - b));
  });

  it('lookups go in batches and breaks still come out in GUID order', async () => {
    const entries: EntrySpec[] = Array.from({ length: 1203 }, (_, i) => ({ guid: `J-${String(i).padStart(5, '0')}`, appliedAt: at(1) + i }));
    // J-00300x sorts among the journal's GUIDs: its break must wait for the lookups of those before it.
    const records = [done('J-00600', at(2)), done('A-first', at(2)), done('J-00300x', at(2))];
    const source = memoryLedger(records);
    const dir = tempDir();
    const path = join(dir, 'j.ndjson');
    (await import('node:fs')).writeFileSync(path, ndjsonText(entries.reverse()));
    const order: string[] = [];
    const summary = await reconcile({ window: W, journal: await openJournalFile(path), ledger: source, onBreak: (b) => void order.push(b.guid), tempDir: dir });
    expect(source.lookedUp.map((l) => l.length)).toEqual([500, 500, 202]);
    expect(order).toEqual([...order].sort());
    expect(order[0]).toBe('A-first');
    expect(order.indexOf('J-00300x')).toBe(order.indexOf('J-00300') + 1);
    expect(summary.counts.missing_in_journal).toBe(2); // A-first and J-00300x
    expect(summary.counts.missing_in_ledger).toBe(1202);
    expect(summary.counts.matched).toBe(1);
  });
});
