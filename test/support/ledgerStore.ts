import { join } from 'node:path';
import type { EventStore } from '../../src/events/store.js';
import { openStore } from '../../src/store/openStore.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';
import { openSqliteStore, type SqliteEventStore, type SqliteStoreOptions } from '../../src/store/sqlite/sqliteStore.js';

/** How a test opens a SQLite ledger: everything but the file and the projection, which is always the ledger's. */
export type LedgerOptions = Omit<SqliteStoreOptions, 'projection' | 'path'>;

/** The SQLite ledger at `path` with the ledger projection, as `openStore` gives `serve` but with the raw connection. */
export function openLedger(path: string, options: LedgerOptions = {}): SqliteEventStore {
  return openSqliteStore({ ...options, projection: ledgerProjection, path });
}

/** A ledger file in `dir` made through the store's own commands, closed before a command opens it; its path. */
export async function seededLedger(dir: string, seed: (store: EventStore) => Promise<unknown> = async () => {}): Promise<string> {
  const db = join(dir, 'ledger.db');
  const store = await openStore(db, { create: true });
  try {
    await seed(store);
  } finally {
    await store.close();
  }
  return db;
}
