import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A real file system of a few megabytes that a test fills up and frees again. */
export interface SmallDisk {
  /** Where it is mounted. */
  readonly path: string;
  /** Writes a file until the file system has no byte left (ENOSPC at a one-byte write). */
  fill(): void;
  /** Removes that file. */
  free(): void;
  /** Unmounts it and removes the mount point (the test's processes on it must have ended). */
  remove(): void;
}

/**
 * A tmpfs of `size` (`2m`, `16m`) on a new folder, owned by `uid` if given. Mounting needs root (CAP_SYS_ADMIN):
 * without it the tests that need a full disk are skipped with a message, except under `CI=true`, where they fail.
 */
export function mountSmallDisk(size: string, opts: { uid?: number } = {}): SmallDisk | null {
  const path = mkdtempSync(join(tmpdir(), 'guidgate-disk-'));
  const options = [`size=${size}`, 'mode=0700', ...(opts.uid === undefined ? [] : [`uid=${opts.uid}`])].join(',');
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', path], { stdio: 'pipe' });
  } catch (err) {
    rmSync(path, { recursive: true, force: true });
    const why = err instanceof Error ? err.message.split('\n')[0] : String(err);
    if (process.env['CI'] === 'true') throw new Error(`cannot mount a tmpfs (${why}); CI runs the full-disk tests as root`);
    console.warn(`full-disk tests skipped: cannot mount a tmpfs (${why}); run them as root`);
    return null;
  }
  const filler = join(path, 'filler');
  return {
    path,
    fill() {
      const fd = openSync(filler, 'a');
      try {
        // Big chunks first, then ever smaller ones, until not one more byte fits.
        for (let chunk = 1 << 20; chunk >= 1; chunk >>= 2) {
          const bytes = Buffer.alloc(chunk);
          for (;;) {
            try {
              if (writeSync(fd, bytes) < chunk) break;
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
              throw err;
            }
          }
        }
      } finally {
        closeSync(fd);
      }
    },
    free() {
      rmSync(filler, { force: true });
    },
    remove() {
      execFileSync('umount', [path], { stdio: 'pipe' });
      rmSync(path, { recursive: true, force: true });
    },
  };
}
