import * as E from 'fp-ts/lib/Either.js';
import { STATUSES, type Status } from '../events/codecs.js';
import { deadLetterRows, ledgerTime } from '../events/policy.js';
import type { EventLog, LedgerClock, LedgerReadModel, StatusSummary, StoreResult } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import { toStoreError } from '../events/storeResult.js';
import { pagedRows } from './rows.js';

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
  /** The dead letters sent every time into silence (`readBlackHoleDeadLetters`). */
  readonly blackHoles: BlackHoleDeadLetters;
}

/** `guidgate stats`: the counts, with the ages of the oldest UNKNOWN and FAILED rows by the ledger's clock. */
export async function ledgerStats(store: LedgerReadModel & LedgerClock & EventLog, opts: { maxAttempts: number; clock?: (() => number) | undefined }): StoreResult<LedgerStats> {
  const time = await ledgerTime(store, opts.clock);
  if (E.isLeft(time)) return time;
  const now = time.right;
  const read = await readLedgerCounts(store, opts);
  if (E.isLeft(read)) return read;
  const { byStatus, deadLetters } = read.right;
  const blackHoles = await readBlackHoleDeadLetters(store, { maxAttempts: opts.maxAttempts });
  if (E.isLeft(blackHoles)) return blackHoles;
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
    blackHoles: blackHoles.right,
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

/**
 * A transfer sent again and again into an account system that takes the request and never answers (a "black hole",
 * docs/operating.md, "An account system that accepts connections and never answers"): every send ended
 * without an answer (timed out), and every inquiry about it said absent, so each resend was by the rules.
 */
export interface UnansweredSends {
  /** Sends (every `Sent`). */
  readonly sent: number;
  /** Inquiries that said absent (`Resolved`, outcome absent): one per send, or one fewer while the last is unasked. */
  readonly absent: number;
  /** What the timeline and the overview say: "sent 5 times, every inquiry absent". */
  readonly summary: string;
}

/**
 * The black-hole pattern in a GUID's events, or null: sent at least twice, no answer to any send (no `Answered`, no
 * `StaleAnswer`), no refused connection, and every inquiry absent (one after each send but perhaps the last).
 */
export function unansweredSends(events: ReadonlyArray<{ readonly type: string; readonly data: unknown }>): UnansweredSends | null {
  let sent = 0;
  let absent = 0;
  for (const e of events) {
    if (e.type === 'Sent') sent++;
    else if (e.type === 'Answered' || e.type === 'StaleAnswer' || e.type === 'ConnectFailed') return null;
    else if (e.type === 'Resolved') {
      if ((e.data as { outcome?: unknown } | null)?.outcome !== 'absent') return null;
      absent++;
    }
  }
  if (sent < 2 || absent < sent - 1) return null;
  return { sent, absent, summary: `sent ${sent} times, every inquiry absent` };
}

/** The dead letters that are black holes (`unansweredSends`), as the overview shows them. */
export interface BlackHoleDeadLetters {
  readonly count: number;
  /** Their GUIDs, the first `show` in GUID order. */
  readonly guids: string[];
  /** More dead letters than were examined: `count` is of the first `examine` only. */
  readonly more: boolean;
}

/**
 * Which dead letters (`deadLetterRows`) were sent every time into silence: those whose last send reached the account
 * system and was found absent (`failedByInquiry`), their events read to confirm the pattern. At most `examine` dead
 * letters are looked at per call (a read of each one's events); `more` says when there were others.
 */
export async function readBlackHoleDeadLetters(
  store: LedgerReadModel & EventLog,
  opts: { readonly maxAttempts: number; readonly examine?: number; readonly show?: number },
): StoreResult<BlackHoleDeadLetters> {
  const examine = opts.examine ?? 200;
  const show = opts.show ?? 20;
  const guids: string[] = [];
  let count = 0;
  let seen = 0;
  try {
    for await (const row of pagedRows(store, deadLetterRows(opts.maxAttempts), { limit: examine + 1 })) {
      if (++seen > examine) break;
      if (!row.failedByInquiry) continue;
      const events = await store.readStream(row.guid);
      if (E.isLeft(events)) return events;
      if (unansweredSends(events.right) === null) continue;
      count++;
      if (guids.length < show) guids.push(row.guid);
    }
  } catch (err) {
    return E.left(toStoreError(err, 'read'));
  }
  return E.right({ count, guids, more: seen > examine });
}
