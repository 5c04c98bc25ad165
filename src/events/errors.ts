/** Stable codes of the store's failures: callers switch on these, never on message text. */
export type StoreErrorCode = 'LEDGER_UNAVAILABLE' | 'LEDGER_CORRUPT' | 'LEDGER_CLOSED';

/**
 * Every failure a store reports: the ledger could not be read or written, so the account system must not be
 * called. Domain outcomes (lost a race, refused) are values, never a StoreError.
 */
export abstract class StoreError extends Error {
  abstract readonly code: StoreErrorCode;
}

/** The ledger could not be read or written (I/O, lock, full disk, writer gone). */
export class LedgerUnavailableError extends StoreError {
  override readonly name: string = 'LedgerUnavailableError';
  readonly code: StoreErrorCode = 'LEDGER_UNAVAILABLE';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The store was closed by this process; nothing more is read or written through it. */
export class LedgerClosedError extends LedgerUnavailableError {
  override readonly name = 'LedgerClosedError';
  override readonly code = 'LEDGER_CLOSED';
  constructor() {
    super('ledger is closed');
  }
}

/** Opened without leave to create (every command but `serve`), and there is no ledger yet where `--db` points. */
export class LedgerMissingError extends LedgerUnavailableError {
  override readonly name = 'LedgerMissingError';
  constructor(message = 'no ledger there') {
    super(message);
  }
}

/** A row read back did not decode: the file was changed by something other than guidgate. */
export class LedgerCorruptError extends StoreError {
  override readonly name = 'LedgerCorruptError';
  readonly code = 'LEDGER_CORRUPT';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export function isStoreError(err: unknown): err is StoreError {
  return err instanceof StoreError;
}
