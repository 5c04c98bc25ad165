import type { StoredEvent } from '../events/codecs.js';
import { LedgerCorruptError } from '../events/errors.js';
import { evolve } from '../events/evolve.js';
import type { LedgerState } from '../events/state.js';
import type { ProjectionDifference } from '../events/store.js';
import { diffStates } from './ledgerRow.js';

/** Folds the log (in global order) into one state per GUID with the same `evolve` the projection uses. */
export function foldLog(events: Iterable<StoredEvent>): Map<string, LedgerState> {
  const states = new Map<string, LedgerState>();
  for (const e of events) {
    const prev = states.get(e.guid) ?? null;
    const expected = (prev?.lastSeq ?? -1) + 1;
    if (e.seq !== expected) throw new LedgerCorruptError(`${e.guid}: seq ${e.seq} where ${expected} was due (gap in the log)`);
    states.set(e.guid, evolve(prev, e, e.guid));
  }
  return states;
}

export function compareProjection(rebuilt: Map<string, LedgerState>, rows: readonly LedgerState[]): ProjectionDifference[] {
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
