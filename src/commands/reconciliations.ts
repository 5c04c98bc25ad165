import { summaryJson } from '../reconcile/format/jsonReport.js';
import { toJson } from '../reconcile/format/jsonText.js';
import { viewOf } from '../reconcile/format/breakView.js';
import type { ReconcileResult, RecordedReconciliation, RecordedRun } from '../events/reconciliation.js';
import type { ReconciliationLog } from '../events/store.js';
import { orThrow } from '../events/storeResult.js';

/**
 * Recorded reconciliation runs as the operator API and the console show them: the JSON of `reconcile --json`
 * (CONTRACT.md §8; src/reconcile/format) with the run's id and time, account numbers masked, amounts exact.
 */

/** A run in a list: what it covered and found, without its breaks (`breakCount`: how many). */
export function runHeadView(run: RecordedRun): Record<string, unknown> {
  const s = run.summary;
  return { id: run.id, recordedAt: run.recordedAt, window: s.window, source: s.source, sha256: s.sha256, counts: s.counts, severities: s.severities, breakCount: s.breaks };
}

/** One run: its summary (money per category and side, the journal's counts) and its breaks, each with its first-seen run. */
export function runView(run: RecordedReconciliation): Record<string, unknown> {
  return { id: run.id, recordedAt: run.recordedAt, window: run.summary.window, source: run.summary.source, ...summaryJson(run.summary), breakCount: run.summary.breaks, breaks: run.breaks.map((b) => viewOf(b)) };
}

/** JSON text of a view: its amounts (BigInts) written as their digits, exact whatever their size. */
export const viewJson = (value: unknown): string => toJson(value);

/**
 * Where a finished run is recorded (the `record` hook of the reconcile command's run): the ledger's
 * `recordReconciliation`, a ledger failure thrown as its StoreError (the run then could not finish: exit 1). Gives
 * back the run as recorded: its id, and its breaks with the run that first saw each.
 */
export function recordIn(store: Pick<ReconciliationLog, 'recordReconciliation'>): (run: ReconcileResult) => Promise<RecordedReconciliation> {
  return (run) => orThrow(store.recordReconciliation(run));
}
