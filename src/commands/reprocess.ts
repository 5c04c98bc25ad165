import * as E from 'fp-ts/lib/Either.js';
import type { EventLog, LedgerClock, LedgerReadModel, RowLeases } from '../events/store.js';
import { isHeld, resendableRows } from '../events/policy.js';
import type { LedgerState } from '../events/state.js';
import type { AccountClient } from '../account/accountClient.js';
import { createMetrics, type Metrics } from '../telemetry/metrics.js';
import { sendAudit, sendClaimed, type SendLogger, type SendResult } from '../send/sendClaimed.js';
import { resendAfterInquiry } from '../send/resendAfterInquiry.js';
import { sendWindowMs, type MonotonicClock } from '../send/sendWindow.js';
import { DEFAULTS } from '../shared/defaults.js';
import { inRowSpan } from './claimTrace.js';
import type { Context, Tracing } from '../telemetry/tracing.js';
import { HELD_ELSEWHERE, ledgerFailed, runOverRows, unmetCondition, type LedgerFailures, type RowFilter, type RowRunOptions } from './rows.js';

export interface ReprocessSummary extends LedgerFailures {
  /** FAILED rows under the attempt cap (at most `limit`). */
  candidates: number;
  /** Sent and answered definitely (0000, B2xx, E500): DONE. */
  done: number;
  /** Sent, and the connection could not be made again: FAILED (E902). */
  failed: number;
  /** Sent, outcome unknown (timeout, reset, non-definite answer): UNKNOWN, for `resolve`. */
  unknown: number;
  /** Someone else moved first (a channel resend, another reprocess) or the cap was reached: not sent by us. */
  skipped: number;
  /**
   * FAILED by an inquiry, so the last attempt may have arrived, and the fresh inquiry found it processed: DONE with
   * its answer, nothing sent (counted in `done` too).
   */
  found: number;
  /** May have arrived, and too young to ask or the inquiry could not tell: not sent (CONTRACT.md §7). */
  held: number;
  /**
   * Moved to SENT, but the ledger acknowledged that too late to call within the send window (half of --grace): not
   * sent; the row stays SENT until the sweep makes it UNKNOWN and an inquiry settles it.
   */
  withheld: number;
  dryRun: boolean;
  /** The named GUIDs (`guids`) the run did not take, and why (not in the ledger, not FAILED, at the cap). */
  notTaken?: Array<{ guid: string; why: string }>;
}

export type ReprocessRowOutcome = 'candidate' | 'done' | 'found' | 'failed' | 'unknown' | 'skipped' | 'held' | 'withheld' | 'ledger-error' | 'not-leased';

export interface ReprocessDeps {
  readonly store: EventLog & LedgerReadModel & RowLeases & LedgerClock;
  /** Its call timeout should be `timeoutMs`: that is what the Sent event records for the orphan sweep. */
  readonly account: AccountClient;
  readonly metrics?: Metrics | undefined;
  /** What a row's age is judged by before an inquiry; default the ledger's clock (`store.now()`). */
  readonly clock?: (() => number | Promise<number>) | undefined;
  /** What the send window is measured on; default `performance.now`. */
  readonly monotonicNow?: MonotonicClock | undefined;
  /** Where a withheld send and a stale answer are logged. */
  readonly sendLog?: SendLogger | undefined;
  /** Where each row's span goes; default none recorded (each call still continues the claim's trace). */
  readonly tracing?: Tracing | undefined;
}

export interface ReprocessOptions extends RowRunOptions<ReprocessRowOutcome> {
  readonly maxAttempts: number;
  /** The call timeout recorded in each Sent (the orphan sweep waits this plus its grace). */
  readonly timeoutMs: number;
  /** The orphan sweep's grace (as serve's --grace): a send is made only within half of it after its claim. Default: `--grace`'s. */
  readonly graceMs?: number | undefined;
  /** A row FAILED by an inquiry is sent again only when its last Sent is this old and a fresh inquiry says absent. */
  readonly minAgeMs?: number | undefined;
  /**
   * Only these GUIDs (`guidgate reprocess GUID…`: a dead letter sent again under a raised `maxAttempts`), each under
   * the same selection and rules as a run over every row; the ones it does not take are in the summary's `notTaken`.
   */
  readonly guids?: readonly string[] | undefined;
  /** The continuity window, when the mark says one is open: every resend is inquired about first (CONTRACT.md §9). */
  readonly continuityWindow?: { readonly wentBackAt: number } | null | undefined;
}

