import { LedgerUnavailableError } from '../../events/errors.js';
import type { ProjectionRow } from '../../events/store.js';
import { binaryArray, type ArrayElement, type ArrayEncoder } from './binaryArrays.js';

/** The PostgreSQL type of each ledger column this store's schema has (see schema.ts). */
const PG_TYPES: Readonly<Record<string, ArrayElement>> = {
  guid: 'text', status: 'text', code: 'text', request: 'text', response: 'text', fingerprint: 'text', channel: 'text',
  attempts: 'integer', created_at: 'bigint', updated_at: 'bigint', last_seq: 'integer', sent_at: 'bigint', timeout_ms: 'bigint', failed_by_inquiry: 'integer',
};

export interface LedgerColumns {
  readonly names: readonly string[];
  /** `guid, status, …` */
  readonly list: string;
  /** `$1::text[], $2::text[], …`: one array parameter per ledger column, for a multi-row `unnest`. */
  readonly arrayParams: string;
  /** Rows as one array per column, in the order of `arrayParams`: in the binary format (binaryArrays.ts) unless told. */
  arrays(rows: readonly ProjectionRow[], encode?: ArrayEncoder): unknown[];
}

/** The SQL for the projection's columns; a column this store's table does not have is refused at open. */
export function ledgerColumns(names: readonly string[]): LedgerColumns {
  const unknown = names.filter((c) => PG_TYPES[c] === undefined);
  if (unknown.length > 0) throw new LedgerUnavailableError(`the projection has columns the PostgreSQL ledger table does not: ${unknown.join(', ')}`);
  return {
    names,
    list: names.join(', '),
    arrayParams: names.map((c, i) => `$${i + 1}::${PG_TYPES[c]}[]`).join(', '),
    arrays: (rows, encode = binaryArray) => names.map((c) => encode(PG_TYPES[c]!, rows.map((r) => r[c]))),
  };
}
