import * as E from 'fp-ts/lib/Either.js';
import { STATUSES, type Status } from '../events/codecs.js';
import { deadLetterRows, ledgerTime } from '../events/policy.js';
import type { LedgerClock, LedgerReadModel, StatusSummary, StoreResult } from '../events/store.js';
import type { LedgerState } from '../events/state.js';

/** One reading of the ledger's counts: rows and the oldest last change per status, and the dead letters. */
export interface LedgerCounts {
  readonly byStatus: Record<Status, StatusSummary>;
  /** FAILED rows at the attempt cap (`isDeadLetter`): reprocess will not send them again, a person has to look. */
  readonly deadLetters: { readonly maxAttempts: number; readonly count: number };
}

/** The counts `guidgate stats`, the operator API's `GET /v1/stats` and the console's overview are made from. */
export async function readLedgerCounts(store: LedgerReadModel, opts: { readonly maxAttempts: number }): StoreResult<LedgerCounts> {
  const counted = await store.countByStatus();
  if (E.isLeft(counted)) return counted;
  const dead = await store.countLedger(deadLetterRows(opts.maxAttempts));
  if (E.isLeft(dead)) return dead;
  return E.right({ byStatus: counted.right, deadLetters: { maxAttempts: opts.maxAttempts, count: dead.right } });
}

export interface OldestRow {
  /** `updated_at` of the oldest row in that status (ms since the epoch). */
  readonly updatedAt: number;
  readonly ageMs: number;
}

export interface LedgerStats {
  readonly rows: Record<Status, number>;
  readonly total: number;
  /** The oldest UNKNOWN and FAILED rows, by their last event; null when there is none. */
  readonly oldest: { readonly UNKNOWN: OldestRow | null; readonly FAILED: OldestRow | null };
  /** FAILED rows at the attempt cap: reprocess will not send them again, a person has to look (dead letters). */
  readonly deadLetters: { readonly maxAttempts: number; readonly count: number };
}

/** `guidgate stats`: the counts, with the ages of the oldest UNKNOWN and FAILED rows by the ledger's clock. */
export async function ledgerStats(store: LedgerReadModel & LedgerClock, opts: { maxAttempts: number; clock?: (() => number) | undefined }): StoreResult<LedgerStats> {
  const time = await ledgerTime(store, opts.clock);
  if (E.isLeft(time)) return time;
  const now = time.right;
  const read = await readLedgerCounts(store, opts);
  if (E.isLeft(read)) return read;
  const { byStatus, deadLetters } = read.right;
  const rows = Object.fromEntries(STATUSES.map((s) => [s, byStatus[s].count])) as Record<Status, number>;
  const oldest = (s: Status): OldestRow | null => {
    const at = byStatus[s].oldestUpdatedAt;
    return at === null ? null : { updatedAt: at, ageMs: Math.max(0, now - at) };
  };
  return E.right({
    rows,
    total: STATUSES.reduce((n, s) => n + rows[s], 0),
    oldest: { UNKNOWN: oldest('UNKNOWN'), FAILED: oldest('FAILED') },
    deadLetters,
  });
}

/**
 * The row whose last change is the oldest of its status (the first such GUID), as the counts found that time;
 * null when there is none, or when it moved meanwhile. The operator API's overview links to it.
 */
export async function oldestRowOf(store: LedgerReadModel, counts: LedgerCounts, status: Status): StoreResult<LedgerState | null> {
  const at = counts.byStatus[status].oldestUpdatedAt;
  if (at === null) return E.right(null);
  return E.map((found: LedgerState[]) => found[0] ?? null)(await store.queryLedger({ statuses: [status], updatedBefore: at + 1, limit: 1 }));
}
