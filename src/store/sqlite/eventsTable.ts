import type Database from 'better-sqlite3';
import type { Actor, NewEvent, StoredEvent } from '../../events/codecs.js';
import { foldLog } from '../../events/evolve.js';
import type { LedgerState } from '../../events/state.js';
import { rowToEvent } from '../shared/rowCodecs.js';
import { encodeEvents, type EncodedEvents } from '../shared/rowEncoding.js';
import { REDACTED_TYPES, redactData } from '../shared/purgeRedaction.js';

/**
 * The SQL of the log. `insert` appends one event at an explicit seq; the UNIQUE (guid, seq) key makes a
 * second writer of the same seq fail, in this process or another.
 */
export function eventsTable(db: Database.Database) {
  const insert = db.prepare('INSERT INTO events (guid, seq, type, at, data, actor) VALUES (?, ?, ?, ?, ?, ?)');
  const selectStream = db.prepare('SELECT * FROM events WHERE guid = ? ORDER BY seq');
  const selectAll = db.prepare('SELECT * FROM events WHERE position > ? ORDER BY position LIMIT ?');
  const selectRedacted = db.prepare(`SELECT position, type, data FROM events WHERE guid = ? AND type IN (${REDACTED_TYPES.map(() => '?').join(', ')})`);
  const updateData = db.prepare('UPDATE events SET data = ? WHERE position = ?');
  const deleteAt = db.prepare('DELETE FROM events WHERE position = ?');

  return {
    /** Everything an append needs, computed before anything is written (this is where JS can throw). */
    encode(guid: string, firstSeq: number, events: readonly NewEvent[], actor: Actor | null): EncodedAppend {
      const { data, actorJson } = encodeEvents(events, actor);
      return { guid, firstSeq, events, actor, data, actorJson };
    },
    /**
     * Inserts encoded events; only SQLite can fail here. If a later insert of several meets a taken seq,
     * the earlier ones of this call are deleted again before the error leaves, so a lost append leaves
     * nothing without a savepoint (a savepoint per append made SQLite copy every page it touched into a
     * sub-journal). Any other error fails the caller's whole batch.
     */
    insertEncoded({ guid, firstSeq, events, data, actor, actorJson }: EncodedAppend): StoredEvent[] {
      const stored: StoredEvent[] = [];
      try {
        events.forEach((e, i) => {
          const info = insert.run(guid, firstSeq + i, e.type, e.at, data[i], actorJson);
          stored.push({ ...e, guid, seq: firstSeq + i, position: Number(info.lastInsertRowid), actor } as StoredEvent);
        });
      } catch (err) {
        // Only a lost seq leaves the transaction open and this append's first rows in it; any other
        // SQLite error fails the whole batch, which may already have been rolled back by SQLite itself.
        if (isUniqueViolation(err) && db.inTransaction) this.undo(stored);
        throw err;
      }
      return stored;
    },
    /** Deletes events this transaction has just inserted (an append found lost after them). */
    undo(stored: readonly StoredEvent[]): void {
      for (const e of stored) deleteAt.run(e.position);
    },
    /** Takes what purge redacts (shared/purgeRedaction.ts) out of the GUID's events written so far. */
    redact(guid: string): void {
      for (const e of selectRedacted.all(guid, ...REDACTED_TYPES) as Array<{ position: number; type: string; data: string }>) {
        updateData.run(redactData(e.type, e.data), e.position);
      }
    },
    stream(guid: string): unknown[] {
      return selectStream.all(guid);
    },
    all(afterPosition: number, limit: number): unknown[] {
      return selectAll.all(afterPosition, limit);
    },
    /** The whole log folded into one state per GUID: what rebuild writes and verify compares. */
    foldAll(): Map<string, LedgerState> {
      return foldLog(selectAll.all(-1, Number.MAX_SAFE_INTEGER).map(rowToEvent));
    },
  };
}
export type EventsTable = ReturnType<typeof eventsTable>;

/** An append with its events encoded (shared/rowEncoding.ts): only SQLite can fail once it is written. */
export interface EncodedAppend extends EncodedEvents {
  readonly guid: string;
  readonly firstSeq: number;
  readonly events: readonly NewEvent[];
  readonly actor: Actor | null;
}

/** True for the error SQLite raises when an insert breaks the (guid, seq) key: the claim was lost. */
export function isUniqueViolation(err: unknown): boolean {
  return (
    typeof err === 'object' &&
    err !== null &&
    'code' in err &&
    (err.code === 'SQLITE_CONSTRAINT_UNIQUE' || err.code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
  );
}
