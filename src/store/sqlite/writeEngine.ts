import Database from 'better-sqlite3';
import type { Actor, NewEvent, StoredEvent } from '../../events/codecs.js';
import { decide, type Command } from '../../events/decide.js';
import { LedgerCorruptError, LedgerUnavailableError } from '../../events/errors.js';
import { foldEvents } from '../../events/evolve.js';
import type { AppendResult, ExecuteResult, LedgerProjection, RequestRecord } from '../../events/store.js';
import type { InquiryScheduled } from '../../events/inquirySchedule.js';
import type { LedgerState } from '../../events/state.js';
import { inquiryScheduleTable } from './inquiryScheduleTable.js';
import { leasesTable } from './leasesTable.js';
import { requestsTable } from './requestsTable.js';
import { reconciliationsTable } from './reconciliationsTable.js';
import type { BreakRow, RunRow } from '../shared/reconciliationRows.js';
import { checkRequestRecord } from '../shared/rowEncoding.js';
import { ledgerTable } from './ledgerTable.js';
import { eventsTable, isUniqueViolation } from './eventsTable.js';
import { executeResultOf } from '../shared/executeResult.js';
import { CALLER_GAVE_UP } from '../shared/writeDeadline.js';

/** A unit of work for the writer; plain data, so it can cross to a worker thread. */
export type WriteOp =
  /** `seen`: the row as the caller saw it (null: none), decided on first instead of a read (see EventLog.execute). */
  | { readonly op: 'execute'; readonly guid: string; readonly command: Command; readonly now: number; readonly actor: Actor | null; readonly seen?: LedgerState | null }
  | { readonly op: 'append'; readonly guid: string; readonly expectedSeq: number; readonly events: readonly NewEvent[]; readonly actor: Actor | null }
  /** The channel's requests, buffered by the relay: inserted in the batch's transaction, beside the log. */
  | { readonly op: 'recordRequests'; readonly records: readonly RequestRecord[] }
  | { readonly op: 'rebuild' }
  | { readonly op: 'removeTombstones'; readonly before: number }
  /** Changes nothing, but writes: takes the write lock and commits one page, to learn whether a write would go through now. */
  | { readonly op: 'probe' }
  | { readonly op: 'recordUnclearInquiry'; readonly guid: string; readonly sentAt: number; readonly at: number; readonly minAgeMs: number }
  | { readonly op: 'leaseRows'; readonly holder: string; readonly rows: ReadonlyArray<{ readonly guid: string; readonly lastSeq: number }>; readonly now: number; readonly forMs: number }
  | { readonly op: 'releaseLeases'; readonly holder: string; readonly now: number }
  /** A reconciliation run, encoded (src/store/shared/reconciliationRows.ts), with its breaks; `at`: when it is recorded. */
  | { readonly op: 'recordReconciliation'; readonly run: RunRow; readonly breaks: readonly BreakRow[]; readonly at: number };

export type WriteResult<O extends WriteOp> = O extends { op: 'execute' }
  ? ExecuteResult
  : O extends { op: 'append' }
    ? AppendResult
    : O extends { op: 'rebuild' }
      ? { rows: number }
      : O extends { op: 'probe' }
        ? null
        : O extends { op: 'recordUnclearInquiry' }
          ? InquiryScheduled
          : O extends { op: 'leaseRows' }
            ? string[]
            : O extends { op: 'releaseLeases' }
              ? null
              : O extends { op: 'recordReconciliation' }
                ? { id: number; firstSeen: number[] }
                : number;

/** An error as plain data (it may cross a thread), turned back into its class by `reviveError`. */
export interface OpError {
  readonly kind: 'unavailable' | 'corrupt' | 'other';
  readonly message: string;
}
export type OpOutcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: OpError };

export function reviveError(e: OpError): Error {
  if (e.kind === 'unavailable') return new LedgerUnavailableError(e.message);
  if (e.kind === 'corrupt') return new LedgerCorruptError(e.message);
  return new Error(e.message);
}

function toOpError(err: unknown): OpError {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof LedgerCorruptError) return { kind: 'corrupt', message };
  if (err instanceof LedgerUnavailableError || err instanceof Database.SqliteError) return { kind: 'unavailable', message: `ledger write failed: ${message}` };
  return { kind: 'other', message };
}

/**
 * The write side of the ledger, synchronous: a batch of units of work runs in ONE transaction (one fsync:
 * group commit). A unit's own problem (a corrupt row, an impossible event) fails only that unit and leaves
 * nothing of it: appends do all their JS work before their first write (see appendInTx), the rare
 * maintenance units run inside a savepoint. SQLite's own errors (I/O, full, busy, read-only), and anything
 * failing once an append has begun writing, fail the whole batch: nothing of it is durable, so no request
 * in it may call the account system.
 */
