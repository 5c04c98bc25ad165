/**
 * The background checkpoints of checkpointer.ts: a connection of its own to the ledger, `wal_checkpoint(PASSIVE)`
 * on a timer, and once the WAL holds `restartPages` a `wal_checkpoint(RESTART)`, which also starts the WAL over;
 * closed when asked. RESTART takes the write lock without waiting (busy timeout 0): the request thread's writer
 * holds it only while it runs a batch, and waits by a timer, not by blocking, while RESTART holds it. A checkpoint
 * that fails or finds the lock taken (the file gone, an I/O error, a batch running) is tried again at the next
 * tick; the writing connection's backstop bounds the WAL meanwhile.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openDatabase } from './openDatabase.js';

const { path, intervalMs, restartPages } = workerData as { path: string; intervalMs: number; restartPages: number };
const port = parentPort!;

// The opening thread created and migrated the file; this connection only joins it. NORMAL: a checkpoint syncs the
// WAL before it copies and the file after.
const db = openDatabase({ path, synchronous: 'NORMAL', busyTimeoutMs: 0 }, false);
const timer = setInterval(() => {
  try {
    const [passive] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ busy: number; log: number; checkpointed: number }>;
    if (passive !== undefined && passive.log >= restartPages) db.pragma('wal_checkpoint(RESTART)');
  } catch {
    // Tried again at the next tick.
  }
}, intervalMs);
port.on('message', () => {
  clearInterval(timer);
  db.close();
  port.close();
});
