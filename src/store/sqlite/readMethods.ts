import type Database from 'better-sqlite3';
import type { EventStore, LedgerProjection } from '../../events/store.js';
import type { LedgerState } from '../../events/state.js';
import type { StoreResult } from '../../events/storeResult.js';
import { batcher } from '../shared/batcher.js';
import { rowToEvent, statusSummary } from '../shared/rowCodecs.js';
import { eventsTable } from './eventsTable.js';
import { ledgerTable } from './ledgerTable.js';
import { requestsTable } from './requestsTable.js';
import { reconciliationsTable } from './reconciliationsTable.js';
import { keyUsesTable } from './keyUsesTable.js';
import { listBefore, runIdOf } from '../shared/reconciliationRows.js';

/** Runs a step on the connection the store was opened with, behind the store's boundary (closed: LEDGER_CLOSED). */
export type OnConnection = <T>(what: string, fn: () => T) => StoreResult<T>;

export type ReadMethods = Pick<EventStore, 'readStream' | 'readAll' | 'readRequests' | 'keyUses' | 'getLedger' | 'queryLedger' | 'countLedger' | 'countByStatus' | 'verifyProjection' | 'reconciliations' | 'reconciliation' | 'reconciliationBreaks'>;

/**
 * The store's reads, on the connection of the thread that opened it (in WAL mode a read never waits for a writer,
 * this process's or another's); every row decoded, never cast.
 */
export function readMethods(db: Database.Database, projection: LedgerProjection, onConnection: OnConnection): ReadMethods {
  const events = eventsTable(db);
  const ledger = ledgerTable(db, projection);
  const requests = requestsTable(db);
  const reconciliations = reconciliationsTable(db);
  const keyUses = keyUsesTable(db);
  const read = <T>(fn: () => T) => onConnection('read', fn);
  const rowReads = coalescedRowReads((guid) => read(() => ledger.read(guid)), oneReadTransaction(db));
  return {
    readStream: (guid) => read(() => events.stream(guid).map(rowToEvent)),
    readAll: (afterPosition, limit) => read(() => events.all(afterPosition, limit).map(rowToEvent)),
    readRequests: (guid) => read(() => requests.read(guid)),
    keyUses: () => read(() => keyUses.list()),
    getLedger: rowReads,
    queryLedger: (query) => read(() => ledger.query(query)),
    countLedger: (query) => read(() => ledger.count(query)),
    countByStatus: () => read(() => statusSummary(ledger.countByStatus())),
    reconciliations: ({ limit, beforeId }) =>
      read(() => {
        const before = listBefore(beforeId);
        return before === null ? [] : reconciliations.list(Math.max(0, Math.floor(limit)), before);
      }),
    reconciliation: (id, page) =>
      read(() => {
        const n = runIdOf(id);
        // One read transaction: the run and its breaks as of one instant.
        return n === null ? null : db.transaction(() => reconciliations.read(n, page))();
      }),
    reconciliationBreaks: (guid) => read(() => reconciliations.ofGuid(guid)),
    // One read transaction: the log and the projection are compared as of the same instant.
    verifyProjection: () => onConnection('verify', () => db.transaction(() => projection.compare(events.foldAll(), ledger.query({})))()),
  };
}

/**
 * `getLedger` as the relay calls it, once per channel request: the calls made in one turn of the event loop are read
 * together at the start of the next (each row on its own, so a row that does not decode fails its own caller only),
 * as PostgreSQL's coalesced reads are. A read still starts after its call was made, so it sees every write
 * acknowledged before the call. What it buys is the replies leaving in bursts: a request answered from its row
 * (a replay) otherwise wrote its reply within the turn that read the request, one `writev` and one wake-up of the
 * channel's side per request, which made a replay cost twice what it does on PostgreSQL (docs/performance.md).
 */
function coalescedRowReads(
  readRow: (guid: string) => StoreResult<LedgerState | null>,
  together: <T>(fn: () => T) => T,
): (guid: string) => StoreResult<LedgerState | null> {
  type Call = { readonly guid: string; readonly resolve: (r: Awaited<StoreResult<LedgerState | null>>) => void };
  const reads = batcher<Call>({
    maxBatch: Number.POSITIVE_INFINITY,
    maxInFlight: Number.POSITIVE_INFINITY,
    run: (calls) => {
      // `readRow` reads before it returns (storeResult runs its step at once), so every row is read inside `together`;
      // a turn of one read is one statement, as cheap alone.
      const readAll = () => calls.map((c) => readRow(c.guid).then(c.resolve));
      return Promise.all(calls.length > 1 ? together(readAll) : readAll()).then(() => undefined);
    },
  });
  return (guid) => new Promise((resolve) => reads.push({ guid, resolve }));
}

/**
 * Several reads as one read transaction: one snapshot, and the WAL's read lock taken and dropped once. Each statement
 * outside a transaction is a read transaction of its own, whose lock is two `fcntl` calls on the WAL index and whose
 * start checks the file's size, three system calls per row (docs/performance.md). Reads only, in one synchronous run,
 * so the connection is back in autocommit before the writer's next `BEGIN IMMEDIATE`; inside an open transaction
 * (none is open between turns today) the reads just join it. A closed connection is left to the reads to report.
 * Nothing here throws past the reads' own results (which `fn` returns): a `BEGIN` that fails leaves the reads to run
 * on their own, and a `COMMIT` that fails is followed by a `ROLLBACK`, either of which only lets the snapshot go.
 */
export function oneReadTransaction(db: Database.Database): <T>(fn: () => T) => T {
  const begin = db.prepare('BEGIN');
  const commit = db.prepare('COMMIT');
  const rollback = db.prepare('ROLLBACK');
  const end = (): void => {
    if (!db.inTransaction) return;
    try {
      commit.run();
    } catch {
      try {
        rollback.run();
      } catch {
        // Still open: the writer's next BEGIN IMMEDIATE fails, and its error says so.
      }
    }
  };
  return (fn) => {
    if (!db.open || db.inTransaction) return fn();
    try {
      begin.run();
    } catch {
      return fn();
    }
    try {
      return fn();
    } finally {
      end();
    }
  };
}
