import type Database from 'better-sqlite3';
import { LedgerUnavailableError } from '../../events/errors.js';
import type { LedgerProjection } from '../../events/store.js';
import type { Caller } from '../shared/writeDeadline.js';
import type { WalSync } from './walSync.js';
import { logPosition } from './continuityMark.js';
import { createWriteEngine, type OpOutcome, type WriteOp } from './writeEngine.js';
import { batcher } from '../shared/batcher.js';
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
 * transaction (group commit, through the stores' one batcher). With `wal` (synchronous=FULL, see walSync.ts) a committed batch's units are
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

  const failAll = (units: readonly Queued[], why: string): void => {
    for (const u of units) u.pending.reject(new LedgerUnavailableError(why));
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

  /**
   * Commits the batch, waiting by a timer while another connection holds the write lock: each unit as long as
   * SQLite's busy timeout would have let it, counted from its own arrival. Returns the units it wrote and their
   * outcomes; the ones it failed or dropped meanwhile are settled here.
   */
  async function commit(units: Queued[]): Promise<{ batch: Queued[]; outcomes: OpOutcome[] } | null> {
    let batch = units;
    for (;;) {
      // Units whose callers have stopped waiting are not written: a claim nobody will call for would only be an orphan.
      batch = batch.filter((u) => !u.caller.gaveUp);
      if (batch.length === 0) return null;
      // Right before each try: is the file at the path still the one this connection writes to?
      const lost = o.fileLost();
      if (lost !== null) {
        failAll(batch, lost);
        return null;
      }
      const now = performance.now();
      const outcomes = engine.tryRun(batch.map((b) => b.op));
      if (outcomes !== 'locked') {
        lockPauseMs = 0;
        return { batch, outcomes };
      }
      failAll(batch.filter((u) => now - u.at >= o.busyTimeoutMs), `ledger write failed: database is locked (by another process, for more than the busy timeout of ${o.busyTimeoutMs} ms)`);
      batch = batch.filter((u) => now - u.at < o.busyTimeoutMs);
      lockPauseMs = Math.min(LOCK_RETRY_MAX_MS, Math.max(1, lockPauseMs * 2));
      await new Promise((resolve) => setTimeout(resolve, lockPauseMs));
    }
  }

  /** One batch: committed, and, with `wal`, settled once its WAL is on disk (an outcome at its commit: `needsSync`). */
  async function write(units: Queued[]): Promise<void> {
    if (broken !== null) return failAll(units, broken);
    const committed = await commit(units);
    if (committed === null) return;
    const { batch, outcomes } = committed;
    if (o.wal === null || !outcomes.some((x) => x.ok)) {
      batch.forEach((b, i) => settle(b.pending, outcomes[i]!));
      return;
    }
    const held = batch.flatMap((b, i) => (needsSync(b.op) ? [i] : []));
    batch.forEach((b, i) => {
      if (!needsSync(b.op)) settle(b.pending, outcomes[i]!);
    });
    unsynced = true;
    if (held.length === 0) return;
    // Nothing is written until this sync ends (the batcher sends one batch at a time): everything up to here is on
    // disk once it has (not before).
    const position = logPosition(db);
    try {
      await o.wal.sync();
    } catch (err) {
      broken = breakOnFailedSync(err);
      return failAll(held.map((i) => batch[i]!), broken);
    }
    syncedPosition = position;
    unsynced = false;
    // The file may have been replaced while the WAL was synced: then these commits went to a file nobody reads.
    const lostMeanwhile = o.fileLost();
    if (lostMeanwhile !== null) failAll(held.map((i) => batch[i]!), lostMeanwhile);
    else for (const i of held) settle(batch[i]!.pending, outcomes[i]!);
  }

  // Whatever `write` did not settle when it threw (a read of the log's position failing) fails: nobody waits in vain.
  const queue = batcher<Queued>({ maxBatch: o.maxBatch, maxInFlight: 1, run: (units) => write(units).catch((err: unknown) => failAll(units, `ledger write failed: ${err instanceof Error ? err.message : String(err)}`)) });
  let closing: Promise<void> | null = null;

  return {
    started: Promise.resolve(),
    submit: (op, caller) =>
      new Promise((resolve, reject) => {
        if (broken !== null) reject(new LedgerUnavailableError(broken));
        else queue.push({ op, pending: { resolve, reject }, at: performance.now(), caller });
      }),
    problem: () => broken,
    durablePosition: () => (unsynced ? syncedPosition : null),
    close() {
      // Everything queued is written (and synced) first, outcomes answered at their commit included.
      closing ??= queue.drain().then(async () => {
        if (unsynced && broken === null && o.wal !== null) await o.wal.sync().catch(() => undefined);
        o.wal?.close();
      });
      return closing;
    },
  };
}
