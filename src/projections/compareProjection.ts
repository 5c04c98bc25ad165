import type { LedgerState } from '../events/state.js';
import type { ProjectionDifference } from '../events/store.js';
import { diffStates } from './ledgerRow.js';

/** The projection's rows against a fold of the log (`foldLog`): what `rebuild --verify` reports. */
export function compareProjection(rebuilt: ReadonlyMap<string, LedgerState>, rows: readonly LedgerState[]): ProjectionDifference[] {
  const diffs: ProjectionDifference[] = [];
  const seen = new Set<string>();
  for (const row of rows) {
    seen.add(row.guid);
    const want = rebuilt.get(row.guid);
    if (want === undefined) {
      diffs.push({ guid: row.guid, kind: 'extra', columns: [], ledger: row, rebuilt: null });
      continue;
    }
    const columns = diffStates(row, want);
    if (columns.length > 0) diffs.push({ guid: row.guid, kind: 'differs', columns, ledger: row, rebuilt: want });
  }
  for (const [guid, want] of rebuilt) {
    if (!seen.has(guid)) diffs.push({ guid, kind: 'missing', columns: [], ledger: null, rebuilt: want });
  }
  return diffs;
}
