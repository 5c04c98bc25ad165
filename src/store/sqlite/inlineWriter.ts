import type Database from 'better-sqlite3';
import { LedgerUnavailableError } from '../../events/errors.js';
import type { LedgerProjection } from '../../events/store.js';
import type { Caller } from '../shared/writeDeadline.js';
import type { WalSync } from './walSync.js';
import { logPosition } from './continuityMark.js';
import { createWriteEngine, type WriteOp } from './writeEngine.js';
import { settle, type Pending, type Writer } from './writer.js';

/** The longest pause between two tries for a write lock that another connection holds. */
export const LOCK_RETRY_MAX_MS = 16;

interface Queued {
  readonly op: WriteOp;
  readonly pending: Pending;
  /** When it was queued (performance.now()). */
  readonly at: number;
  readonly caller: Caller;
}

/** The outcomes of a call (`recordOutcome`): what the relay does with one (answer the channel) is safe before its sync. */
const OUTCOMES: ReadonlySet<string> = new Set(['RecordAnswer', 'RecordTimeout', 'RecordConnectFailure']);

/**
 * Whether a unit is settled only once its commit's WAL frames are on disk. Not an outcome of a call: if power is
 * lost before the next sync, the row comes back SENT, the sweep makes it UNKNOWN and an inquiry settles it with the
 * account system's own answer, the one the channel was given (docs/architecture.md, What a commit means); and
 * nothing is sent on the strength of it, since a send needs its own Sent synced, which syncs every earlier frame.
 * Everything else waits: a claim is called for once settled, and the rest (appends, maintenance, request records)
 * is kept to the rule that a settled write is on disk.
 */
const needsSync = (op: WriteOp): boolean => !(op.op === 'execute' && OUTCOMES.has(op.command.type));

/**
 * Writes on this thread: the units queued while the previous batch committed (and synced) share the next
 * transaction (group commit). With `wal` (synchronous=FULL, see walSync.ts) a committed batch's units are
 * settled only once fdatasync has put the WAL on disk, off the event loop (the outcomes of calls at once:
 * `needsSync`); the next batch waits for that sync, so one sync serves everyone who queued meanwhile; a batch of
 * outcomes only is not synced by itself, the next sync covers it. A write lock another connection holds is waited for by a
 * timer, never in SQLite's busy handler, which would stop this thread (the one that answers requests); a unit
 * that has waited the busy timeout fails as SQLite's own wait would, and one whose caller gave up (its deadline)
 * is dropped unwritten.
 */
