import { existsSync } from 'node:fs';
import * as E from 'fp-ts/lib/Either.js';
import { LedgerCorruptError, LedgerMissingError, LedgerUnavailableError } from '../events/errors.js';
import type { ContinuityMark, EventStore } from '../events/store.js';
import { err, type Exit } from './output.js';

/** A `--db` naming no ledger, said so that the way out is plain: a typo, or a ledger `serve` has not made yet. */
export const noLedgerMessage = (command: string, shown: string): string =>
  `guidgate ${command}: no ledger at ${shown} (only guidgate serve creates a ledger: check --db, or start serve on it first)`;

/**
 * Opens an existing ledger, runs `work`, closes it. Only `serve` creates a ledger (CONTRACT.md §5): here a
 * `--db` naming no file exits 1 and creates nothing, so a typo cannot look like an empty ledger. A ledger that
 * cannot be opened, read or written exits 1 too: `work` ends on a store's Left by `orThrow`, and the StoreError
 * is reported here, the one place a command's ledger failure becomes a message and exit 1.
 */
export async function withLedger(
  command: string,
  db: string,
  work: (store: EventStore) => Promise<Exit>,
  /**
   * `claimDeadlineMs`: for a command that sends (reprocess), its send window (src/store/shared/writeDeadline.ts).
   * `writes`: the command writes the ledger (not a dry run): the continuity mark is checked before `work` (a ledger
   * that went back is refused) and brought up to date after it; `continuityDir` is where it is (`--continuity-dir`).
   */
  options: { readonly claimDeadlineMs?: number | undefined; readonly writes?: boolean | undefined; readonly continuityDir?: string | undefined } = {},
): Promise<Exit> {
  // A database URL names no file: its store says whether the ledger is there.
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(db) && !existsSync(db)) {
    err(noLedgerMessage(command, db));
    return 1;
  }
  // Loaded when used, so that a command that never opens the ledger (--help, naive) does not load a store.
  const { openStore, processActor, shownDb } = await import('../store/openStore.js');
  const shown = shownDb(db);
  let store: EventStore;
  try {
    store = await openStore(db, {
      create: false, actor: processActor(command), continuityDir: options.continuityDir,
      ...(options.claimDeadlineMs === undefined ? {} : { claimDeadlineMs: options.claimDeadlineMs }),
    });
  } catch (e) {
    if (e instanceof LedgerMissingError) err(noLedgerMessage(command, shown));
    else err(`guidgate ${command}: cannot open the ledger at ${shown}: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
  let mark: MarkBefore = { kind: 'none' };
  try {
    if (options.writes === true) {
      mark = await continuityBefore(command, shown, store);
      if (mark.kind === 'refused') return 1;
    }
    return await work(store);
  } catch (e) {
    if (e instanceof LedgerUnavailableError) err(`guidgate ${command}: ledger unavailable (${shown}): ${e.message}`);
    else if (e instanceof LedgerCorruptError) err(`guidgate ${command}: ledger corrupt (${shown}): ${e.message}`);
    else throw e;
    return 1;
  } finally {
    if (mark.kind === 'checked') await continuityAfter(command, store, mark.mark);
    await store.close();
  }
}

type MarkBefore = { readonly kind: 'none' | 'refused' } | { readonly kind: 'checked'; readonly mark: ContinuityMark | null };

/**
 * Before a command writes (CONTRACT.md §9 "a restored directory is caught"): a ledger that went back is refused,
 * nothing written; a new `Purged` or `Resolved` would otherwise push the log back over the mark and hide the going
 * back from the next `serve`. A ledger whose standing is unknown (no mark) is written to, and the mark left absent, so
 * that the next `serve` opens the window. One that `guidgate restore` recorded is written to; the record stays.
 */
async function continuityBefore(command: string, shown: string, store: EventStore): Promise<MarkBefore> {
  const read = await store.readMark();
  if (E.isLeft(read)) {
    err(`guidgate ${command}: cannot read the continuity mark of ${shown}: ${read.left.message}; nothing written (check --continuity-dir and its permissions; a mark file that does not parse: delete it, and the next serve opens the continuity window)`);
    return { kind: 'refused' };
  }
  const judged = read.right?.judged;
  if (judged?.verdict === 'unknown') return { kind: 'none' };
  if (judged?.verdict === 'behind') {
    err(`guidgate ${command}: the ledger at ${shown} went back: ${judged.why}. Nothing written.`);
    err(`  If it was restored on purpose, run \`guidgate restore --db ${shown}\` (the next serve inquires before first sends), or start serve (it opens the continuity window itself); then run ${command} again. Otherwise put the current ledger back.`);
    return { kind: 'refused' };
  }
  return { kind: 'checked', mark: read.right };
}

/** After a command wrote: the mark moves up to where the log stands now (a failure is said, the command's exit kept). */
async function continuityAfter(command: string, store: EventStore, before: ContinuityMark | null): Promise<void> {
  const standing = await store.ledgerStanding();
  const now = await store.now();
  const written = E.isLeft(standing) ? standing : E.isLeft(now) ? now
    : await store.writeMark({ position: standing.right.position, at: now.right, window: before?.window, restored: before?.restored });
  if (E.isLeft(written)) err(`guidgate ${command}: the continuity mark was not brought up to date (${written.left.message}); the next serve judges the ledger by the older one`);
}
