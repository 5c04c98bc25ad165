import Database from 'better-sqlite3';
import { LedgerCorruptError, LedgerUnavailableError } from '../../events/errors.js';
import type { AppendResult, ExecuteResult, KeyUse, LedgerProjection, RequestRecord } from '../../events/store.js';
import type { InquiryScheduled } from '../../events/inquirySchedule.js';
import type { LedgerState } from '../../events/state.js';
import type { DeliveryOutcome, StoredNotification } from '../../events/notifications.js';
import { notificationsTable } from './notificationsTable.js';
import { inquiryScheduleTable } from './inquiryScheduleTable.js';
import { leasesTable } from './leasesTable.js';
import { requestsTable } from './requestsTable.js';
import { reconciliationsTable } from './reconciliationsTable.js';
import { keyUsesTable } from './keyUsesTable.js';
import type { BreakRow, RunRow } from '../shared/reconciliationRows.js';
import { checkRequestRecord } from '../shared/rowEncoding.js';
import { ledgerTable } from './ledgerTable.js';
import { eventsTable } from './eventsTable.js';
import { actorsOf, type PlannedEvent, type Unit } from '../shared/planBatch.js';
import { eventKey, runProtocolSync, type ProtocolOptions, type SyncWriteIo } from '../shared/writeProtocol.js';
import { CALLER_GAVE_UP } from '../shared/writeDeadline.js';

/** A unit of work for the writer; plain data, so it can cross to a worker thread. */
export type WriteOp =
  /** An execute or an append: the write protocol's units (src/store/shared/writeProtocol.ts). */
  | Unit
  /** The channel's requests, buffered by the relay: inserted in the batch's transaction, beside the log. */
  | { readonly op: 'recordRequests'; readonly records: readonly RequestRecord[] }
  | { readonly op: 'recordKeyUses'; readonly uses: readonly KeyUse[] }
  | { readonly op: 'rebuild' }
  | { readonly op: 'removeTombstones'; readonly before: number }
  /** Changes nothing, but writes: takes the write lock and commits one page, to learn whether a write would go through now. */
  | { readonly op: 'probe' }
  | { readonly op: 'recordUnclearInquiry'; readonly guid: string; readonly sentAt: number; readonly at: number; readonly minAgeMs: number }
  | { readonly op: 'leaseRows'; readonly holder: string; readonly rows: ReadonlyArray<{ readonly guid: string; readonly lastSeq: number }>; readonly now: number; readonly forMs: number }
  | { readonly op: 'releaseLeases'; readonly holder: string; readonly now: number }
  /** A reconciliation run, encoded (src/store/shared/reconciliationRows.ts), with its breaks; `at`: when it is recorded. */
  | { readonly op: 'recordReconciliation'; readonly run: RunRow; readonly breaks: readonly BreakRow[]; readonly at: number }
  /** The outbox (CONTRACT.md §11): due notifications leased to `holder`, attempts recorded, notifications queued again. */
  | { readonly op: 'leaseNotifications'; readonly holder: string; readonly limit: number; readonly now: number; readonly forMs: number }
  | { readonly op: 'recordDeliveries'; readonly outcomes: readonly DeliveryOutcome[] }
  | { readonly op: 'redeliverNotifications'; readonly guids: readonly string[]; readonly now: number };

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
                : O extends { op: 'leaseNotifications' }
                  ? StoredNotification[]
                  : O extends { op: 'recordDeliveries' }
                    ? null
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
 * nothing of it: executes and appends go through the write protocol, which plans everything in JS before the
 * first write (src/store/shared/writeProtocol.ts); the rare maintenance units run inside a savepoint. SQLite's
 * own errors (I/O, full, busy, read-only) fail the whole batch: nothing of it is durable, so no request in it
 * may call the account system.
 */
