import { closeSync, fdatasync, fdatasyncSync, fstatSync, fsyncSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * The durable half of a commit at synchronous=FULL, taken off the event loop. The writing connection runs at
 * synchronous=NORMAL: a COMMIT writes its WAL frames and returns without waiting for the disk (NORMAL still
 * syncs the WAL before every checkpoint, the database file after it, and the WAL header when the WAL starts
 * over). Before any unit of a committed batch is answered, `sync()` flushes the WAL to disk with fdatasync on
 * libuv's thread pool. That is the order FULL keeps (a commit's frames on disk before anything acts on it),
 * without stopping the request thread for the disk, as SQLite's own FULL would: it syncs inside COMMIT.
 *
 * One fdatasync covers every frame written before it, whoever wrote it: the WAL is one file, and a checkpoint
 * never starts the WAL over before the frames it copied are synced into the database file.
 */
export interface WalSync {
  /** Resolves once everything committed so far is on disk; rejects with the system's error. */
  sync(): Promise<void>;
  close(): void;
}

/**
 * The WAL of the database file SQLite has open at `dbFile` (its own path, symbolic links resolved: what
 * `PRAGMA database_list` gives; a WAL is named after that file, not after a link to it). The WAL must exist (a
 * connection in WAL mode creates it at its first read). Its folder is synced once here, as SQLite syncs the
 * folder of a WAL it has just created, so that the file itself survives a power cut. The WAL keeps its inode
 * while any connection has the database open (this process's does); a descriptor whose file has been unlinked
 * meanwhile is refused at the next sync, since syncing it would put nothing that matters on disk.
 */
export function walSync(dbFile: string): WalSync {
  const walPath = `${dbFile}-wal`;
  const fd = openSync(walPath, 'r');
  try {
    const opened = fstatSync(fd);
    const atPath = statSync(walPath);
    if (opened.ino !== atPath.ino || opened.dev !== atPath.dev) throw new Error(`${walPath} changed while it was being opened`);
    const dir = openSync(dirname(walPath), 'r');
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
    // What an earlier process committed and left unsynced (an outcome answered at its commit) is on disk from
    // here: the writer counts everything in the file at open as synced (its continuity mark's position).
    fdatasyncSync(fd);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  let closed = false;
  return {
    sync: () =>
      new Promise<void>((ok, fail) => {
        if (closed) return fail(new Error('the WAL is closed'));
        fdatasync(fd, (err) => {
          if (err) return fail(err);
          try {
            // Of the descriptor, not the path: it is the file this descriptor syncs that must still be the WAL.
            if (fstatSync(fd).nlink === 0) return fail(new Error(`${walPath} was deleted while the ledger had it open`));
          } catch (statErr) {
            return fail(statErr);
          }
          ok();
        });
      }),
    close() {
      if (closed) return;
      closed = true;
      closeSync(fd);
    },
  };
}
