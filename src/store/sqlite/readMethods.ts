import type Database from 'better-sqlite3';
import type { EventStore, LedgerProjection } from '../../events/store.js';
import type { StoreResult } from '../../events/storeResult.js';
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
  return {
    readStream: (guid) => read(() => events.stream(guid).map(rowToEvent)),
    readAll: (afterPosition, limit) => read(() => events.all(afterPosition, limit).map(rowToEvent)),
    readRequests: (guid) => read(() => requests.read(guid)),
    keyUses: () => read(() => keyUses.list()),
    getLedger: (guid) => read(() => ledger.read(guid)),
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
