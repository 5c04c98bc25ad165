import type pg from 'pg';
import type { RecordedBreak, RecordedReconciliation, RecordedRun } from '../../events/reconciliation.js';
import { firstSeenOf, rowToBreak, rowToRun, type BreakRow, type EarlierBreak, type EarlierRun, type RunRow } from '../shared/reconciliationRows.js';
import type { BreakPage } from '../../events/store.js';
import { SERVER_NOW_MS } from './serverClock.js';

type Db = pg.Pool | pg.ClientBase;
/** Breaks per statement: arrays bound as parameters, so a day's breaks take a few round trips, not one each. */
const CHUNK = 5000;

/**
 * Records a run and its breaks in one transaction on `client`. Recorders are serialized by a lock on
 * `reconciliations` (readers not): two runs recorded at once each see the other's breaks as earlier or later, never
 * half. `now`: the store's clock when one was given, else the server's.
 */
export async function recordReconciliation(client: pg.ClientBase, row: RunRow, breaks: readonly BreakRow[], now: number | null): Promise<{ id: number; at: number; firstSeen: number[] }> {
  await client.query('BEGIN');
  try {
    await client.query('LOCK TABLE reconciliations IN SHARE ROW EXCLUSIVE MODE');
    const { rows } = await client.query<{ id: number; at: number }>({
      text: `INSERT INTO reconciliations (recorded_at, window_from, window_to, source, sha256, breaks, p1, p2, summary)
             VALUES (coalesce($1::bigint, ${SERVER_NOW_MS}), $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id, recorded_at AS at`,
      values: [now, row.window_from, row.window_to, row.source, row.sha256, row.breaks, row.p1, row.p2, row.summary],
    });
    const { id, at } = rows[0]!;
    const windows = (await client.query<EarlierRun>({ text: 'SELECT id, window_from AS "from", window_to AS "to" FROM reconciliations WHERE id < $1 ORDER BY id DESC', values: [id] })).rows;
    const firstSeen: number[] = [];
    for (let i = 0; i < breaks.length; i += CHUNK) {
      const chunk = breaks.slice(i, i + CHUNK);
      const earlier = new Map<string, EarlierBreak[]>();
      if (windows.length > 0) {
        const found = await client.query<EarlierBreak & { guid: string }>({
          text: 'SELECT run_id AS "runId", guid, category, first_seen AS "firstSeen" FROM reconciliation_breaks WHERE run_id < $1 AND guid = ANY($2::text[])',
          values: [id, chunk.map((b) => b.guid)],
        });
        for (const r of found.rows) earlier.set(r.guid, [...(earlier.get(r.guid) ?? []), r]);
      }
      const firsts = chunk.map((b) => firstSeenOf(b, id, windows, earlier.get(b.guid) ?? []));
      firstSeen.push(...firsts);
      await client.query({
        text: `INSERT INTO reconciliation_breaks (run_id, guid, category, severity, first_seen, ledger, journal)
               SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[])`,
        values: [id, chunk.map((b) => b.guid), chunk.map((b) => b.category), chunk.map((b) => b.severity), firsts, chunk.map((b) => b.ledger), chunk.map((b) => b.journal)],
      });
    }
    await client.query('COMMIT');
    return { id, at, firstSeen };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

export async function listReconciliations(db: Db, limit: number, beforeId: number): Promise<RecordedRun[]> {
  const { rows } = await db.query({
    name: 'guidgate_list_reconciliations',
    text: 'SELECT id, recorded_at, summary FROM reconciliations WHERE id < $1 ORDER BY id DESC LIMIT $2',
    values: [beforeId, limit],
  });
  return rows.map(rowToRun);
}

/** One run and its breaks, read in one REPEATABLE READ transaction: as of one instant. */
export async function readReconciliation(client: pg.ClientBase, id: number, page?: BreakPage): Promise<RecordedReconciliation | null> {
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    const head = await client.query({ text: 'SELECT id, recorded_at, summary FROM reconciliations WHERE id = $1', values: [id] });
    const columns = 'SELECT run_id, guid, category, severity, first_seen, ledger, journal FROM reconciliation_breaks';
    // A page: keyset on the primary key (run_id, guid); GUIDs are never empty, so '' is before every one.
    const query = page === undefined
      ? { text: `${columns} WHERE run_id = $1 ORDER BY guid`, values: [id] }
      : { text: `${columns} WHERE run_id = $1 AND guid > $2 ORDER BY guid LIMIT $3`, values: [id, page.after ?? '', Math.max(0, Math.floor(page.limit))] };
    const breaks = head.rows.length === 0 ? [] : (await client.query(query)).rows;
    await client.query('COMMIT');
    return head.rows.length === 0 ? null : { ...rowToRun(head.rows[0]), breaks: breaks.map(rowToBreak) };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

export async function reconciliationBreaksOf(db: Db, guid: string): Promise<RecordedBreak[]> {
  const { rows } = await db.query({
    name: 'guidgate_reconciliation_breaks_of',
    text: `SELECT b.run_id, b.guid, b.category, b.severity, b.first_seen, b.ledger, b.journal, r.id, r.recorded_at, r.summary
           FROM reconciliation_breaks b JOIN reconciliations r ON r.id = b.run_id WHERE b.guid = $1 ORDER BY b.run_id`,
    values: [guid],
  });
  return rows.map((raw: unknown) => ({ run: rowToRun(raw), break: rowToBreak(raw) }));
}
