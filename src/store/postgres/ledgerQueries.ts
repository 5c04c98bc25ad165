import type pg from 'pg';
import type { Status } from '../../events/codecs.js';
import { LedgerCorruptError } from '../../events/errors.js';
import type { LedgerState } from '../../events/state.js';
import type { LedgerProjection, LedgerQuery, StatusSummary } from '../../events/store.js';
import { nextInquiryTimes, type InquiryScheduled } from '../../events/inquirySchedule.js';
import { onlyUnsettled, UNSETTLED_SQL } from '../shared/unsettledIndex.js';
import { statusSummary } from '../shared/rowCodecs.js';

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
  AND ($8::text IS NULL OR guid = $8)`;

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
  return [q.statuses ?? null, q.updatedBefore ?? null, q.sentAtOrBefore ?? null, q.attemptsBelow ?? null, q.attemptsAtLeast ?? null, q.afterGuid ?? null, q.inquiryDueBy ?? null, q.guid ?? null];
}

export async function getLedger(db: Db, guid: string, rowToState: LedgerProjection['rowToState']): Promise<LedgerState | null> {
  const { rows } = await db.query({ name: 'guidgate_get_ledger', text: 'SELECT * FROM ledger WHERE guid = $1', values: [guid] });
  return rows.length === 0 ? null : rowToState(rows[0]);
}

/** Rows matching `q`, in GUID order (byte order: the column's collation is "C", as SQLite compares). */
export async function queryLedger(db: Db, q: LedgerQuery, rowToState: LedgerProjection['rowToState']): Promise<LedgerState[]> {
  const limit = q.limit === undefined ? null : Math.max(0, Math.floor(q.limit));
  const filter = filterFor(q);
  const { rows } = await db.query({
    name: `guidgate_query_ledger_${filter.name}`,
    text: `SELECT * FROM ledger WHERE ${filter.where} ORDER BY guid LIMIT $9`,
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

/**
 * Records an inquiry about the attempt sent at `sentAt` that could not tell, and when to ask again
 * (`nextInquiryAt`: the wait grows with each one), in one statement: the count and the time it picks move
 * together. A new Sent starts the count again. Two processes recording at once each count one: an inquiry may
 * repeat, and the schedule only spaces them out.
 */
export async function recordUnclearInquiry(db: Db, guid: string, sentAt: number, at: number, minAgeMs: number): Promise<InquiryScheduled> {
  const { rows } = await db.query<{ inquiries: number; next_at: number }>({
    name: 'guidgate_record_unclear_inquiry',
    text: `INSERT INTO inquiry_schedule AS s (guid, sent_at, inquiries, next_at) VALUES ($1, $2, 1, ($3::bigint[])[1])
           ON CONFLICT (guid) DO UPDATE SET
             inquiries = CASE WHEN s.sent_at = excluded.sent_at THEN s.inquiries + 1 ELSE 1 END,
             sent_at = excluded.sent_at,
             next_at = ($3::bigint[])[least(CASE WHEN s.sent_at = excluded.sent_at THEN s.inquiries + 1 ELSE 1 END, cardinality($3::bigint[]))]
           RETURNING inquiries, next_at`,
    values: [guid, sentAt, nextInquiryTimes(at, minAgeMs)],
  });
  const row = rows[0];
  if (row === undefined) throw new LedgerCorruptError('inquiry schedule: the upsert returned no row');
  return { inquiries: Number(row.inquiries), nextInquiryAt: Number(row.next_at) };
}
