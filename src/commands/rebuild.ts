import * as E from 'fp-ts/lib/Either.js';
import type { LedgerMaintenance, ProjectionDifference, StoreResult } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import { stateToRow, type LedgerRow } from '../projections/ledgerRow.js';

/** Columns whose values are the raw request/response bytes: never printed (account numbers). */
const RAW_COLUMNS: ReadonlySet<string> = new Set(['request', 'response']);

export interface DifferenceView {
  readonly guid: string;
  readonly kind: ProjectionDifference['kind'];
  readonly columns: readonly string[];
  /** Per differing column, the ledger's value and the log's; raw request/response bytes are not shown. */
  readonly values: Record<string, { ledger: unknown; log: unknown }>;
}

function column(state: LedgerState | null, c: string): unknown {
  if (state === null) return null;
  if (RAW_COLUMNS.has(c)) return '(raw bytes, not shown)';
  return stateToRow(state)[c as keyof LedgerRow];
}

export function differenceView(d: ProjectionDifference): DifferenceView {
  const values: Record<string, { ledger: unknown; log: unknown }> = {};
  for (const c of d.columns) values[c] = { ledger: column(d.ledger, c), log: column(d.rebuilt, c) };
  return { guid: d.guid, kind: d.kind, columns: d.columns, values };
}

/** `guidgate rebuild --verify`: the projection compared with a fold of the log; changes nothing. */
export async function verifyLedger(store: LedgerMaintenance): StoreResult<DifferenceView[]> {
  return E.map((diffs: ProjectionDifference[]) => diffs.map(differenceView))(await store.verifyProjection());
}

/** `guidgate rebuild`: the projection replaced by a fold of the log. */
export function rebuildLedger(store: LedgerMaintenance): StoreResult<{ rows: number }> {
  return store.rebuildProjection();
}
