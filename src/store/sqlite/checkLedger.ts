import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { checkLedgerFile, NotALedgerError } from './ledgerFile.js';

export interface LedgerCheck {
  readonly path: string;
  readonly ok: boolean;
  /** Why not ok: the guidgate checks' reason, or SQLite's quick_check lines (at most MAX_PROBLEMS). */
  readonly problems: readonly string[];
  /** How long `PRAGMA quick_check` took; null when it did not run. */
  readonly quickCheckMs: number | null;
}

const MAX_PROBLEMS = 20;

/**
 * `guidgate check` and `serve --check`: the guidgate checks every open makes (SQLite header, schema
 * version, tables and columns), then SQLite's `PRAGMA quick_check` over every page (b-tree structure,
 * record formats, NOT NULL and CHECK constraints; not index against table). Reads only: it opens the
 * file read-only and creates nothing. Takes time in proportion to the file's size (docs/operating.md, `check`).
 */
export function checkLedger(path: string): LedgerCheck {
  if (!existsSync(path)) return { path, ok: false, problems: [`no ledger at ${path}`], quickCheckMs: null };
  try {
    checkLedgerFile(path);
  } catch (err) {
    if (!(err instanceof NotALedgerError)) throw err;
    return { path, ok: false, problems: [err.message], quickCheckMs: null };
  }
  const started = performance.now();
  let db: Database.Database | null = null;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
    const lines = db.prepare(`PRAGMA quick_check(${MAX_PROBLEMS})`).pluck().all() as string[];
    const ok = lines.length === 1 && lines[0] === 'ok';
    return { path, ok, problems: ok ? [] : lines, quickCheckMs: Math.round(performance.now() - started) };
  } catch (err) {
    // SQLite refuses outright when a page it needs is unreadable (SQLITE_CORRUPT, SQLITE_NOTADB).
    const why = err instanceof Error ? err.message : String(err);
    return { path, ok: false, problems: [`SQLite: ${why}`], quickCheckMs: Math.round(performance.now() - started) };
  } finally {
    db?.close();
  }
}
