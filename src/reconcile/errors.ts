/**
 * Stable codes of a reconciliation's failures: callers switch on these, never on message text.
 * - RECONCILE_USAGE: an option's text is bad (exit 2);
 * - JOURNAL_LINE: a journal line is not valid; the run stops there (exit 1);
 * - JOURNAL_SOURCE: the journal could not be read (no file, the endpoint answered anything but 200 NDJSON, the body broke off);
 * - LEDGER_SOURCE: the ledger side broke its promise (rows not in GUID order, a request that does not parse);
 * - TOO_MANY_BREAKS: more breaks than a run keeps (`--max-breaks`); the run stops, nothing recorded.
 */
export type ReconcileErrorCode = 'RECONCILE_USAGE' | 'JOURNAL_LINE' | 'JOURNAL_SOURCE' | 'LEDGER_SOURCE' | 'TOO_MANY_BREAKS';

export abstract class ReconcileError extends Error {
  abstract readonly code: ReconcileErrorCode;
}

/** A bad option: `option` is the flag as the operator typed it (`--from`, `--columns`). */
export class ReconcileUsageError extends ReconcileError {
  override readonly name = 'ReconcileUsageError';
  readonly code = 'RECONCILE_USAGE';
  constructor(
    readonly option: string,
    detail: string,
  ) {
    super(`${option}: ${detail}`);
  }
}

/**
 * A journal line that is not valid. `line` is 1-based (a CSV's header is line 1); `field` names the column or key
 * at fault as the journal spells it, or null when the line as a whole is bad (not JSON, not UTF-8).
 */
export class JournalLineError extends ReconcileError {
  override readonly name = 'JournalLineError';
  readonly code = 'JOURNAL_LINE';
  constructor(
    readonly line: number,
    readonly field: string | null,
    readonly detail: string,
  ) {
    super(`journal line ${line}${field === null ? '' : `, ${field}`}: ${detail}`);
  }
}

export class JournalSourceError extends ReconcileError {
  override readonly name = 'JournalSourceError';
  readonly code = 'JOURNAL_SOURCE';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export class LedgerSourceError extends ReconcileError {
  override readonly name = 'LedgerSourceError';
  readonly code = 'LEDGER_SOURCE';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * More breaks than one run keeps: each is held until the run is recorded (about 2 KB apiece, in memory and then in
 * the ledger), so a run is capped rather than let grow until the process runs out of memory. A window that broken
 * is most often the wrong journal, columns or window.
 */
export class TooManyBreaksError extends ReconcileError {
  override readonly name = 'TooManyBreaksError';
  readonly code = 'TOO_MANY_BREAKS';
  constructor(readonly limit: number) {
    super(
      `more than ${limit} breaks: the run stopped there and recorded nothing (each break is kept until the run is recorded). ` +
        'So many usually means the wrong journal, --columns or window: check those, reconcile a narrower window, or raise --max-breaks',
    );
  }
}

export function isReconcileError(err: unknown): err is ReconcileError {
  return err instanceof ReconcileError;
}
