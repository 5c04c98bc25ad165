import type { Writable } from 'node:stream';
import { viewOf, type ReportOptions } from './breakView.js';
import type { ReportWriter } from './writer.js';
import { TextOut } from './textOut.js';

export const BREAK_CSV_COLUMNS = [
  'guid', 'category', 'severity', 'differs',
  'ledger_status', 'ledger_code', 'ledger_first_sent_at', 'ledger_from', 'ledger_to', 'ledger_amount', 'ledger_currency',
  'journal_entries', 'journal_refs', 'journal_from', 'journal_to', 'journal_amounts', 'journal_currencies', 'journal_applied_at', 'journal_lines',
  'first_seen',
] as const;

/** What a spreadsheet may run as a formula when a cell starts with it (CWE-1236, OWASP "CSV Injection"). */
const FORMULA_START = /^[=+\-@\t\r]/;
/** A plain integer (a negative amount of a reversal): a spreadsheet reads it as a number, never as a formula. */
const PLAIN_INTEGER = /^-?[0-9]+$/;

/**
 * RFC 4180: quoted when it holds a comma, a quote or a line break (quotes doubled); empty for null. A cell that
 * starts with `=`, `+`, `-`, `@`, a tab or a carriage return (a journal's ref or GUID, an account as the core wrote
 * it, a ledger account such as `-A1`) is neutralised as OWASP advises: prefixed with `'` and quoted, so that a
 * spreadsheet shows it as text instead of running it; a plain integer (`-500`) is left a number.
 */
export function csvCell(value: string | number | bigint | null): string {
  if (value === null) return '';
  const s = String(value);
  if (FORMULA_START.test(s) && !PLAIN_INTEGER.test(s)) return `"'${s.replaceAll('"', '""')}"`;
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/**
 * `--csv`: a header, then one row per break. The journal_* cells of a GUID with several entries list them in
 * journal order, separated by `;`. Times are ms since the epoch; the summary is not part of this form.
 */
export function csvReport(out: Writable, opts: ReportOptions = {}): ReportWriter {
  const text = new TextOut(out);
  return {
    async start() {
      await text.push(`${BREAK_CSV_COLUMNS.join(',')}\r\n`);
    },
    async write(b) {
      const v = viewOf(b, opts);
      const l = v.ledger;
      const each = (pick: (e: (typeof v.journal)[number]) => string | number | bigint | null): string =>
        v.journal.map((e) => String(pick(e) ?? '')).join(';');
      const cells = [
        v.guid, v.category, v.severity, v.differs.join(';'),
        l?.status ?? null, l?.code ?? null, l?.firstSentAt ?? null, l?.from ?? null, l?.to ?? null, l?.amount ?? null, l?.currency ?? null,
        v.journal.length, each((e) => e.ref), each((e) => e.from), each((e) => e.to), each((e) => e.amount), each((e) => e.currency),
        each((e) => e.appliedAt), each((e) => e.line),
        v.firstSeen,
      ];
      await text.push(`${cells.map(csvCell).join(',')}\r\n`);
    },
    async end() {
      await text.flush();
    },
    async fail() {
      await text.flush();
    },
  };
}
