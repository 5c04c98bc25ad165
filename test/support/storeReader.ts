/**
 * The schedules' view of the ledger through the store contract (any store: SQLite, PostgreSQL), as a process
 * sharing it sees it: the same reads as `ledgerReader` in model.ts, asynchronous. Kept apart from model.ts, which
 * imports nothing of the code under test.
 */
import type { StoredEvent } from '../../src/events/codecs.js';
import type { LedgerState } from '../../src/events/state.js';
import type { EventLog, LedgerReadModel } from '../../src/events/store.js';
import { orThrow } from '../../src/events/storeResult.js';
import type { LogEvent, MState } from './model.js';

export type ReaderRow = MState & { guid: string; sentAt: number | null; updatedAt: number };

export interface StoreLedgerReader {
  row(guid: string): Promise<ReaderRow | null>;
  rows(): Promise<ReaderRow[]>;
  events(guid: string, afterSeq?: number): Promise<LogEvent[]>;
  allEvents(): Promise<Map<string, LogEvent[]>>;
  /**
   * The ledger rows and the whole log as of one instant. The contract has no read transaction over both, so: rows,
   * log, rows again, until the rows did not move meanwhile (each row is written in its events' transaction, so a log
   * read between two equal readings of every row holds exactly the events those rows are the fold of).
   */
  snapshot(): Promise<{ rows: ReaderRow[]; events: Map<string, LogEvent[]> }>;
}

const fromState = (s: LedgerState): ReaderRow => ({
  guid: s.guid,
  status: s.status,
  attempts: s.attempts,
  code: s.code,
  response: s.response,
  fingerprint: s.fingerprint,
  lastSeq: s.lastSeq,
  byInquiry: s.failedByInquiry,
  sentAt: s.sentAt,
  updatedAt: s.updatedAt,
});

const toLogEvent = (e: StoredEvent): LogEvent => ({ seq: e.seq, type: e.type, at: e.at, data: e.data as unknown as Record<string, unknown> });

export function storeLedgerReader(store: EventLog & LedgerReadModel): StoreLedgerReader {
  const allEvents = async (): Promise<Map<string, LogEvent[]>> => {
    const m = new Map<string, LogEvent[]>();
    for (let after = -1, page = 5000; ; ) {
      const batch = await orThrow(store.readAll(after, page));
      for (const e of batch) {
        const list = m.get(e.guid) ?? [];
        list.push(toLogEvent(e));
        m.set(e.guid, list);
      }
      if (batch.length < page) break;
      after = batch[batch.length - 1]!.position;
    }
    for (const list of m.values()) list.sort((a, b) => a.seq - b.seq);
    return m;
  };
  const rows = async () => (await orThrow(store.queryLedger({}))).map(fromState);
  const seqs = (rs: readonly ReaderRow[]) => rs.map((r) => `${r.guid}#${r.lastSeq}`).join(',');
  return {
    async row(guid) {
      const s = await orThrow(store.getLedger(guid));
      return s === null ? null : fromState(s);
    },
    rows,
    async events(guid, afterSeq = -1) {
      return (await orThrow(store.readStream(guid))).filter((e) => e.seq > afterSeq).map(toLogEvent);
    },
    allEvents,
    async snapshot() {
      for (let tries = 0; ; tries++) {
        const before = await rows();
        const events = await allEvents();
        const after = await rows();
        if (seqs(before) === seqs(after) || tries >= 50) return { rows: after, events };
      }
    },
  };
}

