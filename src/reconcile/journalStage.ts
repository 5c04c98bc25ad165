import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { journalRange } from './instant.js';
import type { JournalEntry, ReconcileWindow } from './types.js';

/** Every entry of one GUID the run read, and whether one of them was applied inside the window itself. */
export interface JournalGroup {
  readonly guid: string;
  readonly entries: JournalEntry[];
  readonly inWindow: boolean;
}

/**
 * The journal staged on disk, keyed by GUID: the day's entries are never held in memory as objects.
 * `groups()` walks them in ascending GUID order: SQLite's BINARY order of the UTF-8 text, which is code point
 * order (compareGuids). Close it to delete the file.
 */
export interface StagedJournal {
  /** Entries staged (inside the journal range). */
  readonly staged: number;
  /** Entries read but applied outside the range: checked, not staged. */
  readonly outsideRange: number;
  groups(): Generator<JournalGroup>;
  close(): void;
}

/**
 * Code point order, the order SQLite's BINARY collation gives UTF-8 text (PostgreSQL's COLLATE "C" too): the
 * ledger side must arrive in it. JavaScript's `<` compares UTF-16 units, which differs only between a surrogate
 * pair (U+10000 and up) and U+E000–U+FFFF.
 */
export function compareGuids(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys && (xs ? y >= 0xe000 : x >= 0xe000)) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

export interface StageOptions {
  /** Where the temporary file goes (a private folder made inside it, removed on close); the OS temp folder by default. */
  readonly dir?: string;
}

/**
 * Streams the journal's entries into a temporary SQLite file (no durability needed: it lives for one run),
 * keeping only those applied in [from − pending, to + pending); `groups()` reads them back sorted by GUID.
 */
export async function stageJournal(batches: AsyncIterable<JournalEntry[]>, window: ReconcileWindow, opts: StageOptions = {}): Promise<StagedJournal> {
  const folder = mkdtempSync(join(opts.dir ?? tmpdir(), 'guidgate-reconcile-'));
  let db: Database.Database | null = null;
  const discard = (): void => {
    if (db?.open === true) db.close();
    rmSync(folder, { recursive: true, force: true });
  };
  try {
    db = new Database(join(folder, 'journal.db'));
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('cache_size = -16384'); // 16 MiB: the file may be far larger than what we keep in memory
    db.exec(`CREATE TABLE entry (
      guid TEXT NOT NULL, line INTEGER NOT NULL, ref TEXT NOT NULL, from_account TEXT NOT NULL, to_account TEXT NOT NULL,
      amount TEXT NOT NULL, currency TEXT, applied_at INTEGER NOT NULL)`);
    const insert = db.prepare('INSERT INTO entry VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
    const range = journalRange(window);
    let staged = 0;
    let outsideRange = 0;
    const stageBatch = db.transaction((batch: readonly JournalEntry[]) => {
      for (const e of batch) {
        if (e.appliedAt < range.from || e.appliedAt >= range.to) {
          outsideRange++;
          continue;
        }
        insert.run(e.guid, e.line, e.ref, e.from, e.to, e.amount.toString(), e.currency, e.appliedAt);
        staged++;
      }
    });
    for await (const batch of batches) stageBatch(batch);
    // No index: one sort when the read starts (SQLite's external merge sort, in bounded memory) costs less than
    // an index built after the load or kept during it, and the rows then come in order without a lookup each.
    const read = db.prepare('SELECT guid, line, ref, from_account, to_account, amount, currency, applied_at FROM entry ORDER BY guid, line').raw(true);
    const database = db;
    return {
      staged,
      outsideRange,
      *groups() {
        let current: { guid: string; entries: JournalEntry[]; inWindow: boolean } | null = null;
        for (const row of read.iterate() as IterableIterator<[string, number, string, string, string, string, string | null, number]>) {
          const [guid, line, ref, from, to, amount, currency, appliedAt] = row;
          if (current !== null && current.guid !== guid) {
            yield current;
            current = null;
          }
          current ??= { guid, entries: [], inWindow: false };
          current.entries.push({ guid, ref, from, to, amount: BigInt(amount), currency, appliedAt, line });
          if (appliedAt >= window.from && appliedAt < window.to) current.inWindow = true;
        }
        if (current !== null) yield current;
      },
      close: () => {
        if (database.open) database.close();
        rmSync(folder, { recursive: true, force: true });
      },
    };
  } catch (err) {
    discard();
    throw err;
  }
}
