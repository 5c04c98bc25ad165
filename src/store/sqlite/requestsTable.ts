import type Database from 'better-sqlite3';
import type { RequestRecord, StoredRequestRecord } from '../../events/store.js';
import { rowToRequest } from '../shared/rowCodecs.js';

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
