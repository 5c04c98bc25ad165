/**
 * Reconciliation of the ledger against the account system's journal (CONTRACT.md §8). Self-contained: it reads
 * the domain's types and libraries only; the command, the store's ledger reads and the recorded runs wire it.
 * The rules: docs/reconciliation-rules.md.
 */
export { reconcile, LOOKUP_BATCH, type LedgerSource, type ReconcileRun, type ReconcileProgress } from './engine.js';
export { classify, sameTerms } from './classify.js';
export { parseColumns, JOURNAL_COLUMNS, CONTRACT_COLUMN_NAMES, type ColumnNames, type JournalColumn } from './columns.js';
export { parseInstant, parseWindow, journalRange, DEFAULT_PENDING_MS, type WindowOptions } from './instant.js';
export { openJournalFile, openJournalUrl, journalFormatOf, parseJournalFormat, JOURNAL_FORMATS, type JournalInput, type JournalFormat, type JournalUrlOptions } from './journalInput.js';
export { compareGuids } from './journalStage.js';
export { ledgerRecordOf, termsOfRequest, factsOf } from './ledgerFacts.js';
export {
  ReconcileError, ReconcileUsageError, JournalLineError, JournalSourceError, LedgerSourceError, TooManyBreaksError, isReconcileError,
  type ReconcileErrorCode,
} from './errors.js';
export { reportWriter, type ReportFormat } from './format/report.js';
export type { ReportWriter, ReportHead } from './format/writer.js';
export { viewOf, type BreakView, type ReportOptions } from './format/breakView.js';
export * from './types.js';
