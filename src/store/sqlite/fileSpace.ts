import { statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { orThrow } from '../../events/storeResult.js';
import { LOCK_RETRY_MAX_MS } from './inlineWriter.js';
import type { OnConnection } from './readMethods.js';

/** The ledger's bytes on disk: the database file and its WAL. */
export function fileBytes(path: string): number {
  if (path === ':memory:') return 0;
  let total = 0;
  for (const p of [path, `${path}-wal`]) {
    try {
      total += statSync(p).size;
    } catch {
      /* no WAL yet */
    }
  }
  return total;
}

/** Free pages given back per step of `reclaimSpace` (8 MB at 4 KB), and the pause after each, for other writers. */
const VACUUM_STEP_PAGES = 2000;
const VACUUM_PAUSE_MS = 2 * LOCK_RETRY_MAX_MS;

/**
 * Gives the pages purges freed back to the file system, on the store's own connection: not a writer's unit, since
 * a WAL checkpoint cannot run inside the writer's transaction. Returns the ledger's bytes on disk before and after.
 */
export async function reclaimSpace(db: Database.Database, path: string, onConnection: OnConnection): Promise<{ bytesBefore: number; bytesAfter: number }> {
  const bytesBefore = await orThrow(onConnection('vacuum', () => fileBytes(path)));
  // In steps, each its own short transaction, with a pause between them longer than a waiting writer's retry
  // (LOCK_RETRY_MAX_MS): a ledger with many free pages (the first purge after migration 7) would otherwise
  // hold the write lock for as long as moving them all takes, and a serve on the file would answer E503.
  for (let before = Infinity; ; ) {
    const left = await orThrow(onConnection('vacuum', () => {
      db.pragma(`incremental_vacuum(${VACUUM_STEP_PAGES})`);
      return db.pragma('freelist_count', { simple: true }) as number;
    }));
    // Done, or nothing moves (a file made before auto_vacuum was set keeps its free pages for new rows).
    if (left === 0 || left >= before) break;
    before = left;
    await new Promise((r) => setTimeout(r, VACUUM_PAUSE_MS));
  }
  // Fold the WAL back into the file and truncate it, so the freed pages leave the disk too.
  return orThrow(onConnection('vacuum', () => {
    db.pragma('wal_checkpoint(TRUNCATE)');
    return { bytesBefore, bytesAfter: fileBytes(path) };
  }));
}
