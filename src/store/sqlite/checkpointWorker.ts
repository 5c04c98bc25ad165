/**
 * The background checkpoints of checkpointer.ts: a connection of its own to the ledger, `wal_checkpoint(PASSIVE)`
 * on a timer, closed when asked. A checkpoint that fails (the file gone, an I/O error) is tried again at the next
 * tick; the writing connection's backstop bounds the WAL meanwhile.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openDatabase } from './openDatabase.js';

const { path, intervalMs } = workerData as { path: string; intervalMs: number };
const port = parentPort!;

// The opening thread created and migrated the file; this connection only joins it. NORMAL: a checkpoint syncs the
// WAL before it copies and the file after.
const db = openDatabase({ path, synchronous: 'NORMAL', busyTimeoutMs: 0 }, false);
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // Tried again at the next tick.
  }
}, intervalMs);
port.on('message', () => {
  clearInterval(timer);
  db.close();
  port.close();
});
