import type { Status } from '../events/codecs.js';
import { ledgerTime } from '../events/policy.js';
import type { LedgerClock, LedgerReadModel } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import { orThrow } from '../events/storeResult.js';
import { pagedRows, type RowFilter } from './rows.js';

export interface LedgerListOptions {
  readonly statuses?: readonly Status[] | undefined;
  /** Only rows whose last event is older than now − this. */
  readonly olderThanMs?: number | undefined;
  readonly limit?: number | undefined;
  /** `guid` (the default) or `updated`: the last change newest first. */
  readonly order?: 'guid' | 'updated' | undefined;
  /** Only rows after this GUID (the operator API's page cursor). */
  readonly afterGuid?: string | undefined;
  /** What `olderThanMs` is judged by; default the ledger's clock (`store.now()`). */
  readonly clock?: (() => number) | undefined;
}

/**
 * `guidgate ledger`, the operator API's `GET /v1/ledger`: the matching rows in GUID order (or newest change first),
 * read a page at a time.
 * A failing read (the ledger's clock, a page) is thrown, as `pagedRows` throws it.
 */
export async function* listLedger(store: LedgerReadModel & LedgerClock, opts: LedgerListOptions = {}): AsyncGenerator<LedgerState> {
  const updatedBefore = opts.olderThanMs === undefined ? undefined : (await orThrow(ledgerTime(store, opts.clock))) - opts.olderThanMs;
  const filter: RowFilter = {
    ...(opts.statuses === undefined ? {} : { statuses: opts.statuses }),
    ...(updatedBefore === undefined ? {} : { updatedBefore }),
    ...(opts.order === 'updated' ? { order: 'updated' as const } : {}),
  };
  yield* pagedRows(store, filter, { limit: opts.limit, afterGuid: opts.afterGuid });
}
