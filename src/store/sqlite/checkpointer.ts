import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { compiledModule } from './threadWriter.js';

/**
 * WAL pages after which the writing connection checkpoints by itself, inside a COMMIT, when the background
 * checkpoints have not kept the WAL below it (they are stopped, failing, or behind a long reader): a bound on the
 * WAL, not the usual path. SQLite's default is 1,000.
 */
export const BACKSTOP_PAGES = 8000;
/** How often the background connection copies what the WAL holds into the ledger file. */
export const CHECKPOINT_INTERVAL_MS = 250;
/** WAL pages from which the background connection also starts the WAL over (RESTART), as SQLite's own checkpoint does. */
export const RESTART_PAGES = 1000;

export interface Checkpointer {
  /** Stops the background checkpoints and closes their connection (before the writing connection closes). */
  close(): Promise<void>;
}

/**
 * Checkpoints on a thread of their own, so that the request thread's COMMITs only append to the WAL. A checkpoint
 * copies the WAL's pages into the ledger file and syncs it: run by the committing connection (SQLite's default,
 * every 1,000 pages), it stopped the event loop for the copy and two syncs, about a tenth of the relay's busy time
 * under load (docs/performance.md). Here a second connection runs `wal_checkpoint(PASSIVE)` every
 * CHECKPOINT_INTERVAL_MS, which never waits for the writer or a reader, and past RESTART_PAGES a RESTART, which
 * starts the WAL over (checkpointWorker.ts); the writing connection keeps its own checkpoint at BACKSTOP_PAGES. The guarantees are SQLite's
 * either way: at synchronous NORMAL or FULL a checkpoint syncs the WAL before copying and the file after, and the
 * WAL starts over only once everything in it is in the synced file (walSync.ts relies on that).
 */
export function startCheckpointer(db: Database.Database, file: string): Checkpointer {
  db.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
  const worker = new Worker(compiledModule(new URL('./checkpointWorker.js', import.meta.url.replace(/\.ts$/, '.js')).href, 'checkpoint thread script'), {
    workerData: { path: file, intervalMs: CHECKPOINT_INTERVAL_MS, restartPages: RESTART_PAGES },
  });
  // A thread that fails leaves the backstop: the writing connection checkpoints as it did before.
  worker.on('error', () => undefined);
  worker.unref();
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  return {
    async close() {
      // Held open until it has closed its connection (unref'd, it would let the process end first).
      worker.ref();
      worker.postMessage('close');
      await exited;
    },
  };
}
