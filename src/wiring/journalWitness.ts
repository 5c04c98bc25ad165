import * as E from 'fp-ts/lib/Either.js';
import type { EventStore } from '../events/store.js';
import { openJournalUrl } from '../reconcile/journalInput.js';
import { ndjsonEntries } from '../reconcile/ndjsonJournal.js';
import { checkedUtf8 } from '../reconcile/utf8Lines.js';

/**
 * `--journal-witness` (CONTRACT.md §9, "the account system as witness"): what the account system's journal (§8) may
 * say about the ledger at start. `exclusive`: every posting of that core comes through guidgate, so a posting of a
 * GUID the ledger does not know is proof that the ledger went back. `shared`: other systems post too; the whole
 * journal proves nothing (the journal answers per GUID: the inquiry before each first send in a window).
 */
export type JournalWitness = 'off' | 'exclusive' | 'shared';

export const JOURNAL_WITNESSES: readonly JournalWitness[] = ['off', 'exclusive', 'shared'];

export interface WitnessLog {
  info(line: Record<string, unknown>, message: string): void;
  warn(line: Record<string, unknown>, message: string): void;
}

export interface WitnessDeps {
  readonly store: EventStore;
  readonly accountUrl: string;
  /** Read back from the ledger's newest event less this (`--timeout` + `--grace`: a claim's posting lands within it). */
  readonly marginMs: number;
  readonly log: WitnessLog;
  /** The guard's door for another witness: opens the window, counts, logs, records in the mark. */
  readonly wentBack: (why: string, seen: Record<string, unknown>) => Promise<E.Either<Error, void>>;
  readonly failed: () => void;
  readonly clock?: () => number;
  readonly timeoutMs?: number;
}

/** GUIDs asked of the ledger at once. */
const BATCH = 200;
/** GUIDs named in the log and the window's record (all of them are counted). */
const SHOWN = 10;

/**
 * Says which witness serve uses; for `exclusive`, reads the journal from the ledger's newest event less the margin
 * (the ledger empty: now less the margin) to now and judges the ledger gone back when a posting names a GUID it does
 * not know. A journal that cannot be read is a warning and a count, never a refusal to start.
 */
export async function judgeByJournal(mode: JournalWitness, deps: WitnessDeps): Promise<string> {
  const { log } = deps;
  if (mode === 'off') return 'journal witness: off (--journal-witness): the continuity guard judges the ledger alone';
  if (mode === 'shared') {
    return 'journal witness: shared (--journal-witness): other systems post to this core, the whole journal proves nothing; the journal answers per GUID: the inquiry before each first send in a window';
  }
  const said = `journal witness: exclusive (--journal-witness): every posting of this core comes through guidgate; the journal was read at start from the ledger's newest event less ${deps.marginMs} ms`;
  const now = (deps.clock ?? Date.now)();
  try {
    const newest = await deps.store.queryLedger({ order: 'updated', limit: 1 });
    if (E.isLeft(newest)) throw newest.left;
    const newestAt = newest.right[0]?.updatedAt ?? null;
    const from = Math.max(0, Math.min(newestAt ?? now, now) - deps.marginMs);
    const to = now + 1;
    const input = await openJournalUrl(deps.accountUrl, { from, to }, { timeoutMs: deps.timeoutMs ?? 30_000, deadlineMs: 60_000 });
    const guids = new Set<string>();
    let postings = 0;
    try {
      for await (const batch of ndjsonEntries(checkedUtf8(input.bytes))) {
        for (const e of batch) {
          postings++;
          guids.add(e.guid);
        }
      }
    } finally {
      await input.close();
    }
    const unknown: string[] = [];
    const all = [...guids];
    for (let i = 0; i < all.length; i += BATCH) {
      const part = all.slice(i, i + BATCH);
      const rows = await Promise.all(part.map((g) => deps.store.getLedger(g)));
      rows.forEach((r, j) => {
        if (E.isLeft(r)) throw r.left;
        if (r.right === null) unknown.push(part[j]!);
      });
    }
    const seen = { journal: input.source, from, to, newestEvent: newestAt, postings, guids: guids.size };
    if (unknown.length === 0) {
      log.info({ journalWitness: 'exclusive', ...seen }, `journal witness: every GUID of the ${postings} postings since the ledger's newest event less ${deps.marginMs} ms is in the ledger`);
      return `${said}: every GUID of its ${postings} postings is in the ledger`;
    }
    const why = `the account system's journal shows ${unknown.length} posting GUID(s) the ledger does not know since its newest event (--journal-witness exclusive: every posting comes through guidgate): the ledger was restored or replaced by an older copy`;
    const opened = await deps.wentBack(why, { journalWitness: 'exclusive', ...seen, unknownGuids: unknown.length, firstUnknown: unknown.slice(0, SHOWN) });
    if (E.isLeft(opened)) throw opened.left;
    return `${said}: ${unknown.length} posting GUID(s) the ledger does not know: the ledger went back, the continuity window is open`;
  } catch (err) {
    deps.failed();
    log.warn({ journalWitness: 'exclusive', error: (err as Error).message }, 'journal witness: exclusive (--journal-witness), but the journal could not be read or judged at start: the ledger is judged by the continuity guard alone this time (counted in guidgate_journal_witness_failures_total)');
    return `${said}, but it could not be read or judged (${(err as Error).message}): the continuity guard judged the ledger alone`;
  }
}
