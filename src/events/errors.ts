/** The ledger could not be read or written: the account system must not be called. */
export class LedgerUnavailableError extends Error {
  override readonly name = 'LedgerUnavailableError';
  readonly code = 'LEDGER_UNAVAILABLE';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A row read back did not decode: the file was changed by something other than guidgate. */
export class LedgerCorruptError extends Error {
  override readonly name = 'LedgerCorruptError';
  readonly code = 'LEDGER_CORRUPT';
}