export function createWriteEngine(db: Database.Database, projection: LedgerProjection, busyTimeoutMs: number) {
  const events = eventsTable(db);
  const ledger = ledgerTable(db, projection);
  const schedule = inquiryScheduleTable(db);
  const leases = leasesTable(db);
  const requests = requestsTable(db);
  const reconciliations = reconciliationsTable(db);
  const begin = db.prepare('BEGIN IMMEDIATE');
  // For tryRun: BEGIN without waiting for another connection's write lock, then the usual wait again for reads.
  // Not prepared once: SQLite applies a busy_timeout pragma when it compiles the statement, not when it runs. Run
  // by exec, which makes no Statement object: 1.7 against 7.3 µs a call through db.pragma, twice per batch.
  const waitFor = (ms: number) => db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(ms))}`);
  const commit = db.prepare('COMMIT');
  const rollback = db.prepare('ROLLBACK');
  const savepoint = db.prepare('SAVEPOINT op');
  const rollbackTo = db.prepare('ROLLBACK TO op');
  const release = db.prepare('RELEASE op');
  const deleteLedger = db.prepare('DELETE FROM ledger');

  /**
   * Set while an append is writing: an error then may have left part of it behind, so it fails the whole
   * batch (rolled back, nothing durable, no call made) instead of only this unit.
   */
  let writing = false;

  /**
   * The compare-and-set append, inside the write transaction. Everything that can throw in JS (decoding
   * the current row, evolve, encoding the events and the row) happens before the first write, so a unit's
   * own problem leaves nothing behind and needs no savepoint. (A savepoint per unit made SQLite copy every
   * page the unit touched into its sub-journal: about 40% of the writer's CPU; see docs/performance.md.)
   * A unique violation (another writer, maybe another process, appended this seq first) undoes this
   * append's own inserts and is "lost"; any other failure while writing fails the whole batch.
   */
  function appendInTx(guid: string, expectedSeq: number, newEvents: readonly NewEvent[], actor: Actor | null, seen?: LedgerState | null): AppendResult {
    // A row the caller has seen is not read again: if it is out of date, the (guid, seq) key refuses the insert below.
    const current = seen === undefined ? ledger.read(guid) : seen;
    if ((current?.lastSeq ?? -1) !== expectedSeq) return { won: false, state: current };
    const state = foldEvents(guid, newEvents, current);
    if (state === null || newEvents.length === 0) return { won: false, state: current };
    const encoded = events.encode(guid, expectedSeq + 1, newEvents, actor);
    const row = projection.stateToRow(state);
    const purged = newEvents.some((e) => e.type === 'Purged');

    writing = true;
    let stored: StoredEvent[];
    try {
      stored = events.insertEncoded(encoded);
    } catch (err) {
      // The log already holds this seq although the projection said otherwise: someone moved first.
      if (isUniqueViolation(err)) {
        writing = false;
        return { won: false, state: ledger.read(guid) };
      }
      throw err;
    }
    // A row the caller saw is replaced only if it is still at that seq: the (guid, seq) key cannot refuse an append
    // onto a stream that is no longer there (its tombstone removed since), but the row's own seq can.
    if (seen !== undefined && seen !== null && !ledger.replaceRowAt(row, seen.lastSeq)) {
      events.undo(stored);
      writing = false;
      return { won: false, state: ledger.read(guid) };
    }
    if (purged) events.redact(guid);
    if (seen === undefined || seen === null) ledger.writeRow(row);
    writing = false;
    return { won: true, state, events: stored };
  }

  function runOne(w: WriteOp): unknown {
    switch (w.op) {
      case 'append':
        return appendInTx(w.guid, w.expectedSeq, w.events, w.actor);
      case 'execute': {
        if (w.seen !== undefined) {
          // What the caller saw is usually the row as it is: decide on it, and let the append's key tell otherwise.
          // A refusal, or an append the key refuses, is decided again below on the row as read now.
          const decided = decide(w.seen, w.command, w.now);
          if (decided._tag === 'Right') {
            const result = appendInTx(w.guid, w.seen?.lastSeq ?? -1, decided.right, w.actor, w.seen);
            if (result.won) return executeResultOf(result);
          }
        }
        const state = ledger.read(w.guid);
        const decided = decide(state, w.command, w.now);
        if (decided._tag === 'Left') return { kind: 'refused', refusal: decided.left } satisfies ExecuteResult;
        // Lost although we hold the write lock: the projection is behind the log (its row promised a seq the
        // log's unique key already holds). Someone moved first; answer from the state as it is now.
        return executeResultOf(appendInTx(w.guid, state?.lastSeq ?? -1, decided.right, w.actor));
      }
      case 'rebuild': {
        const folded = events.foldAll();
        deleteLedger.run();
        for (const state of folded.values()) ledger.write(state);
        return { rows: folded.size };
      }
      case 'removeTombstones':
        return ledger.removeTombstones(w.before);
      case 'probe':
        // The header page rewritten with the value it holds: a frame in the WAL, so the probe needs space on disk
        // where a commit that writes nothing would not (a full disk fails only what it has to store).
        db.pragma(`user_version = ${db.pragma('user_version', { simple: true }) as number}`);
        return null;
      case 'recordRequests':
        w.records.forEach(checkRequestRecord);
        writing = true;
        requests.insert(w.records);
        writing = false;
        return null;
      case 'recordUnclearInquiry':
        return schedule.record(w.guid, w.sentAt, w.at, w.minAgeMs);
      case 'leaseRows':
        return leases.lease(w.holder, w.rows, w.now, w.forMs);
      case 'releaseLeases':
        leases.release(w.holder, w.now);
        return null;
      case 'recordReconciliation':
        return reconciliations.record(w.run, w.breaks, w.at);
    }
  }

  function run(batch: readonly WriteOp[], lockTaken = false, dropped?: (index: number) => boolean): OpOutcome[] {
    const outcomes: OpOutcome[] = [];
    try {
      if (!lockTaken) begin.run();
      for (const [i, w] of batch.entries()) {
        // Asked as late as possible, with the lock held: a unit whose caller has answered without it stays unwritten.
        if (dropped?.(i) === true) {
          outcomes.push({ ok: false, error: GAVE_UP });
          continue;
        }
        if (w.op === 'execute' || w.op === 'append' || w.op === 'recordRequests') {
          // The hot path: no savepoint (see appendInTx); a failure before the first write is this unit's alone.
          writing = false;
          try {
            outcomes.push({ ok: true, value: runOne(w) });
          } catch (err) {
            if (err instanceof Database.SqliteError || writing) throw err;
            outcomes.push({ ok: false, error: toOpError(err) });
          }
          continue;
        }
        // Rare maintenance units write many rows: a savepoint makes each all or nothing.
        savepoint.run();
        try {
          outcomes.push({ ok: true, value: runOne(w) });
          release.run();
        } catch (err) {
          if (err instanceof Database.SqliteError) throw err;
          rollbackTo.run();
          release.run();
          outcomes.push({ ok: false, error: toOpError(err) });
        }
      }
      commit.run();
      return outcomes;
    } catch (err) {
      return failBatch(batch, err);
    }
  }

  /** Every unit of the batch failed by `err`; whatever of it was written is rolled back. */
  function failBatch(batch: readonly WriteOp[], err: unknown): OpOutcome[] {
    try {
      if (db.inTransaction) rollback.run();
    } catch {
      /* the connection is already broken; the error below says so */
    }
    const failure = toOpError(err);
    const error: OpError = failure.kind === 'unavailable' ? failure : { kind: 'unavailable', message: `ledger write failed: ${failure.message}` };
    return batch.map(() => ({ ok: false, error }));
  }

  return {
    /**
     * Runs the batch in one transaction, waiting up to the busy timeout for another connection's write lock.
     * `dropped(i)`, asked right before unit i runs (the lock held): true leaves it unwritten (its caller gave up).
     */
    run: (batch: readonly WriteOp[], dropped?: (index: number) => boolean): OpOutcome[] => run(batch, false, dropped),
    /**
     * As `run`, but 'locked' at once, nothing done, while another connection holds the write lock: the caller
     * waits by a timer instead of in SQLite's busy handler, which would stop its thread (the request thread).
     */
    tryRun(batch: readonly WriteOp[]): OpOutcome[] | 'locked' {
      let refused: unknown = null;
      try {
        waitFor(0);
        try {
          begin.run();
        } finally {
          waitFor(busyTimeoutMs);
        }
      } catch (err) {
        refused = err;
      }
      if (refused === null) return run(batch, true);
      return isBusy(refused) ? 'locked' : failBatch(batch, refused);
    },
  };
}

/** The outcome of a unit left unwritten because nobody waits for it any more; nobody reads it either. */
const GAVE_UP: OpError = { kind: 'unavailable', message: CALLER_GAVE_UP };

const isBusy = (err: unknown): boolean => err instanceof Database.SqliteError && (err.code === 'SQLITE_BUSY' || err.code.startsWith('SQLITE_BUSY_'));
export type WriteEngine = ReturnType<typeof createWriteEngine>;
