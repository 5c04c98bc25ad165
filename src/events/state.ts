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
}
