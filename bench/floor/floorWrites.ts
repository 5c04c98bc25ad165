/**
 * The floor of `npm run bench:floor` (issue #29): only what the contract's tables need per transfer (CONTRACT.md §4),
 * written as a relay writes it in batches: the claim (`Claimed` and `Sent` appended, the ledger row inserted SENT)
 * and, in a second transaction, the outcome (`Answered` appended, the row updated to DONE). Three event inserts,
 * one ledger insert, one ledger update; nothing else guidgate keeps (request records, actors, indexes over status).
 *
 * Ways to write the same rows: one statement execution per row (`rowByRow`, as the store does today), or the batch's
 * rows of one table as one statement over a JSON array (`onePerTable`: `INSERT … SELECT … FROM json_each(?)` and
 * `UPDATE … FROM json_each(?)`, or the same over `jsonb_each`), a handful of `sqlite3_step` calls per batch instead
 * of five per transfer. And one layout other than the store's: the ledger keyed by its `Claimed` event's position
 * (`rowByClaim`), to price the ledger's own index by GUID.
 */
import Database from 'better-sqlite3';

/** The log as the store lays it out. */
const EVENTS = `
  CREATE TABLE events (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    guid     TEXT    NOT NULL,
    seq      INTEGER NOT NULL,
    type     TEXT    NOT NULL,
    at       INTEGER NOT NULL,
    data     TEXT    NOT NULL,
    UNIQUE (guid, seq)
  );`;

/** The contract's columns of the ledger after its key, as the store lays them out. */
const LEDGER_COLUMNS = `
    status      TEXT    NOT NULL,
    code        TEXT,
    request     TEXT,
    response    TEXT,
    fingerprint TEXT    NOT NULL,
    attempts    INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL`;

/** The ledger as the store lays it out: a rowid table (SQLite migration 7) with an index by GUID beside it. */
const LEDGER_BY_GUID = `CREATE TABLE ledger (guid TEXT NOT NULL PRIMARY KEY,${LEDGER_COLUMNS});`;

/**
 * The ledger keyed by the position of its transfer's `Claimed` event (seq 0), with no index by GUID: a row is found
 * through the log's `(guid, seq)` key, which every transfer writes anyway. New rows go at the end of the table's
 * B-tree, so a claim writes one random leaf (the log's key) where the store's layout writes two.
 */
const LEDGER_BY_CLAIM = `CREATE TABLE ledger (claim INTEGER PRIMARY KEY, guid TEXT NOT NULL,${LEDGER_COLUMNS});`;

/**
 * A new ledger file at `path`: WAL, and no sync at all (`synchronous=OFF`), as the floor measures CPU and a sync is
 * I/O; SQLite's page cache `cacheKb` (guidgate's is 4 MB). Temporary storage in memory: a statement that changes
 * several rows inside a transaction may need some (a statement journal, to undo just that statement; the rows of an
 * `UPDATE … FROM`), which SQLite otherwise writes to a temporary file: for the one-statement-per-table variants that
 * was 10 KB more written per transfer and a third more CPU. Row by row writes the same bytes either way.
 */
export function openFloorDb(path: string, variant: FloorVariant, cacheKb = 4000): Database.Database {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  db.pragma('temp_store = MEMORY');
  db.pragma(`cache_size = -${cacheKb}`);
  db.exec(EVENTS + LEDGER_OF[variant]);
  return db;
}

/** One transfer as the relay has it when it writes: the channel's request, its fingerprint, the account system's answer. */
export interface FloorTransfer {
  readonly guid: string;
  readonly request: string;
  readonly fingerprint: string;
  readonly response: string;
}

/** Writes batches of transfers: each call one transaction. */
export interface FloorWriter {
  /** `Claimed` (seq 0) and `Sent` (seq 1) appended, the ledger row inserted SENT. */
  readonly claim: (batch: readonly FloorTransfer[], now: number) => void;
  /** `Answered` (seq 2) appended, the row made DONE with the answer. */
  readonly answer: (batch: readonly FloorTransfer[], now: number) => void;
}

// The events' data, as the store's events carry it (src/events/codecs.ts): made here, in the measured work, the same
// for both writers.
const claimedData = (t: FloorTransfer) => JSON.stringify({ request: t.request, fingerprint: t.fingerprint });
const SENT_DATA = JSON.stringify({ attempt: 1, timeoutMs: 3000 });
const answeredData = (t: FloorTransfer) => JSON.stringify({ attempt: 1, code: '0000', response: t.response, latencyMs: 1 });

