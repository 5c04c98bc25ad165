import { LedgerCorruptError, LedgerUnavailableError } from '../../events/errors.js';

/** The SQLSTATE of a PostgreSQL error, when `err` is one. */
export function sqlState(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : undefined;
}

/** Another transaction broke the key first (here: the events' `(guid, seq)` backstop). */
export const isUniqueViolation = (err: unknown): boolean => sqlState(err) === '23505';

/**
 * Serialization failure (SERIALIZABLE, distributed SQL engines) or deadlock: PostgreSQL rolled the whole
 * transaction back, nothing of it is durable, so the batch may simply run again.
 */
export const isRetryable = (err: unknown): boolean => sqlState(err) === '40001' || sqlState(err) === '40P01';

/** A write on a server that is read-only (25006): a demoted primary, a standby. The transaction is rolled back. */
export const isReadOnly = (err: unknown): boolean => sqlState(err) === '25006';

/**
 * The connection, not the statement, failed: no SQLSTATE at all (socket closed, refused), a connection
 * exception (08…) or the server shutting the session down (57P01–57P03, a restart or pg_terminate_backend).
 */
export function isConnectionLost(err: unknown): boolean {
  const state = sqlState(err);
  return state === undefined || /^(08|57P0[1-3])/.test(state);
}

/**
 * The one boundary: whatever PostgreSQL or the driver threw (refused connection, terminated backend,
 * timeout, constraint) means the ledger could not be read or written, so the account system must not be
 * called. A row that did not decode stays a `LedgerCorruptError`. The message names the operation and the
 * driver's message, never values bound to the statement.
 */
export function toLedgerError(err: unknown, what: string): LedgerUnavailableError | LedgerCorruptError {
  if (err instanceof LedgerCorruptError || err instanceof LedgerUnavailableError) return err;
  const state = sqlState(err);
  const message = err instanceof Error ? err.message : String(err);
  return new LedgerUnavailableError(`ledger ${what} failed (PostgreSQL${state === undefined ? '' : ` ${state}`}): ${message}`, { cause: err });
}

/** Runs `fn`, throwing only the ledger's own errors. */
export async function atBoundary<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toLedgerError(err, what);
  }
}
