import type { Writable } from 'node:stream';
import { formatDuration } from '../../shared/duration.js';
import { majorUnits } from '../../shared/money.js';
import { CATEGORIES, NO_POSTING_KINDS, type Category, type MoneyByCurrency, type NoPostingKind, type ReconcileSummary } from '../types.js';
import { moneyList, viewOf, type BreakView, type ReportOptions } from './breakView.js';
import type { ReportWriter } from './writer.js';
import { TextOut } from './textOut.js';

const SEVERITY: Record<Category, string> = {
  duplicate_in_journal: 'P1',
  amount_mismatch: 'P1',
  rejected_in_ledger: 'P1',
  unsettled_in_ledger: 'P1/P2',
  missing_in_journal: 'P2',
  missing_in_ledger: 'P2',
  pending: '-',
  matched: '-',
};

/** The summary's lines for the GUIDs in no category: no posting, and the row does not say done 0000. */
const NO_POSTING_LABEL: Record<NoPostingKind, string> = { rejected: 'rejected, no posting', unsettled: 'unsettled, no posting' };

const at = (ms: number): string => new Date(ms).toISOString();

/** An amount for people (CONTRACT.md §5): major units by the currency's ISO 4217 minor units, `71.99 CNY`. */
const amountText = (amount: bigint, currency: string | null): string => `${majorUnits(amount, currency)} ${currency ?? '(no currency)'}`;

function money(m: MoneyByCurrency): string {
  const parts = moneyList(m).map(({ currency, amount }) => amountText(amount, currency));
  return parts.length === 0 ? '0' : parts.join(', ');
}

/** One break on one line: severity, category, GUID, then what each side holds. */
export function breakLine(v: BreakView): string {
  const l = v.ledger;
  const ledger =
    l === null
      ? 'ledger: no row'
      : `ledger: ${l.status} ${l.code ?? '-'}` +
        (l.amount === null ? ' (tombstone: no request kept)' : `, ${l.from} → ${l.to} ${amountText(l.amount, l.currency)}`) +
        `, first sent ${at(l.firstSentAt)}`;
  const postings = v.journal.map((e) => `${e.ref} ${e.from} → ${e.to} ${amountText(e.amount, e.currency)} at ${at(e.appliedAt)} (line ${e.line})`);
  const journal = postings.length === 0 ? 'journal: no posting' : `journal: ${postings.length === 1 ? '' : `${postings.length} postings: `}${postings.join('; ')}`;
  const differs = v.differs.length === 0 ? '' : `  differs: ${v.differs.join(', ')}`;
  return `${v.severity} ${v.category} ${v.guid}${differs}  ${ledger}  ${journal}`;
}

export function summaryLines(s: ReconcileSummary): string[] {
  const w = s.window;
  const rows = CATEGORIES.map((c) => [c, SEVERITY[c], String(s.counts[c]), money(s.money[c].ledger), money(s.money[c].journal)]);
  // Agreement, but not `matched` (DONE 0000 with its posting): each on its own line, its requests' money on the ledger side.
  const apart = s.noPosting;
  if (apart !== undefined) for (const k of NO_POSTING_KINDS) rows.push([NO_POSTING_LABEL[k], '-', String(apart[k].count), money(apart[k].ledger), '0']);
  const head = ['category', 'sev', 'GUIDs', 'ledger money', 'journal money'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const table = [head, ...rows].map((r) => r.map((cell, i) => (i === 2 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ').trimEnd());
  const lines = [
    `window   [${at(w.from)}, ${at(w.to)}), pending ${formatDuration(w.pendingMs)}`,
    `journal  ${s.source} (${s.bytes} bytes, sha256 ${s.sha256}): ${s.journal.read} entries read, ` +
      `${s.journal.outsideRange} outside [from - pending, to + pending), ${s.journal.notJudged} near the edges for GUIDs not of this window`,
    `ledger   ${s.ledgerRows} rows judged`,
    ...table,
  ];
  if (s.matchedWithoutTerms > 0) lines.push(`${s.matchedWithoutTerms} matched on a tombstone's code alone (purged: no request kept to compare)`);
  lines.push(s.breaks === 0 ? 'no breaks' : `breaks: ${s.breaks} (P1 ${s.severities.P1}, P2 ${s.severities.P2})`);
  return lines;
}

/** The terminal form: one line per break as it is found, then the summary (counts and money per category and side). */
export function terminalReport(out: Writable, opts: ReportOptions = {}): ReportWriter {
  const text = new TextOut(out);
  return {
    async start() {},
    async write(b) {
      await text.push(`${breakLine(viewOf(b, opts))}\n`);
    },
    async end(summary) {
      await text.push(`${summary.breaks === 0 ? '' : '\n'}${summaryLines(summary).join('\n')}\n`);
      await text.flush();
    },
    async fail(err) {
      await text.push(`reconciliation did not finish: ${err.message}\n`);
      await text.flush();
    },
  };
}
