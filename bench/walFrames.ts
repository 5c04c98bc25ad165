/**
 * What a SQLite commit writes, B-tree by B-tree: the frames a stretch of writes appended to the WAL, each frame
 * one page, named by the table or index that owns it (SQLite's `dbstat`). `writePath.js --frames` prints it per
 * transfer; docs/performance.md reads it.
 *
 * The WAL file (https://www.sqlite.org/fileformat.html#the_write_ahead_log): a 32-byte header whose two salts
 * every frame of the current log repeats in its own 24-byte header (the page number, and for a commit's last frame
 * the database size in pages, else 0), then the page. A log started over keeps its file and gets new salts, so the
 * frames of the current log are those from the start that carry the header's salts.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import Database from 'better-sqlite3';

export interface WalLog {
  /** The header's salts: another value means the log was started over. */
  readonly salts: string;
  readonly frames: ReadonlyArray<{ readonly page: number; readonly commit: boolean }>;
}

/** The frames of the log now in `walPath`. */
export function readWal(walPath: string): WalLog {
  const fd = openSync(walPath, 'r');
  try {
    const size = fstatSync(fd).size;
    const buf = Buffer.alloc(size);
    readSync(fd, buf, 0, size, 0);
    if (size < 32) return { salts: '', frames: [] };
    const pageSize = buf.readUInt32BE(8);
    const [salt1, salt2] = [buf.readUInt32BE(16), buf.readUInt32BE(20)];
    const frames: Array<{ page: number; commit: boolean }> = [];
    for (let at = 32; at + 24 + pageSize <= size; at += 24 + pageSize) {
      if (buf.readUInt32BE(at + 8) !== salt1 || buf.readUInt32BE(at + 12) !== salt2) break;
      frames.push({ page: buf.readUInt32BE(at), commit: buf.readUInt32BE(at + 4) !== 0 });
    }
    return { salts: `${salt1}:${salt2}`, frames };
  } finally {
    closeSync(fd);
  }
}

/** Frames counted over the stretches measured, and the transfers those stretches wrote. */
export interface FrameCensus {
  transfers: number;
  frames: number;
  commits: number;
  /** Frames by page, named later (a page's owner is read once, at the end). */
  readonly byPage: Map<number, number>;
}

export const emptyCensus = (): FrameCensus => ({ transfers: 0, frames: 0, commits: 0, byPage: new Map() });

/**
 * Counts, until `load` settles, what each stretch of `stretchMs` appended to the WAL and the transfers finished in it
 * (`finished()`: a running count), skipping a stretch in which the log was started over (SQLite starts it over once
 * a checkpoint has caught up). The load runs on throughout, so the commits are as big as under it; transfers in
 * flight at a stretch's edges are counted in one stretch and written in two, which evens out over many.
 */
export async function countWhile(census: FrameCensus, walPath: string, finished: () => number, load: Promise<void>, stretchMs = 20): Promise<void> {
  let done = false;
  // Settled either way here; a failed load is thrown by the `await` below, once.
  load.then(() => (done = true), () => (done = true));
  // Each stretch starts where the one before it ended: the log is read once per stretch.
  let before = readWal(walPath);
  let n0 = finished();
  while (!done) {
    await new Promise((resolve) => setTimeout(resolve, stretchMs));
    const after = readWal(walPath);
    const n1 = finished();
    if (after.salts === before.salts && after.frames.length >= before.frames.length) {
      const added = after.frames.slice(before.frames.length);
      census.transfers += n1 - n0;
      census.frames += added.length;
      census.commits += added.filter((f) => f.commit).length;
      for (const f of added) census.byPage.set(f.page, (census.byPage.get(f.page) ?? 0) + 1);
    }
    [before, n0] = [after, n1];
  }
  await load;
}

/** Frames per transfer by owning B-tree (page 1, which holds the schema, is `sqlite_schema`; pointer-map and free pages are `other`), largest first. */
export function framesByTree(census: FrameCensus, dbPath: string): Array<{ tree: string; perTransfer: number; perCommit: number }> {
  const db = new Database(dbPath, { readonly: true });
  try {
    const owner = new Map((db.prepare('SELECT pageno, name FROM dbstat').raw(true).all() as Array<[number, string]>).map(([page, name]) => [page, name]));
    const byTree = new Map<string, number>();
    for (const [page, n] of census.byPage) {
      const tree = owner.get(page) ?? 'other (pointer map, free)';
      byTree.set(tree, (byTree.get(tree) ?? 0) + n);
    }
    return [...byTree]
      .sort((a, b) => b[1] - a[1])
      .map(([tree, n]) => ({ tree, perTransfer: n / census.transfers, perCommit: n / census.commits }));
  } finally {
    db.close();
  }
}
