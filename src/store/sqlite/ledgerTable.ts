import type Database from 'better-sqlite3';
import type { LedgerProjection, LedgerQuery, ProjectionRow } from '../../events/store.js';
import type { LedgerState } from '../../events/state.js';
import { onlyUnsettled, UNSETTLED_SQL } from '../shared/unsettledIndex.js';

function whereClause(q: LedgerQuery): { sql: string; params: Record<string, unknown> } | null {
  const where: string[] = [];
  const params: Record<string, unknown> = {};
  if (q.guid !== undefined) {
    where.push('guid = @guid');
    params['guid'] = q.guid;
  }
  if (q.guids !== undefined) {
    if (q.guids.length === 0) return null;
    where.push(`guid IN (${q.guids.map((_, i) => `@g${i}`).join(', ')})`);
    q.guids.forEach((g, i) => (params[`g${i}`] = g));
  }
  if (q.statuses !== undefined) {
    if (q.statuses.length === 0) return null;
    where.push(`status IN (${q.statuses.map((_, i) => `@s${i}`).join(', ')})`);
    q.statuses.forEach((s, i) => (params[`s${i}`] = s));
    // Only unsettled states: say so in the partial index's own words, so that SQLite may use it.
    if (onlyUnsettled(q.statuses)) where.push(UNSETTLED_SQL);
  }
  if (q.updatedBefore !== undefined) {
    where.push('updated_at < @updatedBefore');
    params['updatedBefore'] = q.updatedBefore;
  }
  if (q.sentAtOrBefore !== undefined) {
    where.push('sent_at <= @sentAtOrBefore');
    params['sentAtOrBefore'] = q.sentAtOrBefore;
  }
  if (q.attemptsBelow !== undefined) {
    where.push('attempts < @attemptsBelow');
    params['attemptsBelow'] = q.attemptsBelow;
  }
  if (q.attemptsAtLeast !== undefined) {
    where.push('attempts >= @attemptsAtLeast');
    params['attemptsAtLeast'] = q.attemptsAtLeast;
  }
  if (q.inquiryDueBy !== undefined) {
    where.push('NOT EXISTS (SELECT 1 FROM inquiry_schedule s WHERE s.guid = ledger.guid AND s.sent_at IS ledger.sent_at AND s.next_at > @inquiryDueBy)');
    params['inquiryDueBy'] = q.inquiryDueBy;
  }
  if (q.createdFrom !== undefined) {
    where.push('created_at >= @createdFrom');
    params['createdFrom'] = q.createdFrom;
  }
  if (q.createdBefore !== undefined) {
    where.push('created_at < @createdBefore');
    params['createdBefore'] = q.createdBefore;
  }
  if (q.afterGuid !== undefined) {
    where.push('guid > @afterGuid');
    params['afterGuid'] = q.afterGuid;
  }
  if (q.beforeRow !== undefined) {
    where.push('(updated_at < @beforeUpdated OR (updated_at = @beforeUpdated AND guid < @beforeGuid))');
    params['beforeUpdated'] = q.beforeRow.updatedAt;
    params['beforeGuid'] = q.beforeRow.guid;
  }
  return { sql: where.length ? ` WHERE ${where.join(' AND ')}` : '', params };
}

/** The SQL of the `ledger` projection: one row per GUID, written in the append transaction. */
export function ledgerTable(db: Database.Database, projection: LedgerProjection) {
  const { columns, stateToRow, rowToState, rowFromValues } = projection;
  const updates = columns.filter((c) => c !== 'guid').map((c) => `${c} = excluded.${c}`).join(', ');
  // Bound by position: binding by name looks every parameter's name up in the row object, from C++, per write.
  const upsert = db.prepare(`INSERT INTO ledger (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')}) ON CONFLICT(guid) DO UPDATE SET ${updates}`);
  const others = columns.filter((c) => c !== 'guid');
  const updateAt = db.prepare(`UPDATE ledger SET ${others.map((c) => `${c} = ?`).join(', ')} WHERE guid = ? AND last_seq = ?`);
  // Rows are read raw (values in column order) and made into the projection's row by its own literal.
  const SELECT = `SELECT ${columns.join(', ')} FROM ledger`;
  const selectOne = db.prepare(`${SELECT} WHERE guid = ?`).raw(true);
  const decode = (values: unknown): LedgerState => rowToState(rowFromValues(values as unknown[]));
  const countStatus = db.prepare('SELECT status, COUNT(*) AS n, MIN(updated_at) AS oldest FROM ledger GROUP BY status');

  return {
    write(state: LedgerState): void {
      this.writeRow(stateToRow(state));
    },
    /** Writes a row already made with `stateToRow` (so that only SQLite can fail here). */
    writeRow(row: ProjectionRow): void {
      upsert.run(columns.map((c) => row[c]));
    },
    /** Replaces the row of `row.guid` only if it is still at `lastSeq`; false when there is no such row. */
    replaceRowAt(row: ProjectionRow, lastSeq: number): boolean {
      return updateAt.run([...others.map((c) => row[c]), row['guid'], lastSeq]).changes === 1;
    },
    /** The row a plan writes (src/store/shared/planBatch.ts): new when `prevSeq` is -1, else replaced only if still at `prevSeq`. */
    placeRow(row: ProjectionRow, prevSeq: number): boolean {
      if (prevSeq >= 0) return this.replaceRowAt(row, prevSeq);
      this.writeRow(row);
      return true;
    },
    read(guid: string): LedgerState | null {
      const values = selectOne.get(guid);
      return values === undefined ? null : decode(values);
    },
    query(q: LedgerQuery): LedgerState[] {
      const filter = whereClause(q);
      if (filter === null) return [];
      const sql = `${SELECT}${filter.sql} ORDER BY ${q.order === 'updated' ? 'updated_at DESC, guid DESC' : 'guid'}` + (q.limit !== undefined ? ` LIMIT ${Math.max(0, Math.floor(q.limit))}` : '');
      return db.prepare(sql).raw(true).all(filter.params).map(decode);
    },
    count(q: LedgerQuery): number {
      const filter = whereClause(q);
      if (filter === null) return 0;
      const row = db.prepare(`SELECT COUNT(*) AS n FROM ledger${filter.sql}`).get(filter.params) as { n: unknown };
      return Number(row.n);
    },
    /** Removes PURGED rows (tombstones) last changed before `before`, with their events and request records; returns how many. */
    removeTombstones(before: number): number {
      db.prepare("DELETE FROM events WHERE guid IN (SELECT guid FROM ledger WHERE status = 'PURGED' AND updated_at < ?)").run(before);
      db.prepare("DELETE FROM requests WHERE guid IN (SELECT guid FROM ledger WHERE status = 'PURGED' AND updated_at < ?)").run(before);
      db.prepare("DELETE FROM inquiry_schedule WHERE guid IN (SELECT guid FROM ledger WHERE status = 'PURGED' AND updated_at < ?)").run(before);
      db.prepare("DELETE FROM notifications WHERE guid IN (SELECT guid FROM ledger WHERE status = 'PURGED' AND updated_at < ?)").run(before);
      db.prepare("DELETE FROM notification_attempts WHERE guid IN (SELECT guid FROM ledger WHERE status = 'PURGED' AND updated_at < ?)").run(before);
      return db.prepare("DELETE FROM ledger WHERE status = 'PURGED' AND updated_at < ?").run(before).changes;
    },
    /** Raw rows of `status, n, oldest`; the store decodes them. */
    countByStatus(): unknown[] {
      return countStatus.all();
    },
  };
}
export type LedgerTable = ReturnType<typeof ledgerTable>;
