import * as E from 'fp-ts/lib/Either.js';
import { isStoreError, LedgerUnavailableError, type StoreError } from './errors.js';

/**
 * What every method of the store contract gives back: a promise that always resolves, to `Right` with the value
 * or to `Left` with the `StoreError` (a stable `code` and the `cause`). A store never rejects. It is the value
 * of an fp-ts `TaskEither<StoreError, T>`: `() => store.getLedger(guid)` is one.
 */
export type StoreResult<T> = Promise<E.Either<StoreError, T>>;

/** Anything a store step threw as a `StoreError`: a StoreError as it is, anything else unavailable, with it as cause. */
export function toStoreError(err: unknown, what: string): StoreError {
  if (isStoreError(err)) return err;
  const detail = err instanceof Error ? err.message : String(err);
  return new LedgerUnavailableError(`ledger ${what} failed: ${detail}`, { cause: err });
}

/**
 * The boundary inside a store: runs `step` (sync or async); what it returns is the Right, what it throws or
 * rejects with the Left. Written without an async frame: it wraps every write of the hot path.
 */
export function storeResult<T>(what: string, step: () => T | Promise<T>): StoreResult<T> {
  try {
    return Promise.resolve(step()).then(
      (value) => E.right(value),
      (err: unknown) => E.left(toStoreError(err, what)),
    );
  } catch (err) {
    return Promise.resolve(E.left(toStoreError(err, what)));
  }
}

/**
 * For a caller whose whole run ends on a ledger failure (a command's library function under `withLedger`, a
 * test, a bench): the Right's value, or the Left thrown. The relay never uses it: it turns a Left into E503.
 */
export async function orThrow<T>(result: StoreResult<T>): Promise<T> {
  const r = await result;
  if (E.isLeft(r)) throw r.left;
  return r.right;
}
