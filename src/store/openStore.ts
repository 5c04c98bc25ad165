import { LedgerUnavailableError } from '../events/errors.js';
import type { EventStore } from '../events/store.js';
import { checkLedger as checkSqliteLedger, type LedgerCheck } from './sqlite/checkLedger.js';
import { looseModeWarning } from './sqlite/ledgerFile.js';
import { openSqliteStore, type SqliteStoreOptions } from './sqlite/sqliteStore.js';

export type { LedgerCheck };

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

/**
 * `guidgate check` and `serve --check`: the full integrity check of the ledger named by `--db`. A PostgreSQL
 * ledger is the database server's to check (amcheck, its own tools): reported as not applicable, ok.
 */
export function checkLedger(db: string): LedgerCheck {
  if (POSTGRES_URL.test(db)) return { path: db, ok: true, problems: [], quickCheckMs: null };
  return checkSqliteLedger(db);
}

/** What an operator should hear about the ledger before serving from it (a file others can read), or null. */
export function ledgerWarning(db: string): string | null {
  return POSTGRES_URL.test(db) ? null : looseModeWarning(db);
}
