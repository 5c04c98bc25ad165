import type { Status } from './codecs.js';

/**
 * One GUID's state: exactly what the `ledger` projection row holds.
 * `sentAt` and `timeoutMs` belong to the last `Sent`; the orphan sweep and `resolve --min-age` need them.
 */
export interface LedgerState {
  readonly guid: string;
  readonly status: Status;
  /** Definite code when DONE/PURGED, E901 when UNKNOWN, E902 when FAILED, null while RECEIVED/SENT. */
  readonly code: string | null;
  readonly request: string | null;
  readonly response: string | null;
  readonly fingerprint: string;
  /** The key that claimed the GUID; null when it was claimed without keys. */
  readonly channel: string | null;
  readonly attempts: number;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly lastSeq: number;
  readonly sentAt: number | null;
  readonly timeoutMs: number | null;
  /**
   * FAILED through an inquiry that said absent, not through a refused connection: the last attempt left, and an
   * account system slower than the inquiry may still apply it. Also FAILED and then an older attempt answered
   * (`StaleAnswer`), or FAILED by a refused connection of an attempt during which an older one answered: one of its
   * attempts reached the account system. Such a row is sent again only after a fresh inquiry (CONTRACT.md §7). Set
   * on a SENT row by such an answer, for its ConnectFailed to keep; false in every other case.
   */
  readonly failedByInquiry: boolean;
}

/** A FAILED row whose last attempt may have reached the account system: a resend must inquire first. */
export function mayHaveArrived(state: LedgerState): boolean {
  return state.status === 'FAILED' && state.failedByInquiry;
}
