import { chmodSync, closeSync, fchmodSync, mkdirSync, openSync, readSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { migrate, SCHEMA_VERSION } from './schema.js';

/**
 * The ledger as a file on disk: created private, recognised before SQLite touches it, and identified by
 * (device, inode) so that a file deleted or replaced under a running process can be noticed.
 */

/** A ledger holds full account numbers: only its owner may read it. */
export const LEDGER_FILE_MODE = 0o600;
export const LEDGER_DIR_MODE = 0o700;

const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');

/** The file is not a guidgate ledger this guidgate can open; `message` says why. Nothing was changed. */
export class NotALedgerError extends Error {
  override readonly name = 'NotALedgerError';
}

export interface FileIdentity {
  readonly dev: bigint;
  readonly ino: bigint;
}

/** The identity of the file at `path` now, or null when there is none. */
export function fileIdentity(path: string): FileIdentity | null {
  const st = statSync(path, { bigint: true, throwIfNoEntry: false });
  return st === undefined ? null : { dev: st.dev, ino: st.ino };
}

/**
 * Makes sure `path` can be opened as a ledger without SQLite changing anything it should not: a missing file
 * (and every missing folder above it) is created readable by the owner only, whatever the umask; an existing
 * file is checked to be a guidgate ledger (or empty) and is otherwise refused with NotALedgerError, untouched.
 * SQLite creates the -wal and -shm files with the mode of the database file.
 */
export function prepareLedgerFile(path: string): void {
  createPrivateDirs(dirname(resolve(path)));
  let fd: number;
  try {
    fd = openSync(path, 'wx', LEDGER_FILE_MODE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    checkLedgerFile(path);
    return;
  }
  try {
    fchmodSync(fd, LEDGER_FILE_MODE);
  } finally {
    closeSync(fd);
  }
}

function createPrivateDirs(dir: string): void {
  const missing: string[] = [];
  for (let d = dir; statSync(d, { throwIfNoEntry: false }) === undefined; d = dirname(d)) {
    missing.unshift(d);
    if (dirname(d) === d) break;
  }
  for (const d of missing) {
    try {
      mkdirSync(d, { mode: LEDGER_DIR_MODE });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') continue; // another process made it first
      throw err;
    }
    chmodSync(d, LEDGER_DIR_MODE);
  }
}

/**
 * The cheap check at start, reading only: an empty file is a new ledger; otherwise the SQLite header, a
 * schema version no newer than this guidgate's, and the two tables with their columns. Throws
 * NotALedgerError with the reason; changes nothing (no migration, no switch to WAL).
 */
export function checkLedgerFile(path: string): void {
  const header = Buffer.alloc(100);
  const fd = openSync(path, 'r');
  let size: number;
  try {
    size = readSync(fd, header, 0, header.length, 0);
  } finally {
    closeSync(fd);
  }
  if (size === 0) return;
  if (size < header.length || !header.subarray(0, SQLITE_MAGIC.length).equals(SQLITE_MAGIC)) {
    throw new NotALedgerError(`${path} is not a guidgate ledger: not an SQLite database (its header is not "SQLite format 3")`);
  }
  let db: Database.Database;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new NotALedgerError(`${path} is not a guidgate ledger: SQLite cannot open it (${err instanceof Error ? err.message : String(err)})`);
  }
  try {
    // One read transaction: the version and the tables as of one instant. Read apart, another process's
    // migration could commit between them (version 0, then its tables), and a new ledger would look foreign.
    const problem = db.transaction(() => schemaProblem(db))();
    if (problem !== null) throw new NotALedgerError(`${path} is not a guidgate ledger: ${problem}`);
  } catch (err) {
    if (err instanceof NotALedgerError) throw err;
    throw new NotALedgerError(`${path} is not a guidgate ledger: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    db.close();
  }
}

/** What is wrong with the schema of `db` for this guidgate, or null. */
function schemaProblem(db: Database.Database): string | null {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > SCHEMA_VERSION) return `its schema version ${version} is newer than this guidgate's (${SCHEMA_VERSION}); upgrade guidgate`;
  const tables = columnsByTable(db);
  if (version === 0) {
    // A new file that was never migrated is fine; an SQLite file of something else is not.
    return tables.size === 0 ? null : `schema version 0 with tables of something else (${[...tables.keys()].join(', ')})`;
  }
  // An older version has that version's columns; it is migrated forward after this check.
  for (const [table, columns] of expectedColumns(version)) {
    const found = tables.get(table);
    if (found === undefined) return `table ${table} is missing`;
    if (found.join(',') !== columns.join(',')) {
      return `table ${table} has columns (${found.join(', ')}), expected (${columns.join(', ')})`;
    }
  }
  return null;
}

function columnsByTable(db: Database.Database): Map<string, string[]> {
  const names = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").pluck().all() as string[];
  return new Map(names.map((n) => [n, (db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all(n) as string[])]));
}

const expected = new Map<number, Map<string, string[]>>();
/** The tables and columns of a ledger at schema `version`, read from the migrations themselves. */
function expectedColumns(version: number): Map<string, string[]> {
  const known = expected.get(version);
  if (known !== undefined) return known;
  const mem = new Database(':memory:');
  try {
    migrate(mem, version);
    const columns = columnsByTable(mem);
    expected.set(version, columns);
    return columns;
  } finally {
    mem.close();
  }
}

/** A warning when an existing ledger file can be read by group or others (it holds full account numbers). */
export function looseModeWarning(path: string): string | null {
  const st = statSync(path, { throwIfNoEntry: false });
  if (st === undefined || (st.mode & 0o077) === 0) return null;
  const mode = (st.mode & 0o777).toString(8).padStart(4, '0');
  return `ledger file ${path} is readable by group or others (mode ${mode}); it holds full account numbers: chmod 600 it (and its -wal and -shm)`;
}
