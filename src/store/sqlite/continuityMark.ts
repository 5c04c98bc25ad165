import { open, readFile, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import type Database from 'better-sqlite3';
import type { ContinuityMark, EventKey, LedgerStanding } from '../../events/store.js';
import { LEDGER_FILE_MODE } from './ledgerFile.js';

/**
 * The SQLite side of the continuity guard (CONTRACT.md §9): how far the log reaches, which events it lacks, and
 * the mark `serve` keeps beside the file. A copy of the ledger put back in place (a restore from an older backup)
 * carries no memory of what came after it; the mark beside it does, so the next `serve` sees the log behind it.
 */

/** The file beside the ledger that holds the mark. */
export const markPath = (ledgerPath: string): string => `${ledgerPath}.continuity.json`;

/**
 * Where the file stands: the highest position the log ever handed out (`sqlite_sequence`, which AUTOINCREMENT
 * keeps even when the last events are deleted), or `durable`, the writer's last synced one, when that is lower. A
 * file does not change server under its process (a replaced file is the file watch's: E503), so `server` and
 * `instance` name the file path only.
 */
export function fileStanding(db: Database.Database, path: string, durable: number | null): LedgerStanding {
  // Only what is on disk: the mark must never get ahead of what a power cut leaves (then it would say "went back").
  const position = durable === null ? logPosition(db) : Math.min(logPosition(db), durable);
  return { server: `sqlite:${path}`, instance: `sqlite:${path}`, position, canChange: false, seen: { file: path, position } };
}

const positionStatements = new WeakMap<Database.Database, Database.Statement>();

/**
 * The highest position the log has handed out, committed (on disk or not). The writer reads it at every sync: the
 * statement is prepared once per connection.
 */
export function logPosition(db: Database.Database): number {
  let statement = positionStatements.get(db);
  if (statement === undefined) {
    statement = db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'events'").pluck();
    positionStatements.set(db, statement);
  }
  return (statement.get() as number | undefined) ?? 0;
}

/** Of `keys`, the events the log does not have. */
export function missingFileEvents(db: Database.Database, keys: readonly EventKey[]): EventKey[] {
  const has = db.prepare('SELECT 1 FROM events WHERE guid = ? AND seq = ?').pluck();
  return keys.filter(({ guid, seq }) => has.get(guid, seq) === undefined);
}

/** The mark beside the ledger, or null when there is none; one that does not parse is said so (an Error). */
export async function readFileMark(ledgerPath: string): Promise<ContinuityMark | null> {
  let text: string;
  try {
    text = await readFile(markPath(ledgerPath), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const parsed = JSON.parse(text) as unknown;
  if (!isMark(parsed)) throw new Error(`${markPath(ledgerPath)} is not a continuity mark`);
  return parsed;
}

function isMark(v: unknown): v is ContinuityMark {
  if (typeof v !== 'object' || v === null) return false;
  const m = v as Record<string, unknown>;
  if (!Number.isSafeInteger(m.position) || !Number.isSafeInteger(m.at)) return false;
  if (m.window === undefined) return true;
  const w = m.window as Record<string, unknown> | null;
  return typeof w === 'object' && w !== null && Number.isSafeInteger(w.wentBackAt) && Number.isSafeInteger(w.endsAt);
}

/**
 * Writes the mark durably: a temporary file synced, renamed over the last mark, the folder synced (a power cut
 * leaves the old mark or the new one, never half of one). Private as the ledger is.
 */
export async function writeFileMark(ledgerPath: string, mark: ContinuityMark): Promise<void> {
  const target = markPath(ledgerPath);
  const tmp = `${target}.${process.pid}.tmp`;
  const file = await open(tmp, 'w', LEDGER_FILE_MODE);
  try {
    await file.writeFile(`${JSON.stringify(mark)}\n`, 'utf8');
    await file.sync();
  } finally {
    await file.close();
  }
  try {
    await rename(tmp, target);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  const dir = await open(dirname(target), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
