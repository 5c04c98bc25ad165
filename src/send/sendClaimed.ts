import * as E from 'fp-ts/lib/Either.js';
import type { EventAudit } from '../events/codecs.js';
import type { StoreError } from '../events/errors.js';
import type { EventLog } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import type { AccountClient, CallOutcome } from '../account/accountClient.js';
import type { Metrics } from '../telemetry/metrics.js';
import { recordOutcome, type Recorded } from './recordOutcome.js';
import { monotonicNow, type MonotonicClock } from './sendWindow.js';
import { DEFAULTS } from '../shared/defaults.js';
import { propagating, ROOT_CONTEXT, SpanKind, startSpan, type Context, type Tracing } from '../telemetry/tracing.js';

/** Where a send's alarms go (a pino logger fits): a send withheld, an answer the row had moved past. */
export interface SendLogger {
  warn(line: Record<string, unknown>, message: string): void;
  error(line: Record<string, unknown>, message: string): void;
}

export interface SendDeps {
  readonly store: EventLog;
  readonly account: AccountClient;
  readonly metrics: Pick<Metrics, 'call' | 'sendWithheld' | 'staleAnswer'>;
  /** The send window of the caller's --grace (sendWindowMs in sendWindow.ts). */
  readonly sendWindowMs: number;
  /** What the send window is measured on; default `performance.now` (tests hand in a clock they move). */
  readonly monotonicNow?: MonotonicClock | undefined;
  /** Where a withheld send and a stale answer are logged; without it only the metrics count them. */
  readonly sendLog?: SendLogger | undefined;
  /** Where the ledger write's span goes (the account call's goes through the account client); default none recorded. */
  readonly tracing?: Tracing | undefined;
}

/** Leave to make one call, from the breaker (src/relay/breaker.ts): told how the call ended (null: no call was made after all). */
export interface CallPermit {
  done(outcome: CallOutcome['kind'] | null): void;
}

/** The audit of events that may lead to a send (a channel request's, reprocess's): the key and the flags in force. */
export function sendAudit(flags: { readonly timeoutMs: number; readonly maxAttempts: number; readonly minAgeMs?: number | undefined }, channel: string | undefined): EventAudit {
  return {
    ...(channel === undefined ? {} : { key: channel }),
    params: { timeoutMs: flags.timeoutMs, maxAttempts: flags.maxAttempts, minAgeMs: flags.minAgeMs ?? DEFAULTS.minAgeMs },
  };
}

/** What `sendClaimed` did: not sent (and why), or the call's outcome and what recording it gave. */
export type SendResult =
  | { readonly sent: false; readonly guid: string; readonly why: 'no-stored-request' }
  /** The claim was acknowledged past the send window (sendWindow.ts): no call; the row stays SENT for the sweep. */
  | { readonly sent: false; readonly guid: string; readonly why: 'claim-too-slow'; readonly elapsedMs: number; readonly windowMs: number }
  /** `recorded` is a Left when the call was made but the ledger could not record its outcome. */
  | { readonly sent: true; readonly guid: string; readonly call: CallOutcome; readonly recorded: E.Either<StoreError, Recorded> };

/** A row this process has just moved to SENT, and when (monotonic clock) it started the write that did it. */
export interface Claim {
  readonly state: LedgerState;
  readonly startedAt: number;
  /** The trace the send belongs to (the channel request's span, or the claim's kept trace): its spans are children of it. */
  readonly trace?: Context | undefined;
}

/**
 * Sends a row this process has just moved to SENT (its stored bytes, never the resend's) and records the
 * outcome. Every path that calls `POST /transfer` comes here (a channel's first send and its resend of a FAILED
 * row, `reprocess`, the operator API's reprocess): the one place the send window is kept (sendWindow.ts). It is
 * checked last, right before the call: past it, the sweep of another process may already own the row. The call's
 * deadline counts from the window's end at the latest, and the account client keeps it where the bytes leave.
 */
export async function sendClaimed(
  deps: SendDeps,
  claim: Claim,
  permit?: CallPermit,
  audit?: EventAudit,
): Promise<SendResult> {
  const { state: claimed } = claim;
  const { guid, attempts: attempt } = claimed;
  if (claimed.request === null) {
    permit?.done(null);
    return { sent: false, guid, why: 'no-stored-request' };
  }
  const clock = deps.monotonicNow ?? monotonicNow;
  const checkedAt = clock();
  const elapsedMs = checkedAt - claim.startedAt;
  if (elapsedMs > deps.sendWindowMs) {
    permit?.done(null);
    deps.metrics.sendWithheld('claim-too-slow');
    deps.sendLog?.warn(
      { guid, attempt, elapsedMs: Math.round(elapsedMs), windowMs: deps.sendWindowMs },
      'not sent: the claim was acknowledged after the send window (half of --grace); the row stays SENT and the sweep settles it',
    );
    return { sent: false, guid, why: 'claim-too-slow', elapsedMs, windowMs: deps.sendWindowMs };
  }
  const parent = claim.trace ?? ROOT_CONTEXT;
  // The window's end on the account client's clock: a call starting later keeps the deadline of one starting then.
  const windowEnd = (clock === monotonicNow ? checkedAt : monotonicNow()) + deps.sendWindowMs - elapsedMs;
  const call = await deps.account.transfer(claimed.request, guid, { parent, attempt }, windowEnd);
  permit?.done(call.kind);
  deps.metrics.call(call.kind, call.latencyMs);
  const write = startSpan(deps.tracing ?? propagating, 'ledger record outcome', SpanKind.INTERNAL, parent, { 'guidgate.guid': guid, 'guidgate.attempt': attempt });
  const recorded = await recordOutcome(deps.store, claimed, call, audit);
  write.span.end();
  if (E.isRight(recorded) && recorded.right.recorded === false && recorded.right.stale !== undefined) staleAnswerAlarm(deps, guid, recorded.right.stale);
  return { sent: true, guid, call, recorded };
}

/** An answer the row had moved past: counted, and logged as what it may mean. */
function staleAnswerAlarm(deps: Pick<SendDeps, 'metrics' | 'sendLog'>, guid: string, stale: NonNullable<Extract<Recorded, { recorded: false }>['stale']>): void {
  const { attempt, currentAttempt, code } = stale;
  const older = attempt < currentAttempt;
  deps.metrics.staleAnswer(older ? 'older' : 'current');
  const line = { guid, attempt, currentAttempt, code };
  if (older) deps.sendLog?.error(line, `possible double application of GUID ${guid} (attempt ${attempt} answered after attempt ${currentAttempt})`);
  else deps.sendLog?.warn(line, `GUID ${guid}: attempt ${attempt} answered after its row was settled another way (inquiry, purge); kept as a StaleAnswer`);
}
