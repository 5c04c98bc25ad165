import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { siblingScript } from './workerScript.js';

/**
 * WAL pages after which the writing connection checkpoints by itself, inside a COMMIT: the background checkpoints
 * cannot start the WAL over (that needs the write lock), so this is when it starts over, and the bound on its size
 * (about 32 MB). By then the background checkpoints have copied nearly all of it. SQLite's default is 1,000.
 */
export const BACKSTOP_PAGES = 8000;
/** SQLite's own: what the writing connection goes back to if the background thread stops. */
const SQLITE_AUTOCHECKPOINT_PAGES = 1000;
/** How often the background connection copies what the WAL holds into the ledger file. */
export const CHECKPOINT_INTERVAL_MS = 250;

export interface Checkpointer {
  /** Stops the background checkpoints and closes their connection (before the writing connection closes). */
  close(): Promise<void>;
}

/**
 * Checkpoints on a thread of their own, so that the request thread's COMMITs mostly only append to the WAL. A
 * checkpoint copies the WAL's pages into the ledger file and syncs it: run by the committing connection (SQLite's
 * default, every 1,000 pages), it stopped the event loop for the copy and two syncs, about a tenth of the relay's
 * busy time under load (docs/performance.md). Here a second connection runs `wal_checkpoint(PASSIVE)` every
 * CHECKPOINT_INTERVAL_MS (checkpointWorker.ts): it takes no write lock, so it never makes a write wait, and copies
 * each page once however often it was written since. The writing connection checkpoints itself every
 * BACKSTOP_PAGES, which then has little left to copy, and starts the WAL over. The guarantees are SQLite's either
 * way: at synchronous NORMAL or FULL a checkpoint syncs the WAL before copying and the file after, and the WAL
 * starts over only once everything in it is in the synced file (walSync.ts relies on that).
 *
 * `onStopped`: told once if the thread fails (it could not open the ledger, or died); the writing connection then
 * checkpoints every 1,000 pages again, as SQLite does by default.
 */
export function startCheckpointer(db: Database.Database, file: string, onStopped: (reason: string) => void = () => {}): Checkpointer {
  db.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
  const worker = new Worker(siblingScript(import.meta.url, './checkpointWorker.js', 'checkpoint thread script'), {
    workerData: { path: file, intervalMs: CHECKPOINT_INTERVAL_MS },
  });
  let closing = false;
  worker.once('error', (err) => {
    if (closing || !db.open) return;
    db.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT_PAGES}`);
    onStopped(err.message);
  });
  worker.unref();
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  return {
    async close() {
      closing = true;
      // Held open until it has closed its connection (unref'd, it would let the process end first).
      worker.ref();
      worker.postMessage('close');
      await exited;
    },
  };
}