/**
 * Exit status of a reprocess run (CONTRACT.md §5): 1 when the ledger failed, or when the account system could
 * not be reached for any row (at least one send, and every send ended "not sent" again); else 0.
 */
export function reprocessExitCode(s: ReprocessSummary): 0 | 1 {
  if (s.ledgerErrors > 0) return 1;
  return s.failed > 0 && s.done + s.unknown === 0 ? 1 : 0;
}

/** How one send counts in the summary, read from what `sendClaimed` says happened. */
export function countSend(r: SendResult): { outcome: Exclude<ReprocessRowOutcome, 'candidate' | 'skipped' | 'found' | 'held' | 'not-leased'>; detail: string } {
  if (!r.sent && r.why === 'claim-too-slow') {
    return { outcome: 'withheld', detail: `not sent: the claim was acknowledged after ${Math.round(r.elapsedMs)} ms, past the send window of ${r.windowMs} ms (the sweep settles it)` };
  }
  if (!r.sent) return { outcome: 'ledger-error', detail: 'the stored request is missing: not sent' };
  const { call } = r;
  // The call was made but its outcome is not in the ledger: the row stays SENT until the sweep makes it UNKNOWN.
  if (E.isLeft(r.recorded)) return { outcome: 'ledger-error', detail: 'sent, but the outcome could not be recorded (the sweep will make the row UNKNOWN)' };
  const recorded = r.recorded.right;
  if (recorded.recorded === false) {
    // Someone moved first while we called: the row as it is now says how it ended.
    const now = recorded.state;
    if (now?.status === 'DONE') return { outcome: 'done', detail: now.code ?? 'DONE' };
    // A call that left is not "failed" (not sent) because the row became FAILED meanwhile: as its reply, E901.
    if (now?.status === 'FAILED') return call.kind === 'failed' ? { outcome: 'failed', detail: 'E902' } : { outcome: 'unknown', detail: 'E901' };
    return { outcome: 'unknown', detail: now?.status ?? 'E901' };
  }
  switch (call.kind) {
    case 'definite':
      return { outcome: 'done', detail: call.code };
    case 'failed':
      return { outcome: 'failed', detail: 'E902' };
    case 'unknown':
      return { outcome: 'unknown', detail: 'E901' };
  }
}

/** The rows a reprocess run sends again: FAILED under the attempt cap (`resendableRows`: every FAILED row that is no dead letter). */
export function reprocessSelection(opts: Pick<ReprocessOptions, 'maxAttempts' | 'guid'>): RowFilter {
  return { ...resendableRows(opts.maxAttempts), ...(opts.guid === undefined ? {} : { guid: opts.guid }) };
}

/** Why reprocess's selection leaves `row` out, in words (the operator API's E409); null when it would take it. */
export function whyReprocessLeavesOut(row: LedgerState, maxAttempts: number): string | null {
  switch (unmetCondition(reprocessSelection({ maxAttempts }), row)) {
    case 'statuses':
      return `reprocess sends FAILED rows again; this one is ${row.status}`;
    case 'attemptsBelow':
      return `the attempt cap (${maxAttempts}) is used up: a person decides (dead letter)`;
    default:
      return null;
  }
}

/** Why a named GUID was not taken: not in the ledger, the selection's own reason, or another run held it. */
function whyNamedRowLeftOut(row: LedgerState | null, maxAttempts: number, heldElsewhere: boolean): string {
  if (row === null) return 'no such GUID in the ledger';
  const why = whyReprocessLeavesOut(row, maxAttempts);
  if (why !== null) return why;
  return heldElsewhere ? HELD_ELSEWHERE : 'it changed while the run read it; try again';
}

/**
 * `guidgate reprocess`: sends FAILED rows again (same GUID, the stored original bytes) while attempts < max.
 * Each row is first moved FAILED → SENT by `Send` (compare-and-set in the write transaction, so a channel resend
 * or another reprocess racing for the same GUID wins at most once between them), then sent and recorded by
 * `sendClaimed`, as the relay's sends are: one code path for every send. Rows in any other state are never touched.
 */
