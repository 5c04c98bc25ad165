import * as E from 'fp-ts/lib/Either.js';
import type { EventAudit, EventOf } from '../events/codecs.js';
import type { EventLog, ExecuteResult, StoreResult } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import type { CallOutcome } from '../account/accountClient.js';

export type Recorded =
  /** The outcome is in the ledger; `state` is the row after it. */
  | { readonly recorded: true; readonly state: LedgerState }
  /**
   * Not the row's outcome: someone moved first (the sweep, an inquiry, a later attempt); `state` is the row as it is
   * now. `stale`: the call's definite answer, kept in the log as a StaleAnswer all the same (never dropped).
   */
  | { readonly recorded: false; readonly state: LedgerState | null; readonly stale?: EventOf<'StaleAnswer'>['data'] };

/**
 * Records the outcome of one call to the account system for the attempt `sent` (the row as its Sent left it), by
 * compare-and-set on the row being SENT at that attempt. The relay and `reprocess` both use it: one code path for
 * every send. A Left: the ledger could not be written, the call was made, so the caller must treat the outcome as
 * unknown.
 */
export async function recordOutcome(store: EventLog, sent: LedgerState, outcome: CallOutcome, audit?: EventAudit): StoreResult<Recorded> {
  const { guid, attempts: attempt } = sent;
  const result = await store.execute(
    guid,
    outcome.kind === 'definite'
      ? { type: 'RecordAnswer', attempt, code: outcome.code, response: outcome.body, latencyMs: Math.round(outcome.latencyMs) }
      : outcome.kind === 'unknown'
        ? { type: 'RecordTimeout', attempt, reason: outcome.reason, detail: outcome.detail }
        : { type: 'RecordConnectFailure', attempt, reason: outcome.reason, detail: outcome.detail },
    audit,
    // Usually still the row as it is: the store decides on it without reading it again.
    { state: sent },
  );
  return E.map((r: ExecuteResult): Recorded => {
    if (r.kind === 'refused') return { recorded: false, state: r.refusal.state };
    const stale = r.events.find((e) => e.type === 'StaleAnswer');
    return stale?.type === 'StaleAnswer' ? { recorded: false, state: r.state, stale: stale.data } : { recorded: true, state: r.state };
  })(result);
}
