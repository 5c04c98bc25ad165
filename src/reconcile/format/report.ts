import type { Writable } from 'node:stream';
import type { ReportOptions } from './breakView.js';
import { csvReport } from './csvReport.js';
import { jsonReport } from './jsonReport.js';
import { terminalReport } from './terminalReport.js';
import type { ReportWriter } from './writer.js';

/** The forms of a run's output: the terminal's lines, `--json`, `--csv`. */
export type ReportFormat = 'terminal' | 'json' | 'csv';

export function reportWriter(format: ReportFormat, out: Writable, opts: ReportOptions = {}): ReportWriter {
  switch (format) {
    case 'terminal':
      return terminalReport(out, opts);
    case 'json':
      return jsonReport(out, opts);
    case 'csv':
      return csvReport(out, opts);
  }
}
