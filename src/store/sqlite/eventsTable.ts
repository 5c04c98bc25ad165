import type Database from 'better-sqlite3';
import { foldLog } from '../../events/evolve.js';
import type { LedgerState } from '../../events/state.js';
import { rowToEvent, SELECT_EVENTS } from '../shared/rowCodecs.js';
import type { PlannedEvent } from '../shared/planBatch.js';
import type { EncodedActor } from '../shared/rowEncoding.js';
import { REDACTED_TYPES, redactData } from '../shared/purgeRedaction.js';

/**
 * The SQL of the log. `insert` appends one event at an explicit seq; the UNIQUE (guid, seq) key makes a
 * second writer of the same seq fail, in this process or another.
 */
export function eventsTable(db: Database.Database) {
  const insert = db.prepare('INSERT INTO events (guid, seq, type, at, data, actor_id) VALUES (?, ?, ?, ?, ?, ?)');
  const insertActor = db.prepare('INSERT OR IGNORE INTO actors (id, actor) VALUES (?, ?)');
  const selectStream = db.prepare(`${SELECT_EVENTS} WHERE e.guid = ? ORDER BY e.seq`);
  const selectAll = db.prepare(`${SELECT_EVENTS} WHERE e.position > ? ORDER BY e.position LIMIT ?`);
  const selectRedacted = db.prepare(`SELECT position, type, data FROM events WHERE guid = ? AND type IN (${REDACTED_TYPES.map(() => '?').join(', ')})`);
  const updateData = db.prepare('UPDATE events SET data = ? WHERE position = ?');
  const deleteAt = db.prepare('DELETE FROM events WHERE position = ?');

  return {
    /**
     * Inserts one GUID's planned events (src/store/shared/planBatch.ts: everything that can throw in JS has run);
     * returns their positions, or null when the log already holds one of their seqs (the append lost): the ones
     * inserted before it are deleted again, so a lost append leaves nothing without a savepoint (a savepoint per
     * append made SQLite copy every page it touched into a sub-journal). Any other error fails the caller's whole
     * batch, which SQLite may already have rolled back.
     */
    insertPlanned(planned: readonly PlannedEvent[]): number[] | null {
      const positions: number[] = [];
      for (const e of planned) {
        try {
          positions.push(Number(insert.run(e.guid, e.seq, e.event.type, e.event.at, e.data, e.encodedActor?.id ?? null).lastInsertRowid));
        } catch (err) {
          if (!isUniqueViolation(err) || !db.inTransaction) throw err;
          this.remove(positions);
          return null;
        }
      }
      return positions;
    },
    /** Adds actors to the `actors` table (an id already there is left as it is): a plan's, once per batch. */
    addActors(actors: readonly EncodedActor[]): void {
      for (const a of actors) insertActor.run(a.id, a.json);
    },
    /** Deletes events this transaction has just inserted (an append found lost after them). */
    remove(positions: readonly number[]): void {
      for (const position of positions) deleteAt.run(position);
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

/** True for the error SQLite raises when an insert breaks the (guid, seq) key: the claim was lost. */
export function isUniqueViolation(err: unknown): boolean {
  return (
    typeof err === 'object' &&
    err !== null &&
    'code' in err &&
    (err.code === 'SQLITE_CONSTRAINT_UNIQUE' || err.code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
  );
}