/** One statement execution per row: five per transfer. */
export function rowByRow(db: Database.Database): FloorWriter {
  const appendEvent = db.prepare('INSERT INTO events (guid, seq, type, at, data) VALUES (?, ?, ?, ?, ?)');
  const insertRow = db.prepare(
    'INSERT INTO ledger (guid, status, code, request, response, fingerprint, attempts, created_at, updated_at, last_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const updateRow = db.prepare('UPDATE ledger SET status = ?, code = ?, response = ?, updated_at = ?, last_seq = ? WHERE guid = ?');
  const claim = db.transaction((batch: readonly FloorTransfer[], now: number) => {
    for (const t of batch) {
      appendEvent.run(t.guid, 0, 'Claimed', now, claimedData(t));
      appendEvent.run(t.guid, 1, 'Sent', now, SENT_DATA);
      insertRow.run(t.guid, 'SENT', null, t.request, null, t.fingerprint, 1, now, now, 1);
    }
  });
  const answer = db.transaction((batch: readonly FloorTransfer[], now: number) => {
    for (const t of batch) {
      appendEvent.run(t.guid, 2, 'Answered', now, answeredData(t));
      updateRow.run('DONE', '0000', t.response, now, 2, t.guid);
    }
  });
  return { claim: (batch, now) => claim(batch, now), answer: (batch, now) => answer(batch, now) };
}

/**
 * The batch's rows of one table as one statement: a JSON array of rows (each an array of the columns' values), read
 * by `json_each`, or by `jsonb_each`, whose `value` of a row is SQLite's binary JSON, so that each `->>` finds its
 * column without parsing the row's text again. Two statements per transaction, whatever the batch's size. Both yield
 * an array's elements in order, so the events get the positions they get row by row (no ORDER BY: SQLite would
 * sort them in a temporary B-tree).
 */
export function onePerTable(db: Database.Database, each: 'json_each' | 'jsonb_each'): FloorWriter {
  const appendEvents = db.prepare(
    `INSERT INTO events (guid, seq, type, at, data)
     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM ${each}(?)`,
  );
  const insertRows = db.prepare(
    `INSERT INTO ledger (guid, status, code, request, response, fingerprint, attempts, created_at, updated_at, last_seq)
     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6, value ->> 7, value ->> 8, value ->> 9
     FROM ${each}(?)`,
  );
  const updateRows = db.prepare(
    `UPDATE ledger SET status = u.value ->> 1, code = u.value ->> 2, response = u.value ->> 3, updated_at = u.value ->> 4, last_seq = u.value ->> 5
     FROM ${each}(?) AS u WHERE ledger.guid = u.value ->> 0`,
  );
  const claim = db.transaction((batch: readonly FloorTransfer[], now: number) => {
    const events: unknown[] = [];
    for (const t of batch) events.push([t.guid, 0, 'Claimed', now, claimedData(t)], [t.guid, 1, 'Sent', now, SENT_DATA]);
    appendEvents.run(JSON.stringify(events));
    insertRows.run(JSON.stringify(batch.map((t) => [t.guid, 'SENT', null, t.request, null, t.fingerprint, 1, now, now, 1])));
  });
  const answer = db.transaction((batch: readonly FloorTransfer[], now: number) => {
    appendEvents.run(JSON.stringify(batch.map((t) => [t.guid, 2, 'Answered', now, answeredData(t)])));
    updateRows.run(JSON.stringify(batch.map((t) => [t.guid, 'DONE', '0000', t.response, now, 2])));
  });
  return { claim: (batch, now) => claim(batch, now), answer: (batch, now) => answer(batch, now) };
}

/**
 * Row by row into the ledger keyed by claim (`LEDGER_BY_CLAIM`): the row inserted with its `Claimed` event's position
 * as its key, and updated by that key, which the writer holds (as the relay holds the row it read).
 */
export function rowByClaim(db: Database.Database): FloorWriter {
  const appendEvent = db.prepare('INSERT INTO events (guid, seq, type, at, data) VALUES (?, ?, ?, ?, ?)');
  const insertRow = db.prepare(
    'INSERT INTO ledger (claim, guid, status, code, request, response, fingerprint, attempts, created_at, updated_at, last_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const updateRow = db.prepare('UPDATE ledger SET status = ?, code = ?, response = ?, updated_at = ?, last_seq = ? WHERE claim = ?');
  const claims = new Map<string, number | bigint>();
  const claim = db.transaction((batch: readonly FloorTransfer[], now: number) => {
    for (const t of batch) {
      const at = appendEvent.run(t.guid, 0, 'Claimed', now, claimedData(t)).lastInsertRowid;
      appendEvent.run(t.guid, 1, 'Sent', now, SENT_DATA);
      insertRow.run(at, t.guid, 'SENT', null, t.request, null, t.fingerprint, 1, now, now, 1);
      claims.set(t.guid, at);
    }
  });
  const answer = db.transaction((batch: readonly FloorTransfer[], now: number) => {
    for (const t of batch) {
      appendEvent.run(t.guid, 2, 'Answered', now, answeredData(t));
      updateRow.run('DONE', '0000', t.response, now, 2, claims.get(t.guid)!);
      claims.delete(t.guid);
    }
  });
  return { claim: (batch, now) => claim(batch, now), answer: (batch, now) => answer(batch, now) };
}

export const FLOOR_WRITERS = {
  row: rowByRow,
  byClaim: rowByClaim,
  json: (db: Database.Database) => onePerTable(db, 'json_each'),
  jsonb: (db: Database.Database) => onePerTable(db, 'jsonb_each'),
} as const;
export type FloorVariant = keyof typeof FLOOR_WRITERS;

/** The ledger each variant writes into: every variant names its layout. */
const LEDGER_OF: Record<FloorVariant, string> = { row: LEDGER_BY_GUID, byClaim: LEDGER_BY_CLAIM, json: LEDGER_BY_GUID, jsonb: LEDGER_BY_GUID };
