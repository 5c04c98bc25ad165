import { LedgerCorruptError, LedgerUnavailableError } from '../events/errors.js';
import type { SqliteEventStore } from '../events/sqlite/sqliteStore.js';
import { err, type Exit } from './output.js';

/** Opens the ledger, runs `work`, closes it; a ledger that cannot be opened, read or written exits 1. */
export async function withLedger(command: string, db: string, work: (store: SqliteEventStore) => Promise<Exit>): Promise<Exit> {
  // Loaded when used, so that a command that never opens the ledger (--help, naive) does not load SQLite.
  const { openSqliteStore } = await import('../events/sqlite/sqliteStore.js');
  let store: SqliteEventStore;
  try {
    store = openSqliteStore({ path: db });
  } catch (e) {
    err(`guidgate ${command}: cannot open the ledger at ${db}: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
  try {
    return await work(store);
  } catch (e) {
    if (e instanceof LedgerUnavailableError) err(`guidgate ${command}: ledger unavailable (${db}): ${e.message}`);
    else if (e instanceof LedgerCorruptError) err(`guidgate ${command}: ledger corrupt (${db}): ${e.message}`);
    else throw e;
    return 1;
  } finally {
    await store.close();
  }
}