export function inlineWriter(
  db: Database.Database,
  o: { maxBatch: number; projection: LedgerProjection; busyTimeoutMs: number; wal: WalSync | null; fileLost: () => string | null },
): Writer {
  const engine = createWriteEngine(db, o.projection, o.busyTimeoutMs);
  let queue: Queued[] = [];
  let scheduled = false;
  /** The batch whose WAL is being synced: nothing else is written until it is on disk. */
  let syncing: Promise<void> | null = null;
  /** Set once a sync failed: what was committed since the last good one may not be on disk, so nothing more is written. */
  let broken: string | null = null;
  /**
   * Commits not yet known to be on disk (an outcome batch answered at its commit, a batch whose sync is out or
   * failed), and the log's position when the last good sync started: what is on disk meanwhile (the continuity
   * mark must not get ahead of it). At open, what is in the file (walSync syncs the WAL as it opens it).
   */
  let unsynced = false;
  let syncedPosition = logPosition(db);
  let lockPauseMs = 0;
  let idle: (() => void) | null = null;
  let closing: Promise<void> | null = null;

  const schedule = (): void => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(flush);
  };
  const failAll = (units: readonly Queued[], why: string): void => {
    for (const u of units) u.pending.reject(new LedgerUnavailableError(why));
  };
  /** Takes out of the queue the units `drop` says go (failing them with `why`, if given); returns how many went. */
  const dropWhere = (drop: (u: Queued) => boolean, why?: string): number => {
    const gone = queue.filter(drop);
    if (gone.length === 0) return 0;
    queue = queue.filter((u) => !drop(u));
    if (why !== undefined) failAll(gone, why);
    return gone.length;
  };

  /**
   * A failed fdatasync leaves this batch committed (visible to every reader, other processes included) but maybe
   * not on disk, and Linux may have dropped the pages it could not write, so that a later sync, by anyone,
   * succeeds over a hole. A checkpoint copies the frames from memory into the database file and syncs that
   * instead; whether it works or not, this writer writes nothing more: only a restart is safe.
   */
  function breakOnFailedSync(err: unknown): string {
    const why = err instanceof Error ? err.message : String(err);
    let sealed: string;
    try {
      db.pragma('wal_checkpoint(TRUNCATE)');
      sealed = 'the WAL was checkpointed into the ledger file';
    } catch (ckptErr) {
      sealed = `checkpointing the WAL failed too (${ckptErr instanceof Error ? ckptErr.message : String(ckptErr)})`;
    }
    return `ledger sync failed: ${why}; ${sealed}; nothing more is written: restart serve`;
  }

  function flush(): void {
    scheduled = false;
    if (syncing !== null) return;
    // Units whose callers have stopped waiting are not written: a claim nobody will call for would only be an orphan.
    dropWhere((u) => u.caller.gaveUp);
    if (queue.length === 0) {
      idle?.();
      return;
    }
    const batch = queue.slice(0, o.maxBatch);
    // Once per batch, right before it is written: is the file at the path still the one this connection writes to?
    const lost = o.fileLost();
    if (lost !== null) {
      queue = queue.slice(batch.length);
      failAll(batch, lost);
      schedule();
      return;
    }
    const now = performance.now();
    const outcomes = engine.tryRun(batch.map((b) => b.op));
    if (outcomes === 'locked') {
      // Each unit waits for the lock as long as SQLite's busy timeout would have let it, counted from its own arrival.
      dropWhere((u) => now - u.at >= o.busyTimeoutMs, `ledger write failed: database is locked (by another process, for more than the busy timeout of ${o.busyTimeoutMs} ms)`);
      lockPauseMs = Math.min(LOCK_RETRY_MAX_MS, Math.max(1, lockPauseMs * 2));
      scheduled = true;
      setTimeout(flush, lockPauseMs);
      return;
    }
    queue = queue.slice(batch.length);
    lockPauseMs = 0;
    if (o.wal === null || !outcomes.some((x) => x.ok)) {
      batch.forEach((b, i) => settle(b.pending, outcomes[i]!));
      schedule();
      return;
    }
    // An outcome is answered at its commit; everything else once the WAL is on disk (`needsSync`).
    const held = batch.flatMap((b, i) => (needsSync(b.op) ? [i] : []));
    batch.forEach((b, i) => {
      if (!needsSync(b.op)) settle(b.pending, outcomes[i]!);
    });
    if (held.length === 0) {
      unsynced = true;
      schedule();
      return;
    }
    const waiting = held.map((i) => batch[i]!);
    // Nothing is written until this sync ends: everything up to here is on disk once it has (not before).
    const position = logPosition(db);
    unsynced = true;
    syncing = o.wal.sync().then(
      () => {
        syncedPosition = position;
        unsynced = false;
        // The file may have been replaced while the WAL was synced: then these commits went to a file nobody reads.
        const lostMeanwhile = o.fileLost();
        if (lostMeanwhile !== null) failAll(waiting, lostMeanwhile);
        else for (const i of held) settle(batch[i]!.pending, outcomes[i]!);
      },
      (err: unknown) => {
        broken = breakOnFailedSync(err);
        failAll(waiting, broken);
        failAll(queue, broken);
        queue = [];
      },
    ).finally(() => {
      syncing = null;
      schedule();
    });
  }

  return {
    started: Promise.resolve(),
    submit: (op, caller) =>
      new Promise((resolve, reject) => {
        if (broken !== null) {
          reject(new LedgerUnavailableError(broken));
          return;
        }
        queue.push({ op, pending: { resolve, reject }, at: performance.now(), caller });
        if (syncing === null) schedule();
      }),
    problem: () => broken,
    durablePosition: () => (unsynced ? syncedPosition : null),
    close() {
      // Everything queued is written (and synced) first, outcomes answered at their commit included.
      closing ??= new Promise<void>((resolve) => {
        idle = () => {
          idle = null;
          const last = unsynced && broken === null && o.wal !== null ? o.wal.sync().catch(() => undefined) : Promise.resolve();
          void last.then(() => {
            o.wal?.close();
            resolve();
          });
        };
        schedule();
      });
      return closing;
    },
  };
}
