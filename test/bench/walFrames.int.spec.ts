/**
 * The WAL census (bench/walFrames.ts) must count what SQLite appended, or its frames per transfer mean nothing: its
 * frames and commits are SQLite's own count of the log's frames and the transactions written, and each frame is
 * named after the B-tree that owns its page.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { countWhile, emptyCensus, framesByTree, readWal } from '../../bench/walFrames.js';
import { useTempDir } from '../support/tmp.js';

const tempDir = useTempDir();

function walDb(): { db: Database.Database; path: string } {
  const path = join(tempDir(), 'census.db');
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0'); // the log is never started over here
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT NOT NULL); CREATE INDEX t_k ON t (k)');
  return { db, path };
}

describe('the WAL census', () => {
  it("reads the frames of the current log: as many as SQLite counts, one commit frame per transaction", () => {
    const { db, path } = walDb();
    try {
      const before = readWal(`${path}-wal`).frames.length;
      const insert = db.prepare('INSERT INTO t (k) VALUES (?)');
      for (let tx = 0; tx < 5; tx++) db.transaction(() => { for (let i = 0; i < 200; i++) insert.run(`key-${tx}-${i}-${'x'.repeat(40)}`); })();
      const log = readWal(`${path}-wal`);
      const [{ log: sqliteFrames }] = db.pragma('wal_checkpoint(PASSIVE)') as [{ log: number }];
      expect(log.frames.length).toBe(sqliteFrames);
      expect(log.frames.slice(before).filter((f) => f.commit)).toHaveLength(5);
    } finally {
      db.close();
    }
  });

  it('counts what a load appended while it ran and names each page after its B-tree', async () => {
    const { db, path } = walDb();
    try {
      const insert = db.prepare('INSERT INTO t (k) VALUES (?)');
      let finished = 0;
      const load = (async () => {
        for (let tx = 0; tx < 40; tx++) {
          db.transaction(() => { for (let i = 0; i < 50; i++) insert.run(`${(tx * 7919 + i * 104729) % 100_000}-${'y'.repeat(60)}`); })();
          finished += 50;
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
      })();
      const census = emptyCensus();
      await countWhile(census, `${path}-wal`, () => finished, load, 5);
      expect(census.transfers).toBeGreaterThan(0);
      expect(census.commits).toBeGreaterThan(0);
      const trees = framesByTree(census, path);
      expect(trees.map((t) => t.tree).sort()).toEqual(expect.arrayContaining(['t', 't_k']));
      // Every frame counted is given to one tree.
      const framed = trees.reduce((sum, t) => sum + t.perTransfer * census.transfers, 0);
      expect(Math.round(framed)).toBe(census.frames);
    } finally {
      db.close();
    }
  });
});
