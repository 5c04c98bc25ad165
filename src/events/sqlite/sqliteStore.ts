import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either.js';
import { STATUSES, Status, type NewEvent, type StoredEvent } from '../codecs.js';
import { decide, type Command } from '../decide.js';
import { LedgerCorruptError, LedgerUnavailableError } from '../errors.js';
import { evolve } from '../evolve.js';
import type { LedgerState } from '../state.js';
import type { AppendResult, EventStore, ExecuteResult, LedgerQuery, ProjectionDifference, StatusSummary } from '../store.js';
import { ledgerTable } from '../../projections/ledgerTable.js';
import { foldLog, compareProjection } from '../../projections/rebuild.js';
import { eventsTable, isUniqueViolation } from './appendEvents.js';
import { rowToEvent } from './eventRows.js';
import { migrate } from './schema.js';

export type Synchronous = 'FULL' | 'NORMAL' | 'EXTRA';

export interface SqliteStoreOptions {
  readonly path: string;
  /**
   * FULL by default: a claim that a power cut can undo after the account system was called becomes a
   * double debit. NORMAL is faster and survives process crashes, not power loss; only by explicit choice.
   */
  readonly synchronous?: Synchronous;
  /** How long a writer waits for another process's write lock before the ledger counts as unavailable. */
  readonly busyTimeoutMs?: number;
  readonly clock?: () => number;
  /** Most units of work one shared transaction carries (group commit). */
  readonly maxBatch?: number;
}

export interface SqliteEventStore extends EventStore {
  readonly path: string;
  /** The open connection, for tests and maintenance that need raw SQL (integrity_check, vacuum). */
  readonly db: Database.Database;
}

interface PendingOp {
  readonly run: () => unknown;
  readonly resolve: (value: never) => void;
  readonly reject: (err: unknown) => void;
}

const StatusCount = t.type({ status: Status, n: t.number, oldest: t.number });

/** The ledger's bytes on disk: the database file and its WAL. */
function fileBytes(path: string): number {
  if (path === ':memory:') return 0;
  let total = 0;
  for (const p of [path, `${path}-wal`]) {
    try {
      total += statSync(p).size;
    } catch {
      /* no WAL yet */
    }
  }
  return total;
}

function unavailable(err: unknown, what: string): LedgerUnavailableError {
  if (err instanceof LedgerUnavailableError) return err;
  const detail = err instanceof Error ? err.message : String(err);
  return new LedgerUnavailableError(`ledger ${what} failed: ${detail}`, { cause: err });
}

/** SQLite's own errors (I/O, full, busy, read-only) make the whole ledger unavailable; others are one op's. */
function isSqliteError(err: unknown): boolean {
  return err instanceof Database.SqliteError;
}

