import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { compareGuids } from '../../src/reconcile/journalStage.js';
import type { ColumnNames } from '../../src/reconcile/columns.js';
import { openJournalFile, reconcile, type Break, type LedgerRecord, type LedgerSource, type ReconcileSummary, type ReconcileWindow, type Verdict } from '../../src/reconcile/index.js';

/** A ledger side held in memory (tests only): the window sorted as a store sorts it, lookups by GUID. */
export function memoryLedger(records: readonly LedgerRecord[]): LedgerSource & { lookedUp: string[][] } {
  const sorted = [...records].sort((a, b) => compareGuids(a.guid, b.guid));
  const byGuid = new Map(records.map((r) => [r.guid, r]));
  const lookedUp: string[][] = [];
  return {
    lookedUp,
    async *window(from, to) {
      for (const r of sorted) if (r.firstSentAt >= from && r.firstSentAt < to) yield r;
    },
    async lookup(guids) {
      lookedUp.push([...guids]);
      return guids.flatMap((g) => {
        const r = byGuid.get(g);
        return r === undefined ? [] : [r];
      });
    },
  };
}

export interface EntrySpec {
  guid: string;
  ref?: string;
  from?: string;
  to?: string;
  amount?: number | bigint;
  currency?: string | null;
  appliedAt: number;
}

const entryOf = (e: EntrySpec, i: number) => ({
  guid: e.guid,
  ref: e.ref ?? `ref-${i}`,
  from: e.from ?? 'ACC-1001',
  to: e.to ?? 'ACC-2002',
  amount: e.amount ?? 100,
  currency: e.currency === undefined ? 'CNY' : e.currency,
  appliedAt: e.appliedAt,
});

/** The entries as an NDJSON journal (amounts written as their digits, BigInts too). */
export function ndjsonText(entries: readonly EntrySpec[]): string {
  return entries
    .map(entryOf)
    .map((e) => `{"guid":${JSON.stringify(e.guid)},"ref":${JSON.stringify(e.ref)},"from":"${e.from}","to":"${e.to}","amount":${e.amount},"currency":${JSON.stringify(e.currency)},"appliedAt":${e.appliedAt}}\n`)
    .join('');
}

/** The entries as a CSV journal, with the contract's header names unless `names` maps them (and a column order of its own). */
export function csvText(entries: readonly EntrySpec[], names: Partial<Record<string, string>> = {}, time: (ms: number) => string = String): string {
  const order = ['applied_at', 'amount', 'guid', 'currency', 'ref', 'to', 'from'];
  const quote = (s: string) => (/[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s);
  const rows = entries.map(entryOf).map((e) => {
    const cell: Record<string, string> = { applied_at: time(e.appliedAt), amount: String(e.amount), guid: e.guid, currency: e.currency ?? '', ref: e.ref, to: e.to, from: e.from };
    return order.map((c) => quote(cell[c]!)).join(',');
  });
  return `${order.map((c) => names[c] ?? c).join(',')}\r\n${rows.map((r) => `${r}\r\n`).join('')}`;
}

export const request = (guid: string, terms: { from?: string; to?: string; amount?: number; currency?: string | null } = {}): string => {
  const c = terms.currency === undefined ? 'CNY' : terms.currency;
  return JSON.stringify({ guid, from: terms.from ?? 'ACC-1001', to: terms.to ?? 'ACC-2002', amount: terms.amount ?? 100, ...(c === null ? {} : { currency: c }), memo: 'rent' });
};

export interface Outcome {
  summary: ReconcileSummary;
  breaks: Break[];
  verdicts: Map<string, Verdict>;
}

/** Writes the journal text to `name` in `dir` and reconciles it against the records. */
export async function reconcileText(
  dir: string,
  name: string,
  text: string | Buffer,
  records: readonly LedgerRecord[],
  window: ReconcileWindow,
  extra: { columns?: ColumnNames } = {},
): Promise<Outcome> {
  const path = join(dir, name);
  writeFileSync(path, text);
  const breaks: Break[] = [];
  const verdicts = new Map<string, Verdict>();
  const summary = await reconcile({
    window,
    journal: await openJournalFile(path),
    ledger: memoryLedger(records),
    onBreak: (b) => void breaks.push(b),
    onJudged: (guid, v) => {
      if (verdicts.has(guid)) throw new Error(`${guid} judged twice`);
      verdicts.set(guid, v);
    },
    tempDir: dir,
    ...extra,
  });
  return { summary, breaks, verdicts };
}

export const sentRecord = (guid: string, firstSentAt: number, status: LedgerRecord['status'] = 'DONE', code: string | null = '0000', terms: Parameters<typeof request>[1] = {}): LedgerRecord => ({
  guid,
  status,
  code,
  request: request(guid, terms),
  firstSentAt,
});

/** A real run of the engine over an NDJSON journal of `entries` against `records`: what a store records (ReconcileResult). */
export async function runOver(dir: string, records: readonly LedgerRecord[], entries: readonly EntrySpec[], window: ReconcileWindow, name = `journal-${Math.random().toString(36).slice(2)}.ndjson`): Promise<Outcome> {
  return reconcileText(dir, name, ndjsonText(entries), records, window);
}
