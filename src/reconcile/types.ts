import type { Status } from '../events/codecs.js';
import type { Category, NoPostingKind, Severity } from '../events/reconciliation.js';

/** The data of a run (categories, breaks, summaries, recorded runs) is the domain's: src/events/reconciliation.ts. */
export * from '../events/reconciliation.js';

/** A GUID's verdict: a category of CONTRACT.md §8, or no posting and no claim of one (counted apart). */
export type Verdict =
  | { readonly category: Category; readonly severity: Severity }
  | { readonly category: 'no_posting'; readonly severity: null; readonly kind: NoPostingKind };

/**
 * What the ledger knows of one GUID, as the caller reads it (either store): the projection row's status and code,
 * the raw request, and when it was first sent.
 */
export interface LedgerRecord {
  readonly guid: string;
  readonly status: Status;
  /** The definite code when DONE or PURGED (the tombstone's final code); otherwise what the row holds. */
  readonly code: string | null;
  /** The channel's raw request (JSON text) as stored; null for a PURGED row, whose tombstone keeps no request. */
  readonly request: string | null;
  /**
   * When the transfer was first sent (ms): the row's `created_at`, since `Claimed` and the first `Sent` are
   * appended in one step at one time (decide.ts, Submit). The window selects rows by it.
   */
  readonly firstSentAt: number;
}
