import type Database from 'better-sqlite3';
import * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either.js';
import { LedgerCorruptError } from '../../events/errors.js';
import type { RequestRecord, StoredRequestRecord } from '../../events/store.js';

const Int = t.refinement(t.number, Number.isSafeInteger, 'Int');
const RequestRow = t.type({ position: Int, guid: t.string, at: Int, key: t.union([t.string, t.null]), code: t.string, fingerprint_match: t.union([t.literal(0), t.literal(1)]) });

/** A `requests` row as SQLite returns it (also what PostgreSQL returns once its boolean is made 0/1). */
export function rowToRequest(raw: unknown): StoredRequestRecord {
  const row = RequestRow.decode(raw);
  if (isLeft(row)) throw new LedgerCorruptError('request record does not decode');
  const { position, guid, at, key, code, fingerprint_match } = row.right;
  return { position, guid, at, key, code, fingerprintMatch: fingerprint_match === 1 };
}

/** What SQLite would refuse mid-batch is refused before anything of the unit is written. */
export function checkRequestRecord(r: RequestRecord): void {
  if (typeof r.guid !== 'string' || !Number.isSafeInteger(r.at) || typeof r.code !== 'string' || typeof r.fingerprintMatch !== 'boolean') {
    throw new TypeError('request record is malformed');
  }
}

/** The SQL of `requests`: the channel's requests for known GUIDs, beside the log. */
export function requestsTable(db: Database.Database) {
  const insert = db.prepare('INSERT INTO requests (guid, at, key, code, fingerprint_match) VALUES (?, ?, ?, ?, ?)');
  const select = db.prepare('SELECT position, guid, at, key, code, fingerprint_match FROM requests WHERE guid = ? ORDER BY position');
  return {
    insert(records: readonly RequestRecord[]): void {
      for (const r of records) insert.run(r.guid, r.at, r.key, r.code, r.fingerprintMatch ? 1 : 0);
    },
    read(guid: string): StoredRequestRecord[] {
      return select.all(guid).map(rowToRequest);
    },
  };
}
export type RequestsTable = ReturnType<typeof requestsTable>;
