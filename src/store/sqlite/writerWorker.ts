/**
 * The ledger writer on its own thread. better-sqlite3 is synchronous, so a COMMIT at synchronous=FULL
 * (an fsync) would stop the relay's event loop; here it stops only this thread, and the requests that
 * arrive meanwhile queue up and share the next transaction (group commit). Functions cannot be posted to a
 * thread: the inline projection comes as the module its opener named (`LedgerProjection.module`), imported here.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { LedgerProjection } from '../../events/store.js';
import type { ConnectionOptions } from './openDatabase.js';
import { openDatabase } from './openDatabase.js';
import { callerGaveUp } from './gaveUpSlots.js';
import { createWriteEngine, type OpOutcome, type WriteOp } from './writeEngine.js';
import { batcher } from '../shared/batcher.js';

/** Units of work submitted in one turn of the request thread's event loop travel as one message. */
export type ToWriter = { readonly units: ReadonlyArray<{ readonly id: number; readonly op: WriteOp }> } | { readonly close: true };
export type FromWriter = { readonly ready: true } | { readonly openError: string } | { readonly results: ReadonlyArray<readonly [number, OpOutcome]> } | { readonly closed: true };

const port = parentPort!;
const { connection, maxBatch, projectionModule, gaveUp } = workerData as { connection: ConnectionOptions; maxBatch: number; projectionModule: string; gaveUp: SharedArrayBuffer };
/** Set by the request thread for a unit whose caller stopped waiting (`markGaveUp` in threadWriter.ts). */
const gaveUpSlots = new Int32Array(gaveUp);

let engine: ReturnType<typeof createWriteEngine>;
let db: ReturnType<typeof openDatabase>;
try {
  // Messages sent meanwhile wait in the port: it starts delivering once the listener below is attached.
  const { ledgerProjection } = (await import(projectionModule)) as { ledgerProjection: LedgerProjection };
  // The opening thread created and migrated the file; this connection only joins it.
  db = openDatabase(connection, false);
  engine = createWriteEngine(db, ledgerProjection, connection.busyTimeoutMs);
  port.postMessage({ ready: true } satisfies FromWriter);
} catch (err) {
  port.postMessage({ openError: err instanceof Error ? err.message : String(err) } satisfies FromWriter);
  process.exit(0);
}

const queue = batcher<{ id: number; op: WriteOp }>({
  maxBatch,
  maxInFlight: 1,
  // Every message already waiting arrives before the batcher's next turn: they all join this batch.
  async run(batch) {
    // A unit whose caller gave up while this thread waited (for the lock, behind a long batch) is not written.
    const outcomes = engine.run(batch.map((b) => b.op), (i) => callerGaveUp(gaveUpSlots, batch[i]!.id));
    port.postMessage({ results: batch.map((b, i) => [b.id, outcomes[i]!] as const) } satisfies FromWriter);
  },
});

port.on('message', (msg: ToWriter) => {
  if ('close' in msg) {
    void queue.drain().then(() => {
      db.close();
      port.postMessage({ closed: true } satisfies FromWriter);
      port.close();
    });
    return;
  }
  for (const unit of msg.units) queue.push(unit);
});