export function createWriteEngine(db: Database.Database, projection: LedgerProjection, busyTimeoutMs: number) {
  const events = eventsTable(db);
  const ledger = ledgerTable(db, projection);
  const schedule = inquiryScheduleTable(db);
  const leases = leasesTable(db);
  const requests = requestsTable(db);
  const reconciliations = reconciliationsTable(db);
  const keyUses = keyUsesTable(db);
  const outbox = notificationsTable(db);
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
  const PROTOCOL: ProtocolOptions = { stateToRow: projection.stateToRow, maxRounds: PROTOCOL_ROUNDS, checkTaken: false };

  /** The store's side of the write protocol, inside the write transaction (its lock held: every read is current). */
  const io: SyncWriteIo = {
    read(guids) {
      const rows = new Map<string, LedgerState>();
      const unreadable = new Map<string, unknown>();
      for (const guid of guids) {
        try {
          const state = ledger.read(guid);
          if (state !== null) rows.set(guid, state);
        } catch (err) {
          if (err instanceof Database.SqliteError) throw err;
          unreadable.set(guid, err);
        }
      }
      return { rows, unreadable };
    },
    // Asked only with checkTaken; here the (guid, seq) key refuses a taken seq in `write` itself.
    taken: () => new Set(),
    write(plan) {
      events.addActors(actorsOf(plan));
      const won = new Set<string>();
      const positions = new Map<string, number>();
      const planned = new Map<string, PlannedEvent[]>();
      for (const e of plan.events) planned.set(e.guid, [...(planned.get(e.guid) ?? []), e]);
      for (const { row, prevSeq } of plan.rows) {
        const guid = row['guid'] as string;
        const guidEvents = planned.get(guid) ?? [];
        const inserted = events.insertPlanned(guidEvents);
        if (inserted === null) continue;
        // A row read or seen at `prevSeq` is replaced only if it is still there: the (guid, seq) key cannot refuse an
        // append onto a stream that is no longer there (its tombstone removed since), but the row's own seq can.
        if (!ledger.placeRow(row, prevSeq)) {
          events.remove(inserted);
          continue;
        }
        won.add(guid);
        guidEvents.forEach((e, i) => positions.set(eventKey(e.guid, e.seq), inserted[i]!));
        if (plan.purged.has(guid)) {
          events.redact(guid);
          outbox.removeOf(guid);
        }
      }
      // In the append's transaction: a crash between the event and its delivery loses no notification.
      outbox.insert(plan.notifications.filter((n) => won.has(n.guid)));
      return { won, positions };
    },
  };

  function runOne(w: Exclude<WriteOp, Unit | { op: 'recordRequests' }>): unknown {
    switch (w.op) {
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
      case 'recordUnclearInquiry':
        return schedule.record(w.guid, w.sentAt, w.at, w.minAgeMs);
      case 'recordKeyUses':
        keyUses.record(w.uses);
        return null;
      case 'leaseRows':
        return leases.lease(w.holder, w.rows, w.now, w.forMs);
      case 'releaseLeases':
        leases.release(w.holder, w.now);
        return null;
      case 'recordReconciliation':
        return reconciliations.record(w.run, w.breaks, w.at);
      case 'leaseNotifications':
        return outbox.lease(w.holder, w.now, w.limit, w.forMs);
      case 'recordDeliveries':
        outbox.record(w.outcomes);
        return null;
      case 'redeliverNotifications':
        return outbox.redeliver(w.guids, w.now);
    }
  }

  /** A run of executes and appends, one protocol for all of them (a unit's own problem fails it alone). */
  function writeUnits(units: readonly Unit[]): OpOutcome[] {
    return runProtocolSync(units, PROTOCOL, io).map((o) => (o.ok ? o : { ok: false, error: toOpError(o.error) }));
  }

  /** The channel's requests: a record that does not check fails its unit alone; once inserting, SQLite's errors fail the batch. */
  function recordRequests(records: readonly RequestRecord[]): OpOutcome {
    try {
      records.forEach(checkRequestRecord);
    } catch (err) {
      return { ok: false, error: toOpError(err) };
    }
    requests.insert(records);
    return { ok: true, value: null };
  }

  /** Rare maintenance units write many rows: a savepoint makes each all or nothing. */
  function maintain(w: Exclude<WriteOp, Unit | { op: 'recordRequests' }>): OpOutcome {
    savepoint.run();
    try {
      const value = runOne(w);
      release.run();
      return { ok: true, value };
    } catch (err) {
      if (err instanceof Database.SqliteError) throw err;
      rollbackTo.run();
      release.run();
      return { ok: false, error: toOpError(err) };
    }
  }

  function run(batch: readonly WriteOp[], lockTaken = false, dropped?: (index: number) => boolean): OpOutcome[] {
    const outcomes: OpOutcome[] = new Array(batch.length);
    try {
      if (!lockTaken) begin.run();
      for (let i = 0; i < batch.length; ) {
        // Asked as late as possible, with the lock held: a unit whose caller has answered without it stays unwritten.
        const w = batch[i]!;
        if (isUnit(w)) {
          // Consecutive executes and appends are decided together; the units around them keep their order.
          const together: number[] = [];
          for (; i < batch.length && isUnit(batch[i]!); i++) {
            if (dropped?.(i) === true) outcomes[i] = { ok: false, error: GAVE_UP };
            else together.push(i);
          }
          writeUnits(together.map((k) => batch[k] as Unit)).forEach((o, k) => (outcomes[together[k]!] = o));
          continue;
        }
        if (dropped?.(i) === true) outcomes[i] = { ok: false, error: GAVE_UP };
        else outcomes[i] = w.op === 'recordRequests' ? recordRequests(w.records) : maintain(w);
        i++;
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

/**
 * SQLite holds the write lock, so a round's reads are current: a GUID loses a read round only to a projection behind
 * its log (the (guid, seq) key refuses the append), and the round after a lost seen row (added by the protocol) settles it.
 */
const PROTOCOL_ROUNDS = 2;

/** The outcome of a unit left unwritten because nobody waits for it any more; nobody reads it either. */
const GAVE_UP: OpError = { kind: 'unavailable', message: CALLER_GAVE_UP };

const isUnit = (w: WriteOp): w is Unit => w.op === 'execute' || w.op === 'append';
const isBusy = (err: unknown): boolean => err instanceof Database.SqliteError && (err.code === 'SQLITE_BUSY' || err.code.startsWith('SQLITE_BUSY_'));
export type WriteEngine = ReturnType<typeof createWriteEngine>;
