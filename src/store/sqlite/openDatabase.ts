import Database from 'better-sqlite3';
import { LedgerUnavailableError } from '../../events/errors.js';
import { toStoreError } from '../../events/storeResult.js';
import { prepareLedgerFile } from './ledgerFile.js';
import { migrate } from './schema.js';

export type Synchronous = 'FULL' | 'NORMAL' | 'EXTRA';

export interface ConnectionOptions {
  readonly path: string;
  readonly synchronous: Synchronous;
  readonly busyTimeoutMs: number;
}

/**
 * SQLite's page cache per connection, in KiB (better-sqlite3 builds SQLite with 16 MB). Smaller is cheaper here: when an
 * insert splits a B-tree page and reorders the new siblings (balance_nonroot; random GUIDs do it in nearly every
 * batch), SQLite parks a page for a moment at the number just past the 1 GiB lock byte, and at the end of that write
 * transaction, in a ledger file under 1 GiB, it walks the whole hash table of its page cache to drop pages past the
 * file's end (pcache1TruncateUnsafe), a walk as long as the cache is big. Measured on the store's own SQL with random
 * GUIDs: 12% less CPU per transfer at 4 MB than at 16 MB on ledgers of 45,000 and 300,000 transfers, the same on one
 * of 2 million (over 1 GiB: no walk, and no more cache misses either, since what a transfer touches at random, the
 * index leaves, is far bigger than either cache; docs/performance.md).
 */
const PAGE_CACHE_KIB = 4000;

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
    db.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
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
    throw toStoreError(err, `open of ${path}`);
  }
}

/** The database file a connection has open, as SQLite names it (symbolic links resolved). */
export function openedFile(db: Database.Database): string {
  const main = (db.pragma('database_list') as Array<{ name: string; file: string }>).find((d) => d.name === 'main');
  if (main === undefined || main.file === '') throw new LedgerUnavailableError('the ledger connection has no file');
  return main.file;
}
