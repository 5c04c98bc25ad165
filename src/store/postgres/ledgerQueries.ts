import type pg from 'pg';
import type { Status } from '../../events/codecs.js';
import type { LedgerState } from '../../events/state.js';
import type { LedgerProjection, LedgerQuery, StatusSummary } from '../../events/store.js';
import { onlyUnsettled, UNSETTLED_SQL } from '../shared/unsettledIndex.js';
import { statusSummary } from '../shared/rowCodecs.js';
import { batcher } from '../shared/batcher.js';

type Db = pg.Pool | pg.ClientBase;

/**
 * Every filter of `LedgerQuery` in one statement, each switched off by a NULL parameter, so that one
 * prepared statement serves every query (PostgreSQL plans each execution for its actual parameters while
 * that is cheaper than a generic plan).
 */
const FILTER = `
  ($1::text[] IS NULL OR status = ANY($1))
  AND ($2::bigint IS NULL OR updated_at < $2)
  AND ($3::bigint IS NULL OR sent_at <= $3)
  AND ($4::integer IS NULL OR attempts < $4)
  AND ($5::integer IS NULL OR attempts >= $5)
  AND ($6::text IS NULL OR guid > $6)
  AND ($7::bigint IS NULL OR NOT EXISTS (SELECT 1 FROM inquiry_schedule s
       WHERE s.guid = ledger.guid AND s.sent_at IS NOT DISTINCT FROM ledger.sent_at AND s.next_at > $7))
  AND ($8::text IS NULL OR guid = $8)
  AND ($9::bigint IS NULL OR (updated_at, guid) < ($9, $10::text))
  AND ($11::bigint IS NULL OR created_at >= $11)
  AND ($12::bigint IS NULL OR created_at < $12)
  AND ($13::text[] IS NULL OR guid = ANY($13))`;

/**
 * The query's statement: the general one, or, when it asks only for unsettled states, the same with the partial
 * index's WHERE added word for word (a generic plan cannot see that `status = ANY($1)` implies it; see
 * src/store/shared/unsettledIndex.ts). Each is prepared once per connection under its own name.
 */
function filterFor(q: LedgerQuery): { name: string; where: string } {
  return q.statuses !== undefined && onlyUnsettled(q.statuses)
    ? { name: 'unsettled', where: `${FILTER}\n  AND ${UNSETTLED_SQL}` }
    : { name: 'any', where: FILTER };
}

function filterValues(q: LedgerQuery): unknown[] {
  return [
    q.statuses ?? null, q.updatedBefore ?? null, q.sentAtOrBefore ?? null, q.attemptsBelow ?? null, q.attemptsAtLeast ?? null, q.afterGuid ?? null, q.inquiryDueBy ?? null, q.guid ?? null,
    q.beforeRow?.updatedAt ?? null, q.beforeRow?.guid ?? null,
    q.createdFrom ?? null, q.createdBefore ?? null,
    q.guids === undefined ? null : [...q.guids],
  ];
}

/**
 * The rows of the GUIDs given, each found through the ledger's key. A prepared statement keeps the generic plan
 * PostgreSQL makes at its sixth run until the table is next analyzed (serverClock.ts, BEGIN_WRITE), and on a new
 * ledger, never analyzed and nearly empty, `WHERE guid = ANY($1)` was planned as a scan of the whole table: kept
 * by the relay's pooled connections, each read then cost a scan of a growing ledger (20-60 ms at 15,000 rows,
 * seen with auto_explain in `npm run bench:peers`). One lookup per GUID, `LIMIT 1` under a lateral join, is planned
 * as an index scan however small the table looks, unless it was analyzed while empty; the next analyze replans it.
 * The store's other lookups of many keys at once outside a write transaction (leases.ts, continuity.ts) are written
 * the same way; a write transaction turns sequential scans off instead (BEGIN_WRITE).
 */
export const GET_LEDGERS_SQL = 'SELECT l.* FROM unnest($1::text[]) AS k(guid), LATERAL (SELECT * FROM ledger WHERE ledger.guid = k.guid LIMIT 1) AS l';

/** Reads of one row per GUID in one query at most. */
const MAX_READ_BATCH = 256;

/**
 * The store's `getLedger`, the calls made in one turn of the event loop read in one query (`guid = ANY`): a relay
 * reads the row of every channel request before it decides, a round trip each otherwise. Each read still starts
 * after its call was made, so it sees every write acknowledged before the call. A row that does not decode fails
 * its own callers only; a failed query fails the calls it carried.
 */
export function coalescedGetLedger(db: Db, rowToState: LedgerProjection['rowToState']): (guid: string) => Promise<LedgerState | null> {
  type Call = { readonly guid: string; readonly resolve: (s: LedgerState | null) => void; readonly reject: (e: unknown) => void };
  const reads = batcher<Call>({
    maxBatch: MAX_READ_BATCH,
    maxInFlight: Number.POSITIVE_INFINITY,
    async run(calls) {
      const guids = [...new Set(calls.map((c) => c.guid))];
      let found: Map<string, unknown>;
      try {
        const { rows } = await db.query({ name: 'guidgate_get_ledgers', text: GET_LEDGERS_SQL, values: [guids] });
        found = new Map<string, unknown>(rows.map((r: { guid: string }) => [r.guid, r]));
      } catch (err) {
        for (const c of calls) c.reject(err);
        return;
      }
      const states = new Map<string, { ok: true; state: LedgerState | null } | { ok: false; error: unknown }>();
      for (const guid of guids) {
        const row = found.get(guid);
        try {
          states.set(guid, { ok: true, state: row === undefined ? null : rowToState(row) });
        } catch (error) {
          states.set(guid, { ok: false, error });
        }
      }
      for (const c of calls) {
        const s = states.get(c.guid)!;
        if (s.ok) c.resolve(s.state);
        else c.reject(s.error);
      }
    },
  });
  return (guid) => new Promise((resolve, reject) => reads.push({ guid, resolve, reject }));
}

/** Rows matching `q`, in GUID order (byte order: the column's collation is "C", as SQLite compares), or newest change first. */
export async function queryLedger(db: Db, q: LedgerQuery, rowToState: LedgerProjection['rowToState']): Promise<LedgerState[]> {
  const limit = q.limit === undefined ? null : Math.max(0, Math.floor(q.limit));
  const filter = filterFor(q);
  const updated = q.order === 'updated';
  const { rows } = await db.query({
    name: `guidgate_query_ledger_${filter.name}${updated ? '_updated' : ''}`,
    text: `SELECT * FROM ledger WHERE ${filter.where} ORDER BY ${updated ? 'updated_at DESC, guid DESC' : 'guid'} LIMIT $14`,
    values: [...filterValues(q), limit],
  });
  return rows.map((r) => rowToState(r));
}

export async function countLedger(db: Db, q: LedgerQuery): Promise<number> {
  const filter = filterFor(q);
  const { rows } = await db.query<{ n: number }>({ name: `guidgate_count_ledger_${filter.name}`, text: `SELECT count(*) AS n FROM ledger WHERE ${filter.where}`, values: filterValues(q) });
  return Number(rows[0]?.n ?? 0);
}

export async function countByStatus(db: Db): Promise<Record<Status, StatusSummary>> {
  const { rows } = await db.query({
    name: 'guidgate_count_by_status',
    text: 'SELECT status, count(*) AS n, min(updated_at) AS oldest FROM ledger GROUP BY status',
  });
  return statusSummary(rows);
}
