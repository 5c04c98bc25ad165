import type { Break, ReconcileSummary, ReconcileWindow } from '../types.js';

/** What a run's output knows before the first break. */
export interface ReportHead {
  readonly window: ReconcileWindow;
  readonly source: string;
}

/**
 * One run's output, written as the run goes: `start`, then `write` per break (in GUID order), then `end` with
 * the summary, or `fail` when the run could not finish (the JSON form still closes its object, saying why).
 */
export interface ReportWriter {
  start(head: ReportHead): Promise<void>;
  write(b: Break): Promise<void>;
  /** `extra`: members the JSON form adds at its end (`settled` after `--settle`); the other forms leave it to the caller. */
  end(summary: ReconcileSummary, extra?: Readonly<Record<string, unknown>>): Promise<void>;
  fail(err: Error & { code?: string }): Promise<void>;
}
