import { LEDGER_COLUMNS, type LedgerRow } from '../../projections/ledgerRow.js';

/** The PostgreSQL type of each ledger column, in `LEDGER_COLUMNS` order (see the schema). */
const PG_TYPES: Record<(typeof LEDGER_COLUMNS)[number], string> = {
  guid: 'text', status: 'text', code: 'text', request: 'text', response: 'text', fingerprint: 'text', channel: 'text',
  attempts: 'integer', created_at: 'bigint', updated_at: 'bigint', last_seq: 'integer', sent_at: 'bigint', timeout_ms: 'bigint', failed_by_inquiry: 'integer',
};

export const LEDGER_COLUMN_LIST = LEDGER_COLUMNS.join(', ');

/** `$1::text[], $2::text[], …`: one array parameter per ledger column, for a multi-row `unnest`. */
export const LEDGER_ARRAY_PARAMS = LEDGER_COLUMNS.map((c, i) => `$${i + 1}::${PG_TYPES[c]}[]`).join(', ');

/** Rows as one array per column, in the order of `LEDGER_ARRAY_PARAMS`. */
export function ledgerColumnArrays(rows: readonly LedgerRow[]): unknown[][] {
  return LEDGER_COLUMNS.map((c) => rows.map((r) => r[c]));
}
