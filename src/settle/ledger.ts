import type { Status } from '../events/codecs.js';
import type { LedgerReadModel } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import { pagedRows, type RowFilter } from './rows.js';

export interface LedgerListOptions {
  readonly statuses?: readonly Status[] | undefined;
  /** Only rows whose last event is older than now − this. */
  readonly olderThanMs?: number | undefined;
  readonly limit?: number | undefined;
  /** Only rows after this GUID (the operator API's page cursor). */
  readonly afterGuid?: string | undefined;
  readonly clock?: () => number;
}

/** The row as `guidgate ledger` shows it: never the raw request (it holds account numbers). */
export type LedgerView = Omit<LedgerState, 'request'>;

export function ledgerView(row: LedgerState): LedgerView {
  const { request: _request, ...view } = row;
  return view;
}

/** `guidgate ledger`: the matching rows in GUID order, read a page at a time. */
export function listLedger(store: LedgerReadModel, opts: LedgerListOptions = {}): AsyncGenerator<LedgerState> {
  const clock = opts.clock ?? Date.now;
  const filter: RowFilter = {
    ...(opts.statuses === undefined ? {} : { statuses: opts.statuses }),
    ...(opts.olderThanMs === undefined ? {} : { updatedBefore: clock() - opts.olderThanMs }),
  };
  return pagedRows(store, filter, { limit: opts.limit, afterGuid: opts.afterGuid });
}
