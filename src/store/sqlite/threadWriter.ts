import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { LedgerUnavailableError } from '../../events/errors.js';
import type { LedgerProjection } from '../../events/store.js';
import { gaveUpSlots, markGaveUp } from './gaveUpSlots.js';
import type { Synchronous } from './openDatabase.js';
import type { WriteOp } from './writeEngine.js';
import type { FromWriter, ToWriter } from './writerWorker.js';
import { settle, type Pending, type Writer } from './writer.js';
import { batcher } from '../shared/batcher.js';
import { compiledModule, siblingScript } from './workerScript.js';

/** Writes on a worker thread with its own connection; results come back after the batch committed. */
export function threadWriter(options: { path: string; synchronous: Synchronous; busyTimeoutMs: number; maxBatch: number; projection: LedgerProjection }): Writer {
  const projectionModule = pathToFileURL(compiledModule(options.projection.module, 'projection module')).href;
  const gaveUp = gaveUpSlots();
  const slots = new Int32Array(gaveUp);
  const worker = new Worker(writerScript(), {
    // The writer needs no flag of its parent's (and --input-type, for one, would stop it from starting).
    execArgv: process.execArgv.filter((a) => !a.startsWith('--input-type') && a !== '-e' && a !== '--eval'),
    workerData: { connection: { path: options.path, synchronous: options.synchronous, busyTimeoutMs: options.busyTimeoutMs }, maxBatch: options.maxBatch, projectionModule, gaveUp },
  });
  const pending = new Map<number, Pending>();
  let markStarted = (): void => {};
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  let nextId = 1;
  // One message per turn of the event loop, not per unit: each message costs a wake-up and a clone on both
  // sides (measured: the ledger's CPU per request fell from 122 to 102 µs with one message per turn).
  const outbox = batcher<{ id: number; op: WriteOp }>({
    maxBatch: Number.POSITIVE_INFINITY,
    maxInFlight: Number.POSITIVE_INFINITY,
    async run(units) {
      try {
        worker.postMessage({ units } satisfies ToWriter);
      } catch (err) {
        // A unit that cannot be copied to the writer (not plain data): none of this message was written.
        const why = `ledger write not submitted: ${err instanceof Error ? err.message : String(err)}`;
        for (const u of units) {
          pending.get(u.id)?.reject(new LedgerUnavailableError(why));
          pending.delete(u.id);
        }
      }
    },
  });
  let broken: string | null = null;
  let closed: (() => void) | null = null;
  let closing: Promise<void> | null = null;

  const failAll = (why: string) => {
    broken ??= why;
    for (const p of pending.values()) p.reject(new LedgerUnavailableError(why));
    pending.clear();
  };
  worker.on('message', (msg: FromWriter) => {
    markStarted();
    if ('results' in msg) {
      for (const [id, outcome] of msg.results) {
        const p = pending.get(id);
        pending.delete(id);
        if (p) settle(p, outcome);
      }
    } else if ('openError' in msg) {
      failAll(`ledger writer could not open the file: ${msg.openError}`);
    } else if ('closed' in msg) {
      closed?.();
    }
  });
  worker.on('error', (err) => failAll(`ledger writer thread failed: ${err.message}`));
  worker.on('exit', () => {
    markStarted();
    failAll('ledger writer thread exited');
    closed?.();
  });

  return {
    started,
    submit(op, caller) {
      if (broken !== null) return Promise.reject(new LedgerUnavailableError(broken));
      return new Promise((resolve, reject) => {
        const id = nextId++;
        // The writer looks at the slot right before it writes the unit, its lock held (writerWorker.ts).
        caller.onGiveUp = () => markGaveUp(slots, id);
        pending.set(id, { resolve, reject });
        outbox.push({ id, op });
      });
    },
    problem: () => broken,
    // At FULL (and EXTRA) the thread's connection syncs in every COMMIT: what it committed is on disk. At NORMAL
    // nothing is synced per commit, and a power cut may take claims too: the mark then rightly sees the loss.
    durablePosition: () => null,
    close() {
      if (closing !== null) return closing;
      if (broken !== null) return worker.terminate().then(() => undefined);
      closing = new Promise<void>((resolve) => {
        closed = resolve;
        // Units submitted before close go first.
        void outbox.drain().then(() => worker.postMessage({ close: true } satisfies ToWriter));
      }).then(() => {
        broken = 'ledger is closed';
      });
      return closing;
    },
  };
}

/** The compiled worker script. */
const writerScript = (): string => siblingScript(import.meta.url, './writerWorker.js', 'writer thread script');