export function openSqliteStore(options: SqliteStoreOptions): SqliteEventStore {
  const { path, synchronous = 'FULL', busyTimeoutMs = 5000, clock = Date.now, maxBatch = 512 } = options;
  let db: Database.Database;
  try {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    db = new Database(path, { timeout: busyTimeoutMs });
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous}`);
    migrate(db);
  } catch (err) {
    throw unavailable(err, `open of ${path}`);
  }

  const events = eventsTable(db);
  const ledger = ledgerTable(db);
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  const rollback = db.prepare('ROLLBACK');
  const savepoint = db.prepare('SAVEPOINT op');
  const rollbackTo = db.prepare('ROLLBACK TO op');
  const release = db.prepare('RELEASE op');

  // --- the write path: every unit of work queued in one turn of the event loop shares one transaction ---
  let queue: PendingOp[] = [];
  let scheduled = false;
  let closed = false;

  function enqueue<T>(run: () => T): Promise<T> {
    if (closed) return Promise.reject(new LedgerUnavailableError('ledger is closed'));
    return new Promise<T>((resolve, reject) => {
      queue.push({ run, resolve: resolve as (v: never) => void, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
  }

  function flush(): void {
    scheduled = false;
    while (queue.length > 0) {
      const batch = queue.length <= maxBatch ? queue : queue.slice(0, maxBatch);
      queue = queue.length <= maxBatch ? [] : queue.slice(maxBatch);
      runBatch(batch);
    }
  }

  function runBatch(batch: readonly PendingOp[]): void {
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    try {
      begin.run();
      for (const op of batch) {
        savepoint.run();
        try {
          outcomes.push({ ok: true, value: op.run() });
          release.run();
        } catch (err) {
          if (isSqliteError(err)) throw err;
          // A problem of this op alone (a corrupt row, an impossible event): undo it, keep the others.
          rollbackTo.run();
          release.run();
          outcomes.push({ ok: false, error: err });
        }
      }
      commit.run();
    } catch (err) {
      try {
        if (db.inTransaction) rollback.run();
      } catch {
        /* the connection is already broken; the rejection below says so */
      }
      // Nothing of this batch is durable, so none of its requests may call the account system.
      const failure = unavailable(err, 'write');
      for (const op of batch) op.reject(failure);
      return;
    }
    batch.forEach((op, i) => {
      const o = outcomes[i]!;
      if (o.ok) op.resolve(o.value as never);
      else op.reject(o.error);
    });
  }

  /** The compare-and-set append, inside the write transaction. */
  function appendInTx(guid: string, expectedSeq: number, newEvents: readonly NewEvent[]): AppendResult {
    const current = ledger.read(guid);
    if ((current?.lastSeq ?? -1) !== expectedSeq) return { won: false, state: current };
    let state = current;
    for (const e of newEvents) state = evolve(state, e, guid);
    if (state === null || newEvents.length === 0) return { won: false, state: current };
    savepoint.run();
    try {
      const stored = events.append(guid, expectedSeq + 1, newEvents);
      if (newEvents.some((e) => e.type === 'Purged')) events.redact(guid);
      ledger.write(state);
      release.run();
      return { won: true, state, events: stored };
    } catch (err) {
      rollbackTo.run();
      release.run();
      // The log already holds this seq although the projection said otherwise: someone moved first.
      if (isUniqueViolation(err)) return { won: false, state: ledger.read(guid) };
      throw err;
    }
  }

  function read<T>(what: string, fn: () => T): Promise<T> {
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(err instanceof LedgerCorruptError ? err : unavailable(err, what));
    }
  }

  function foldWholeLog(): Map<string, LedgerState> {
    return foldLog(events.all(-1, Number.MAX_SAFE_INTEGER).map(rowToEvent));
  }

  return {
    path,
    db,
    appendEvents(guid, expectedSeq, newEvents) {
      return enqueue(() => appendInTx(guid, expectedSeq, newEvents));
    },
    execute(guid: string, command: Command): Promise<ExecuteResult> {
      return enqueue((): ExecuteResult => {
        const state = ledger.read(guid);
        const decided = decide(state, command, clock());
        if (decided._tag === 'Left') return { kind: 'refused', refusal: decided.left };
        const result = appendInTx(guid, state?.lastSeq ?? -1, decided.right);
        // Unreachable while we hold the write lock, but if it happens the answer is "someone moved first".
        if (!result.won) return { kind: 'refused', refusal: { reason: 'exists', state: result.state } };
        return { kind: 'applied', state: result.state, events: result.events };
      });
    },
    readStream(guid: string): Promise<StoredEvent[]> {
      return read('read', () => events.stream(guid).map(rowToEvent));
    },
    readAll(afterPosition: number, limit: number): Promise<StoredEvent[]> {
      return read('read', () => events.all(afterPosition, limit).map(rowToEvent));
    },
    getLedger(guid: string) {
      return read('read', () => ledger.read(guid));
    },
    queryLedger(query: LedgerQuery) {
      return read('read', () => ledger.query(query));
    },
    countLedger(query: LedgerQuery) {
      return read('read', () => ledger.count(query));
    },
    removeTombstones(before: number) {
      return enqueue(() => ledger.removeTombstones(before));
    },
    reclaimSpace() {
      return read('vacuum', () => {
        const bytesBefore = fileBytes(path);
        db.pragma('incremental_vacuum');
        // Fold the WAL back into the file and truncate it, so the freed pages leave the disk too.
        db.pragma('wal_checkpoint(TRUNCATE)');
        return { bytesBefore, bytesAfter: fileBytes(path) };
      });
    },
    countByStatus() {
      return read('read', () => {
        const summary = Object.fromEntries(STATUSES.map((s) => [s, { count: 0, oldestUpdatedAt: null }])) as Record<Status, StatusSummary>;
        for (const raw of ledger.countByStatus()) {
          const row = StatusCount.decode(raw);
          if (isLeft(row)) throw new LedgerCorruptError('ledger status count does not decode');
          summary[row.right.status] = { count: row.right.n, oldestUpdatedAt: row.right.oldest };
        }
        return summary;
      });
    },
    rebuildProjection() {
      return enqueue(() => {
        const folded = foldWholeLog();
        db.prepare('DELETE FROM ledger').run();
        for (const state of folded.values()) ledger.write(state);
        return { rows: folded.size };
      });
    },
    verifyProjection(): Promise<ProjectionDifference[]> {
      // One read transaction: the log and the projection are compared as of the same instant.
      return read('verify', () =>
        db.transaction(() => compareProjection(foldWholeLog(), ledger.query({})))(),
      );
    },
    ping() {
      return read('ping', () => {
        db.prepare('SELECT 1').get();
      });
    },
    close() {
      if (!closed) {
        closed = true;
        if (queue.length > 0) flush();
        db.close();
      }
      return Promise.resolve();
    },
  };
}
