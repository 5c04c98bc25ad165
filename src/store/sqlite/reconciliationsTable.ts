import type Database from 'better-sqlite3';
import { firstSeenOf, rowToBreak, rowToRun, type BreakRow, type EarlierBreak, type EarlierRun, type RunRow } from '../shared/reconciliationRows.js';
import type { RecordedBreak, RecordedReconciliation, RecordedRun } from '../../events/reconciliation.js';
import type { BreakPage } from '../../events/store.js';

const CHUNK = 500;

/**
 * The SQL of `reconciliations` and `reconciliation_breaks`: recorded runs and their breaks, beside the log. Prepared
 * when first used: a write engine made on a ledger of an older schema (a migration's test) never asks for them.
 */
export function reconciliationsTable(db: Database.Database) {
  let statements: ReturnType<typeof prepare> | null = null;
  const sql = () => (statements ??= prepare(db));
  return {
    record: (row: RunRow, breaks: readonly BreakRow[], at: number) => sql().record(row, breaks, at),
    list: (limit: number, beforeId: number) => sql().list(limit, beforeId),
    read: (id: number, page?: BreakPage) => sql().read(id, page),
    ofGuid: (guid: string) => sql().ofGuid(guid),
  };
}

function prepare(db: Database.Database) {
  const insertRun = db.prepare('INSERT INTO reconciliations (recorded_at, window_from, window_to, source, sha256, breaks, p1, p2, summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
  const insertBreak = db.prepare('INSERT INTO reconciliation_breaks (run_id, guid, category, severity, first_seen, ledger, journal) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const earlierRuns = db.prepare('SELECT id, window_from AS "from", window_to AS "to" FROM reconciliations WHERE id < ? ORDER BY id DESC');
  const runs = db.prepare('SELECT id, recorded_at, summary FROM reconciliations WHERE id < ? ORDER BY id DESC LIMIT ?');
  const run = db.prepare('SELECT id, recorded_at, summary FROM reconciliations WHERE id = ?');
  const breaksOfRun = db.prepare('SELECT run_id, guid, category, severity, first_seen, ledger, journal FROM reconciliation_breaks WHERE run_id = ? ORDER BY guid');
  const breaksPage = db.prepare('SELECT run_id, guid, category, severity, first_seen, ledger, journal FROM reconciliation_breaks WHERE run_id = ? AND guid > ? ORDER BY guid LIMIT ?');
  const breaksOfGuid = db.prepare(
    `SELECT b.run_id, b.guid, b.category, b.severity, b.first_seen, b.ledger, b.journal, r.id, r.recorded_at, r.summary
     FROM reconciliation_breaks b JOIN reconciliations r ON r.id = b.run_id WHERE b.guid = ? ORDER BY b.run_id`,
  );
  const earlierBreaksOf = (guids: readonly string[], runId: number): Map<string, EarlierBreak[]> => {
    const found = new Map<string, EarlierBreak[]>();
    for (let i = 0; i < guids.length; i += CHUNK) {
      const chunk = guids.slice(i, i + CHUNK);
      const rows = db
        .prepare(`SELECT run_id AS runId, guid, category, first_seen AS firstSeen FROM reconciliation_breaks WHERE run_id < ? AND guid IN (${chunk.map(() => '?').join(',')})`)
        .all(runId, ...chunk) as Array<EarlierBreak & { guid: string }>;
      for (const r of rows) found.set(r.guid, [...(found.get(r.guid) ?? []), r]);
    }
    return found;
  };
  return {
    /** Inside the write transaction: the run, then its breaks with their first-seen runs. Returns the run's id and each break's first-seen run. */
    record(row: RunRow, breaks: readonly BreakRow[], at: number): { id: number; firstSeen: number[] } {
      const id = Number(insertRun.run(at, row.window_from, row.window_to, row.source, row.sha256, row.breaks, row.p1, row.p2, row.summary).lastInsertRowid);
      const windows = earlierRuns.all(id) as EarlierRun[];
      const earlier = windows.length === 0 ? new Map<string, EarlierBreak[]>() : earlierBreaksOf(breaks.map((b) => b.guid), id);
      const firstSeen = breaks.map((b) => {
        const first = firstSeenOf(b, id, windows, earlier.get(b.guid) ?? []);
        insertBreak.run(id, b.guid, b.category, b.severity, first, b.ledger, b.journal);
        return first;
      });
      return { id, firstSeen };
    },
    list(limit: number, beforeId: number): RecordedRun[] {
      return runs.all(beforeId, limit).map(rowToRun);
    },
    read(id: number, page?: BreakPage): RecordedReconciliation | null {
      const head = run.get(id);
      if (head === undefined) return null;
      // GUIDs are never empty: '' is before every one of them.
      const rows = page === undefined ? breaksOfRun.all(id) : breaksPage.all(id, page.after ?? '', Math.max(0, Math.floor(page.limit)));
      return { ...rowToRun(head), breaks: rows.map(rowToBreak) };
    },
    ofGuid(guid: string): RecordedBreak[] {
      return breaksOfGuid.all(guid).map((raw) => ({ run: rowToRun(raw), break: rowToBreak(raw) }));
    },
  };
}
