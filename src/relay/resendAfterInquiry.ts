import { DEFAULT_MIN_AGE_MS, oldEnoughToAsk, type Command, type ResendInquiry } from '../events/decide.js';
import { mayHaveArrived, type LedgerState } from '../events/state.js';
import type { EventLog, ExecuteResult, StoreResult } from '../events/store.js';
import type { AccountClient } from './accountClient.js';
import type { Metrics } from './metrics.js';

export interface ResendDeps {
  readonly store: EventLog;
  readonly account: AccountClient;
  readonly clock: () => number;
  readonly metrics?: Metrics | undefined;
}

/**
 * Asks the account system about a row that may have arrived (CONTRACT.md §7), unless its last Sent is too young
 * for a 404 to mean anything: then nothing is asked and `decide` refuses the resend as too young.
 */
export async function inquireBeforeResend(deps: Omit<ResendDeps, 'store'>, row: LedgerState, minAgeMs: number): Promise<ResendInquiry> {
  const at = deps.clock();
  if (!oldEnoughToAsk(row, at, minAgeMs)) return { seq: row.lastSeq, at, answer: { kind: 'unknown' } };
  const answer = await deps.account.inquire(row.guid);
  deps.metrics?.inquiry(answer.kind === 'unknown' && !answer.reached ? 'unreachable' : answer.kind);
  return {
    seq: row.lastSeq,
    at,
    answer: answer.kind === 'processed' ? { kind: 'processed', code: answer.code, response: answer.body } : { kind: answer.kind },
  };
}

/**
 * The resend of an existing row, shared by a channel's resend and `reprocess`: a row that may have arrived is
 * inquired about first (outside the write transaction), then the Submit or Send carries the answer into `store.execute`,
 * where `decide` takes it with the row as it is then. Applied, the row is SENT (send it) or DONE (the inquiry
 * found it: answer from the stored bytes).
 */
export async function resendAfterInquiry(deps: ResendDeps, row: LedgerState, command: Extract<Command, { type: 'Submit' | 'Send' }>): StoreResult<ExecuteResult> {
  const inquiry = mayHaveArrived(row) ? await inquireBeforeResend(deps, row, command.minAgeMs ?? DEFAULT_MIN_AGE_MS) : undefined;
  return deps.store.execute(row.guid, inquiry === undefined ? command : { ...command, inquiry });
}
