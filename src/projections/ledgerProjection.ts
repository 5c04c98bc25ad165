import type { LedgerProjection } from '../events/store.js';
import { LEDGER_COLUMNS, rowFromValues, rowToState, stateToRow } from './ledgerRow.js';
import { compareProjection } from './compareProjection.js';

/** The `ledger` projection as the value a store is opened with (src/store/openStore.ts hands it over). */
export const ledgerProjection: LedgerProjection = {
  columns: LEDGER_COLUMNS,
  rowFromValues,
  stateToRow,
  rowToState,
  compare: compareProjection,
  module: import.meta.url,
};