export async function reprocessFailed(deps: ReprocessDeps, opts: ReprocessOptions): Promise<ReprocessSummary> {
  const { store, account } = deps;
  const dryRun = opts.dryRun === true;
  const metrics = deps.metrics ?? createMetrics(store, Date.now);
  const summary: ReprocessSummary = { candidates: 0, done: 0, failed: 0, unknown: 0, skipped: 0, found: 0, held: 0, withheld: 0, ledgerErrors: 0, dryRun };
  const windowMs = sendWindowMs(opts.graceMs ?? DEFAULTS.graceMs);
  const filter = reprocessSelection(opts);
  const audit = sendAudit(opts, opts.key);

  const resend = async (row: LedgerState, progressed: (outcome: ReprocessRowOutcome, detail?: string) => void, trace: Context): Promise<void> => {
    const send = { type: 'Send', timeoutMs: opts.timeoutMs, maxAttempts: opts.maxAttempts, ...(opts.minAgeMs === undefined ? {} : { minAgeMs: opts.minAgeMs }) } as const;
    // Background work: its inquiry waits its turn under --inquiry-rate, the oldest row first.
    const { startedAt, result: executed } = await resendAfterInquiry({ store, account, metrics, clock: deps.clock, monotonicNow: deps.monotonicNow, trace, inquiryWaits: { signal: opts.signal } }, row, send, audit, opts.continuityWindow ?? null);
    if (E.isLeft(executed)) {
      // Nothing was sent: the Sent is not durable, so the account system is not called.
      return progressed('ledger-error', ledgerFailed(summary, executed.left));
    }
    const result = executed.right;
    if (result.kind === 'refused') {
      const { reason } = result.refusal;
      if (isHeld(reason)) {
        summary.held++;
        return progressed('held', reason);
      }
      summary.skipped++;
      return progressed('skipped', `${result.refusal.reason}${result.refusal.state === null ? '' : ` (${result.refusal.state.status})`}`);
    }
    const claimed = result.state;
    if (claimed.status === 'DONE') {
      summary.done++;
      summary.found++;
      return progressed('found', claimed.code ?? 'DONE');
    }

    const sent = await sendClaimed({ store, account, metrics, monotonicNow: deps.monotonicNow, sendLog: deps.sendLog, sendWindowMs: windowMs, tracing: deps.tracing }, { state: claimed, startedAt, trace }, undefined, audit);
    const counted = countSend(sent);
    // The store's error when there is one (its code and cause), else what countSend says.
    if (counted.outcome === 'ledger-error') ledgerFailed(summary, sent.sent && E.isLeft(sent.recorded) ? `${sent.recorded.left.code}: ${counted.detail}: ${sent.recorded.left.message}` : counted.detail);
    else summary[counted.outcome]++;
    return progressed(counted.outcome, counted.detail);
  };

  // Each call continues the trace of the transfer's first request (CONTRACT.md §10).
  const traced = (row: LedgerState, progressed: (outcome: ReprocessRowOutcome, detail?: string) => void): Promise<void> =>
    inRowSpan(deps, 'guidgate reprocess', row, progressed, (trace, p) => resend(row, p, trace));
  if (opts.guids === undefined) {
    await runOverRows<ReprocessRowOutcome>(store, filter, opts, summary, traced);
    return summary;
  }
  // Named rows: the same run, restricted to each GUID in turn (the selection, the lease, the inquiry first, the
  // send window); a GUID it does not take is said, with why.
  summary.notTaken = [];
  for (const guid of new Set(opts.guids)) {
    if (summary.ledgerErrors > 0 || opts.signal?.aborted === true) break;
    const before = summary.candidates;
    let heldElsewhere = false;
    const onRow: ReprocessOptions['onRow'] = (row, outcome, detail) => {
      if (outcome === 'not-leased') heldElsewhere = true;
      opts.onRow?.(row, outcome, detail);
    };
    await runOverRows<ReprocessRowOutcome>(store, { ...filter, guid }, { ...opts, guid, onRow }, summary, traced);
    if (summary.candidates > before || summary.ledgerErrors > 0) continue;
    const row = await store.getLedger(guid);
    if (E.isLeft(row)) ledgerFailed(summary, row.left);
    else summary.notTaken.push({ guid, why: whyNamedRowLeftOut(row.right, opts.maxAttempts, heldElsewhere) });
  }
  return summary;
}
