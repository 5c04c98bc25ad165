import { LedgerUnavailableError } from '../events/errors.js';
import type { EventStore } from '../events/store.js';
import { openSqliteStore, type SqliteStoreOptions } from './sqlite/sqliteStore.js';

/** How a store is opened, whatever stands behind `--db`; a store ignores what does not apply to it. */
export type { Synchronous } from './sqlite/sqliteStore.js';

export type OpenStoreOptions = Omit<SqliteStoreOptions, 'path'>;

const POSTGRES_URL = /^postgres(ql)?:\/\//i;

/**
 * Opens the ledger named by `--db`: a PostgreSQL URL (`postgres://` or `postgresql://`, CONTRACT.md §4) or
 * else a SQLite file path. Async, so that a store whose opening needs the network can stand here.
 */
export async function openStore(db: string, options: OpenStoreOptions = {}): Promise<EventStore> {
  if (POSTGRES_URL.test(db)) {
    // The PostgreSQL store (issue #13) is opened here.
    throw new LedgerUnavailableError('a PostgreSQL ledger is not supported by this build');
  }
  return openSqliteStore({ path: db, ...options });
}
