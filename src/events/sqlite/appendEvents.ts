import type Database from 'better-sqlite3';
import type { NewEvent, StoredEvent } from '../codecs.js';

/**
 * The SQL of the log. `insert` appends one event at an explicit seq; the UNIQUE (guid, seq) key makes a
 * second writer of the same seq fail, in this process or another.
 */
export function eventsTable(db: Database.Database) {
  const insert = db.prepare('INSERT INTO events (guid, seq, type, at, data) VALUES (?, ?, ?, ?, ?)');
  const selectStream = db.prepare('SELECT * FROM events WHERE guid = ? ORDER BY seq');
  const selectAll = db.prepare('SELECT * FROM events WHERE position > ? ORDER BY position LIMIT ?');
  // Purge: the raw request and response leave the log; the events (types, times, codes) stay for auditors.
  const redactRequest = db.prepare("UPDATE events SET data = json_set(data, '$.request', json('null')) WHERE guid = ? AND type = 'Claimed'");
  const redactResponse = db.prepare(
    "UPDATE events SET data = json_set(data, '$.response', json('null')) WHERE guid = ? AND type IN ('Answered', 'Resolved')",
  );

  return {
    append(guid: string, firstSeq: number, events: readonly NewEvent[]): StoredEvent[] {
      return events.map((e, i) => {
        const seq = firstSeq + i;
        const info = insert.run(guid, seq, e.type, e.at, JSON.stringify(e.data));
        return { ...e, guid, seq, position: Number(info.lastInsertRowid) } as StoredEvent;
      });
    },
    redact(guid: string): void {
      redactRequest.run(guid);
      redactResponse.run(guid);
    },
    stream(guid: string): unknown[] {
      return selectStream.all(guid);
    },
    all(afterPosition: number, limit: number): unknown[] {
      return selectAll.all(afterPosition, limit);
    },
  };
}
export type EventsTable = ReturnType<typeof eventsTable>;

/** True for the error SQLite raises when an insert breaks the (guid, seq) key: the claim was lost. */
export function isUniqueViolation(err: unknown): boolean {
  return (
    typeof err === 'object' &&
    err !== null &&
    'code' in err &&
    (err.code === 'SQLITE_CONSTRAINT_UNIQUE' || err.code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
  );
}
