import { existsSync } from 'node:fs';
import { LedgerCorruptError, LedgerMissingError, LedgerUnavailableError } from '../events/errors.js';
import type { EventStore } from '../events/store.js';
import { err, type Exit } from './output.js';

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
  /** `claimDeadlineMs`: for a command that sends (reprocess), its send window (src/store/shared/writeDeadline.ts). */
  options: { readonly claimDeadlineMs?: number | undefined } = {},
): Promise<Exit> {
  // A database URL names no file: its store says whether the ledger is there.
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(db) && !existsSync(db)) {
    err(`guidgate ${command}: no ledger at ${db}`);
    return 1;
  }
  // Loaded when used, so that a command that never opens the ledger (--help, naive) does not load a store.
  const { openStore, processActor, shownDb } = await import('../store/openStore.js');
  const shown = shownDb(db);
  let store: EventStore;
  try {
    store = await openStore(db, { create: false, actor: processActor(command), ...(options.claimDeadlineMs === undefined ? {} : { claimDeadlineMs: options.claimDeadlineMs }) });
  } catch (e) {
    if (e instanceof LedgerMissingError) err(`guidgate ${command}: no ledger at ${shown}`);
    else err(`guidgate ${command}: cannot open the ledger at ${shown}: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
  try {
    return await work(store);
  } catch (e) {
    if (e instanceof LedgerUnavailableError) err(`guidgate ${command}: ledger unavailable (${shown}): ${e.message}`);
    else if (e instanceof LedgerCorruptError) err(`guidgate ${command}: ledger corrupt (${shown}): ${e.message}`);
    else throw e;
    return 1;
  } finally {
    await store.close();
  }
}
