import type { Writable } from 'node:stream';
import { CATEGORIES, NO_POSTING_KINDS, type ReconcileSummary } from '../types.js';
import { moneyList, viewOf, type ReportOptions } from './breakView.js';
import { toJson } from './jsonText.js';
import type { ReportWriter } from './writer.js';
import { TextOut } from './textOut.js';

/** The summary's members of the JSON form (everything but window, source and breaks). */
export function summaryJson(s: ReconcileSummary): Record<string, unknown> {
  return {
    sha256: s.sha256,
    bytes: s.bytes,
    counts: s.counts,
    severities: s.severities,
    money: Object.fromEntries(CATEGORIES.map((c) => [c, { ledger: moneyList(s.money[c].ledger), journal: moneyList(s.money[c].journal) }])),
    journal: s.journal,
    ledgerRows: s.ledgerRows,
    matchedWithoutTerms: s.matchedWithoutTerms,
    // GUIDs with no posting whose row does not say done 0000: in no category (not matched, not a break).
    ...(s.noPosting === undefined ? {} : { noPosting: Object.fromEntries(NO_POSTING_KINDS.map((k) => [k, { count: s.noPosting![k].count, ledger: moneyList(s.noPosting![k].ledger) }])) }),
  };
}

/**
 * `--json`: one object, `{window, source, breaks: [...], sha256, counts, …}` (CONTRACT.md §8). The breaks are
 * written as they come, one a line, so the members known only at the end follow them; amounts are JSON numbers
 * written exactly. A run that fails still closes the object, with `sha256` and `counts` null and an `error`.
 */
export function jsonReport(out: Writable, opts: ReportOptions = {}): ReportWriter {
  const text = new TextOut(out);
  let written = 0;
  return {
    async start({ window, source }) {
      await text.push(`{"window":${toJson(window)},"source":${toJson(source)},"breaks":[`);
    },
    async write(b) {
      await text.push(`${written++ === 0 ? '' : ','}\n${toJson(viewOf(b, opts))}`);
    },
    async end(summary, extra) {
      const rest = toJson({ ...summaryJson(summary), ...extra }).slice(1, -1);
      await text.push(`${written === 0 ? '' : '\n'}],${rest}}\n`);
      await text.flush();
    },
    async fail(err) {
      const error = toJson({ code: err.code ?? null, message: err.message });
      await text.push(`${written === 0 ? '' : '\n'}],"sha256":null,"counts":null,"error":${error}}\n`);
      await text.flush();
    },
  };
}
