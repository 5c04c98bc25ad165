import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { LedgerUnavailableError } from '../errors.js';
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

/** Opens (creating it if new) the ledger file in WAL mode with the chosen durability, migrated. */
export function openDatabase({ path, synchronous, busyTimeoutMs }: ConnectionOptions): Database.Database {
  try {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    const db = new Database(path, { timeout: busyTimeoutMs });
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous}`);
    migrate(db);
    return db;
  } catch (err) {
    throw unavailable(err, `open of ${path}`);
  }
}
