import Database from 'better-sqlite3';
import { LedgerUnavailableError } from '../../events/errors.js';
import { prepareLedgerFile } from './ledgerFile.js';
import { migrate } from './schema.js';

export type Synchronous = 'FULL' | 'NORMAL' | 'EXTRA';

export interface ConnectionOptions {
  readonly path: string;
  readonly synchronous: Synchronous;
  readonly busyTimeoutMs: number;
}

export function unavailable(err: unknown, what: string): LedgerUnavailableError {
  if (err instanceof LedgerUnavailableError) return err;
  const detail = err instanceof Error ? err.message : String(err);
  return new LedgerUnavailableError(`ledger ${what} failed: ${detail}`, { cause: err });
}

/**
 * Opens (creating it if new) the ledger file in WAL mode with the chosen durability, migrated. With
 * `setUp: false` it only connects to a file another connection has already set up: that takes no lock, so
 * a writer thread starting while another process holds the write lock still starts.
 */
export function openDatabase({ path, synchronous, busyTimeoutMs }: ConnectionOptions, setUp = true): Database.Database {
  try {
    // Created private if new, recognised as a ledger if not, before SQLite writes anything to it.
    if (path !== ':memory:' && setUp) prepareLedgerFile(path);
    const db = new Database(path, { timeout: busyTimeoutMs, fileMustExist: !setUp });
    if (!setUp) {
      db.pragma(`synchronous = ${synchronous}`);
      return db;
    }
    // Purge gives space back with incremental vacuum. The mode only takes on a new, empty file, and only
    // before anything (even the switch to WAL) writes its header; on an existing file this is a no-op.
    db.pragma('auto_vacuum = INCREMENTAL');
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous}`);
    migrate(db);
    return db;
  } catch (err) {
    throw unavailable(err, `open of ${path}`);
  }
}
