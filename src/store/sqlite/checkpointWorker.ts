/**
 * The background checkpoints of checkpointer.ts: a connection of its own to the ledger, `wal_checkpoint(PASSIVE)`
 * on a timer, closed when asked. PASSIVE takes no lock a writer or reader waits for. A checkpoint that fails (an
 * I/O error, a full disk) is tried again at the next tick; the writing connection's own checkpoint bounds the WAL
 * meanwhile. A connection that cannot be opened ends the thread (its error tells the opener).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openDatabase } from './openDatabase.js';

const { path, intervalMs } = workerData as { path: string; intervalMs: number };
const port = parentPort!;

// The opening thread created and migrated the file; this connection only joins it (never creates one). NORMAL: a
// checkpoint syncs the WAL before it copies and the file after.
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
