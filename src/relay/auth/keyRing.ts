import * as E from 'fp-ts/lib/Either.js';
import { readKeysFile, type Key, type KeysFileError } from './keysFile.js';

/** The keys `serve --keys` accepts right now; `reload` (on SIGHUP) swaps them only for a file that parses whole. */
export interface KeyRing {
  readonly path: string;
  keys(): readonly Key[];
  /** The new key count, or why the file was refused (the old keys then stay in force). */
  reload(): E.Either<KeysFileError, number>;
}

export function openKeyRing(path: string): E.Either<KeysFileError, KeyRing> {
  const first = readKeysFile(path);
  if (E.isLeft(first)) return first;
  let current: readonly Key[] = first.right;
  return E.right({
    path,
    keys: () => current,
    reload() {
      const next = readKeysFile(path);
      if (E.isLeft(next)) return next;
      current = next.right;
      return E.right(current.length);
    },
  });
}
