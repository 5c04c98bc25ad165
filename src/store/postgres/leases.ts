import type pg from 'pg';
import type { LeaseRequest } from '../../events/store.js';
import { SERVER_NOW_MS } from './serverClock.js';

type Db = pg.Pool | pg.ClientBase;

/**
 * The rows found through the ledger's key, one lookup per GUID, so that a plan made on a new ledger does not scan it
 * (ledgerQueries.ts, GET_LEDGERS_SQL).
 */
export const LEASE_ROWS_SQL = `WITH t AS (SELECT coalesce($5::bigint, ${SERVER_NOW_MS}) AS now)
           INSERT INTO leases AS x (guid, holder, until)
           SELECT l.guid, $1, t.now + $4 FROM unnest($2::text[], $3::integer[]) AS k(guid, seq)
             CROSS JOIN LATERAL (SELECT guid FROM ledger WHERE ledger.guid = k.guid AND ledger.last_seq = k.seq LIMIT 1) AS l CROSS JOIN t
           ORDER BY l.guid
           ON CONFLICT (guid) DO UPDATE SET holder = excluded.holder, until = excluded.until
             WHERE x.until <= (SELECT now FROM t) OR x.holder = excluded.holder
           RETURNING guid`;

/**
 * Leases those of `rows` still at their `lastSeq` and not leased by another holder until later than now, in one
 * statement. Two processes leasing one row at once: the second's insert waits for the first's, then finds its
 * lease running and takes nothing. `now` is the store's clock when one was given, else the server's.
 */
export async function leaseRows(db: Db, holder: string, rows: readonly LeaseRequest[], forMs: number, now: number | null): Promise<Set<string>> {
  if (rows.length === 0) return new Set();
  // One GUID twice in one statement would be refused ("cannot affect row a second time").
  const unique = [...new Map(rows.map((r) => [r.guid, r])).values()];
  const { rows: leased } = await db.query<{ guid: string }>({
    name: 'guidgate_lease_rows',
    text: LEASE_ROWS_SQL,
    values: [holder, unique.map((r) => r.guid), unique.map((r) => r.lastSeq), Math.max(0, Math.floor(forMs)), now],
  });
  return new Set(leased.map((r) => r.guid));
}

/**
 * Ends `holder`'s leases and forgets every lease that has run out. The rows are locked in GUID order, as
 * `leaseRows` takes them (its upsert locks every conflicting row, taken or not): a plain DELETE would lock in the
 * table's physical order, and a release crossing another process's lease of the same rows would deadlock (one
 * of the two aborted with 40P01, its run ended as a ledger error).
 */
export async function releaseLeases(db: Db, holder: string, now: number | null): Promise<void> {
  await db.query({
    name: 'guidgate_release_leases',
    text: `DELETE FROM leases WHERE guid IN (
             SELECT guid FROM leases WHERE holder = $1 OR until <= coalesce($2::bigint, ${SERVER_NOW_MS})
             ORDER BY guid FOR UPDATE)`,
    values: [holder, now],
  });
}
