import { STATUSES, type Status } from '../events/codecs.js';
import * as E from 'fp-ts/lib/Either.js';
import type { LedgerReadModel, StoreResult } from '../events/store.js';

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

/** `guidgate stats`. */
export async function ledgerStats(store: LedgerReadModel, opts: { maxAttempts: number; clock?: () => number }): StoreResult<LedgerStats> {
  const now = (opts.clock ?? Date.now)();
  const counted = await store.countByStatus();
  if (E.isLeft(counted)) return counted;
  const dead = await store.countLedger({ statuses: ['FAILED'], attemptsAtLeast: opts.maxAttempts });
  if (E.isLeft(dead)) return dead;
  const byStatus = counted.right;
  const deadLetters = dead.right;
  const rows = Object.fromEntries(STATUSES.map((s) => [s, byStatus[s].count])) as Record<Status, number>;
  const oldest = (s: Status): OldestRow | null => {
    const at = byStatus[s].oldestUpdatedAt;
    return at === null ? null : { updatedAt: at, ageMs: Math.max(0, now - at) };
  };
  return E.right({
    rows,
    total: STATUSES.reduce((n, s) => n + rows[s], 0),
    oldest: { UNKNOWN: oldest('UNKNOWN'), FAILED: oldest('FAILED') },
    deadLetters: { maxAttempts: opts.maxAttempts, count: deadLetters },
  });
}
