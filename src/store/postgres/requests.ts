import type pg from 'pg';
import type { RequestRecord, StoredRequestRecord } from '../../events/store.js';
import { rowToRequest } from '../shared/rowCodecs.js';
import { checkRequestRecord } from '../shared/rowEncoding.js';

type Db = pg.Pool | pg.ClientBase;

/** The relay's buffered request records, in one statement (one transaction), in the order given. */
export async function recordRequests(db: Db, records: readonly RequestRecord[]): Promise<void> {
  if (records.length === 0) return;
  records.forEach(checkRequestRecord);
  await db.query({
    name: 'guidgate_record_requests',
    text: `INSERT INTO requests (guid, at, key, code, fingerprint_match)
           SELECT guid, at, key, code, fingerprint_match
           FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::boolean[]) WITH ORDINALITY AS r(guid, at, key, code, fingerprint_match, n)
           ORDER BY n`,
    values: [records.map((r) => r.guid), records.map((r) => r.at), records.map((r) => r.key), records.map((r) => r.code), records.map((r) => r.fingerprintMatch)],
  });
}

/** One GUID's request records in the order they were stored. */
export async function readRequests(db: Db, guid: string): Promise<StoredRequestRecord[]> {
  const { rows } = await db.query({
    name: 'guidgate_read_requests',
    text: 'SELECT position, guid, at, key, code, CASE WHEN fingerprint_match THEN 1 ELSE 0 END AS fingerprint_match FROM requests WHERE guid = $1 ORDER BY position',
    values: [guid],
  });
  return rows.map(rowToRequest);
}
