import type pg from 'pg';
import type { LedgerProjection, ProjectionDifference } from '../../events/store.js';
import { ledgerColumns } from './ledgerColumns.js';
import { foldLog } from '../../events/evolve.js';
import { queryLedger } from './ledgerQueries.js';
import { readWholeLog } from './readAll.js';

async function inTransaction<T>(client: pg.ClientBase, begin: string, fn: () => Promise<T>): Promise<T> {
  await client.query(begin);
  try {
    const result = await fn();
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** Deletes tombstones (PURGED rows) last changed before `before`, with their events and request records, in one statement. */
export async function removeTombstones(db: pg.Pool | pg.ClientBase, before: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>({
    name: 'guidgate_remove_tombstones',
    text: `WITH gone AS (DELETE FROM ledger WHERE status = 'PURGED' AND updated_at < $1 RETURNING guid),
           gone_events AS (DELETE FROM events WHERE guid IN (SELECT guid FROM gone)),
           gone_schedule AS (DELETE FROM inquiry_schedule WHERE guid IN (SELECT guid FROM gone)),
           gone_requests AS (DELETE FROM requests WHERE guid IN (SELECT guid FROM gone)),
           gone_notifications AS (DELETE FROM notifications WHERE guid IN (SELECT guid FROM gone)),
           gone_attempts AS (DELETE FROM notification_attempts WHERE guid IN (SELECT guid FROM gone))
           SELECT count(*) AS n FROM gone`,
    values: [before],
  });
  return Number(rows[0]?.n ?? 0);
}

/** The ledger's size on disk: the log, the projection and the request records, with their indexes and TOAST. */
export async function tablesBytes(db: pg.Pool | pg.ClientBase): Promise<number> {
  const { rows } = await db.query<{ n: number }>("SELECT pg_total_relation_size('events') + pg_total_relation_size('ledger') + pg_total_relation_size('requests') AS n");
  return Number(rows[0]?.n ?? 0);
}

/**
 * A plain VACUUM: it makes the space of deleted and shrunk rows reusable and gives back empty pages at the
 * end of the tables, without the exclusive lock of VACUUM FULL (which would stop every relay for its duration).
 */
export async function reclaimSpace(db: pg.Pool): Promise<{ bytesBefore: number; bytesAfter: number }> {
  const bytesBefore = await tablesBytes(db);
  await db.query('VACUUM events, ledger, requests');
  return { bytesBefore, bytesAfter: await tablesBytes(db) };
}

/**
 * Replaces the projection with a fold of the log. The EXCLUSIVE lock on `ledger` holds every writer (each
 * writes its row before its events) until the new projection is committed; readers go on.
 */
export async function rebuildProjection(client: pg.ClientBase, projection: LedgerProjection): Promise<{ rows: number }> {
  const columns = ledgerColumns(projection.columns);
  return inTransaction(client, 'BEGIN', async () => {
    await client.query('LOCK TABLE ledger IN EXCLUSIVE MODE');
    const folded = foldLog(await readWholeLog(client));
    await client.query('DELETE FROM ledger');
    const rows = [...folded.values()].map((s) => projection.stateToRow(s));
    const chunk = 5000;
    for (let i = 0; i < rows.length; i += chunk) {
      const part = rows.slice(i, i + chunk);
      await client.query({
        name: 'guidgate_rebuild_insert',
        text: `INSERT INTO ledger (${columns.list}) SELECT * FROM unnest(${columns.arrayParams})`,
        values: columns.arrays(part),
      });
    }
    return { rows: folded.size };
  });
}

/** Compares the projection with a fold of the log, both read from one snapshot; changes nothing. */
export async function verifyProjection(client: pg.ClientBase, projection: LedgerProjection): Promise<ProjectionDifference[]> {
  return inTransaction(client, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', async () =>
    projection.compare(foldLog(await readWholeLog(client)), await queryLedger(client, {}, projection.rowToState)),
  );
}
