import * as E from 'fp-ts/lib/Either.js';
import { decide, type Command } from '../events/decide.js';
import type { EventLog, InquirySchedule, LedgerClock, LedgerReadModel, RowLeases } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import { ledgerTime } from '../events/policy.js';
import { inquiryHttpStatus, type AccountClient } from '../account/accountClient.js';
import type { Metrics } from '../telemetry/metrics.js';
import { sweepOrphans } from '../send/sweepOrphans.js';
import { inRowSpan } from './claimTrace.js';
import type { Context, Tracing } from '../telemetry/tracing.js';
import { ledgerFailed, pagedRows, runOverRows, unmetCondition, type LedgerFailures, type RowFilter, type RowRunOptions } from './rows.js';

export interface ResolveSummary extends LedgerFailures {
  /** What the orphan sweep before the inquiries did (in a dry run: what it would do). */
  swept: { neverSent: number; orphaned: number };
  /** UNKNOWN rows old enough to be asked about (at most `limit`). */
  candidates: number;
  /** The account system has the GUID: the row is DONE with its answer, byte for byte. */
  processed: number;
  /** The account system has no record of it: the row is FAILED (reprocess may send it again). */
  absent: number;
  /** The inquiry gave no usable answer (includes `unreachable`): the row stays UNKNOWN. */
  stillUnknown: number;
  /** The row changed between its selection and the answer (someone else moved first): left as it is now. */
  skipped: number;
  /** Of `stillUnknown`: the inquiry got no HTTP answer at all (connection refused, reset, timed out). */
  unreachable: number;
  dryRun: boolean;
  /**
   * The UNKNOWN rows an operator's run (not serve's settler) left out because their last Sent is younger than min-age:
   * how many, and when the first of them becomes old enough (ms since the epoch, and how long from the run's start);
   * null when there is none.
   */
  tooYoung?: { count: number; firstEligibleAt: number | null; firstEligibleInMs: number | null };
}

export type ResolveRowOutcome = 'candidate' | 'processed' | 'absent' | 'still-unknown' | 'unreachable' | 'skipped' | 'ledger-error' | 'not-leased';

export interface ResolveDeps {
  readonly store: EventLog & LedgerReadModel & InquirySchedule & RowLeases & LedgerClock;
  readonly account: AccountClient;
  /** What ages are judged by; default the ledger's clock (`store.now()`: on PostgreSQL the database's). */
  readonly clock?: (() => number | Promise<number>) | undefined;
  /** Inquiries by outcome and the settlement lag (serve's settler). */
  readonly metrics?: Pick<Metrics, 'inquiry' | 'settled'> | undefined;
  /** Where each row's span goes; default none recorded (each inquiry still continues the claim's trace). */
  readonly tracing?: Tracing | undefined;
}

/** A dry run also sweeps nothing (it reports what the sweep would do); `guid` restricts the sweep too. */
export interface ResolveOptions extends RowRunOptions<ResolveRowOutcome> {
  /** The attempt cap in force, when known (serve's settler, the operator API): a row found absent at it is a dead letter. */
  readonly maxAttempts?: number | undefined;
  /** Only rows whose last Sent is at least this old: the account system may still be processing younger ones. */
  readonly minAgeMs: number;
  /** Grace of the orphan sweep run first (CONTRACT.md §4). */
  readonly graceMs: number;
  /**
   * Skip rows whose next inquiry is not due yet (recorded by earlier inquiries that could not tell, by any
   * process): serve's background settler. An operator's `resolve` asks about every candidate.
   */
  readonly onlyDue?: boolean | undefined;
  /**
   * The lease holder of a caller whose runs never overlap (serve's settler), so that a run takes over and ends the
   * leases an earlier run of it could not end; default, one of this run alone (see `forEachLeasedRow`).
   */
  readonly leaseHolder?: string | undefined;
}

/**
 * Exit status of a resolve run (CONTRACT.md §5): 0 when the run completed, even if some inquiries failed;
 * 1 when the ledger failed, or when the account system could not be reached for any row, i.e. there was at
 * least one inquiry and not one of them got an answer.
 */
export function resolveExitCode(s: ResolveSummary): 0 | 1 {
  if (s.ledgerErrors > 0) return 1;
  const answered = s.processed + s.absent + s.skipped + (s.stillUnknown - s.unreachable);
  return s.unreachable > 0 && answered === 0 ? 1 : 0;
}

/**
 * The rows a resolve run at `now` asks about: UNKNOWN, their last Sent at least `minAgeMs` old (the account system
 * may still be processing younger ones), and with `onlyDue` only those whose next inquiry is due.
 */
export function resolveSelection(now: number, opts: Pick<ResolveOptions, 'minAgeMs' | 'onlyDue' | 'guid'>): RowFilter {
  return {
    statuses: ['UNKNOWN'],
    sentAtOrBefore: now - opts.minAgeMs,
    ...(opts.onlyDue === true ? { inquiryDueBy: now } : {}),
    ...(opts.guid === undefined ? {} : { guid: opts.guid }),
  };
}

/** Why resolve's selection at `now` leaves `row` out, in words (the operator API's E409); null when it would take it. */
export function whyResolveLeavesOut(row: LedgerState, now: number, minAgeMs: number): string | null {
  switch (unmetCondition(resolveSelection(now, { minAgeMs }), row)) {
    case 'statuses':
      return `resolve settles UNKNOWN rows; this one is ${row.status}`;
    case 'sentAtOrBefore':
      return `its last Sent is younger than minAge (${minAgeMs} ms): the account system may still be processing it`;
    default:
      return null;
  }
}

/**
 * `guidgate resolve`: settles UNKNOWN rows by asking the account system (CONTRACT.md §3, §5).
 *
 * First the orphan sweep (a dead relay's SENT rows become UNKNOWN, its RECEIVED rows FAILED). Then every
 * UNKNOWN row whose last Sent is at least `minAgeMs` old is inquired about: processed → DONE with the inquiry's
 * answer byte for byte (the channel's next resend replays it), absent → FAILED, anything else → unchanged.
 *
 * The answer is recorded by compare-and-set on the row as it was selected (its `lastSeq`): if the row moved
 * meanwhile (another resolve settled it, a reprocess sent it again and that attempt is now a young UNKNOWN), the
 * answer is about an older attempt and is dropped (`skipped`). A 404 about an older attempt must never make a
 * young one FAILED: that is the min-age trap, and a FAILED row gets sent again.
 */
export async function resolveUnknown(deps: ResolveDeps, opts: ResolveOptions): Promise<ResolveSummary> {
  const { store, account } = deps;
  const clock = () => ledgerTime(store, deps.clock);
  const dryRun = opts.dryRun === true;
  const summary: ResolveSummary = {
    swept: { neverSent: 0, orphaned: 0 },
    candidates: 0,
    processed: 0,
    absent: 0,
    stillUnknown: 0,
    skipped: 0,
    unreachable: 0,
    ledgerErrors: 0,
    dryRun,
  };

  const started = await clock();
  if (E.isLeft(started)) {
    ledgerFailed(summary, started.left);
    return summary;
  }
  const now = started.right;
  const filter = resolveSelection(now, opts);
  const swept = await sweepOrphans(store, opts.graceMs, now, { dryRun, guid: opts.guid, key: opts.key });
  if (E.isLeft(swept)) {
    ledgerFailed(summary, swept.left);
    return summary;
  }
  summary.swept = { neverSent: swept.right.neverSent, orphaned: swept.right.orphaned };

  const settle = async (row: LedgerState, progressed: (outcome: ResolveRowOutcome, detail?: string) => void, trace: Context): Promise<void> => {
    const r = await inquireAndRecord(deps, row, { minAgeMs: opts.minAgeMs, key: opts.key, trace, signal: opts.signal, cap: opts.maxAttempts });
    switch (r.outcome) {
      case 'ledger-error':
        return progressed('ledger-error', ledgerFailed(summary, r.error));
      case 'still-unknown':
      case 'unreachable':
        summary.stillUnknown++;
        if (r.outcome === 'unreachable') summary.unreachable++;
        break;
      case 'skipped':
        summary.skipped++;
        break;
      case 'processed':
        summary.processed++;
        break;
      case 'absent':
        summary.absent++;
        break;
    }
    return progressed(r.outcome, r.detail);
  };

  // Each inquiry continues the trace of the transfer's first request (CONTRACT.md §10).
  const traced = (row: LedgerState, progressed: (outcome: ResolveRowOutcome, detail?: string) => void): Promise<void> =>
    inRowSpan(deps, 'guidgate resolve', row, progressed, (trace, p) => settle(row, p, trace));
  await runOverRows<ResolveRowOutcome>(store, filter, opts, summary, traced, { holder: opts.leaseHolder, signal: opts.signal });
  // The operator's run says what it left out for min-age, so that `candidates=0` never hides a waiting row.
  if (opts.onlyDue !== true && summary.ledgerErrors === 0) {
    try {
      summary.tooYoung = await tooYoung(store, now, opts);
    } catch (err) {
      ledgerFailed(summary, err);
    }
  }
  return summary;
}

/**
 * The UNKNOWN rows a resolve at `now` leaves out for min-age, and when the first becomes old enough. Read from every
 * UNKNOWN row (the unsettled rows' index; few, where settling keeps up), for an operator's run only (not the
 * settler's). A page that cannot be read is thrown.
 */
async function tooYoung(store: LedgerReadModel, now: number, opts: Pick<ResolveOptions, 'minAgeMs' | 'guid'>): Promise<NonNullable<ResolveSummary['tooYoung']>> {
  const eligibleFrom = now - opts.minAgeMs;
  let count = 0;
  let firstSent: number | null = null;
  for await (const row of pagedRows(store, { statuses: ['UNKNOWN'], ...(opts.guid === undefined ? {} : { guid: opts.guid }) })) {
    if (unmetCondition(resolveSelection(now, opts), row) !== 'sentAtOrBefore') continue;
    count++;
    const sent = row.sentAt ?? row.updatedAt;
    if (sent > eligibleFrom && (firstSent === null || sent < firstSent)) firstSent = sent;
  }
  const firstEligibleAt = firstSent === null ? null : firstSent + opts.minAgeMs;
  return { count, firstEligibleAt, firstEligibleInMs: firstEligibleAt === null ? null : firstEligibleAt - now };
}

/** How one inquiry about one row ended (`inquireAndRecord`); `error`: the ledger's failure, for `ledger-error`. */
export type InquiryRecorded =
  | {
      readonly outcome: 'processed' | 'absent' | 'still-unknown' | 'unreachable' | 'skipped';
      readonly detail?: string | undefined;
      /** What the account system said: `processed CODE`, `absent`, `unknown`, or `not asked`. */
      readonly answered: string;
    }
  | { readonly outcome: 'ledger-error'; readonly error: unknown; readonly detail?: undefined };

/**
 * Resolve's rule for one row, shared with `reconcile --settle`: ask the account system about the GUID, then record
 * the answer on the row as it was read, by compare-and-set on its `lastSeq` (decide → appendEvents): processed →
 * DONE with the answer byte for byte, absent → FAILED, an answer that cannot tell → the next inquiry spaced out
 * (`recordUnclearInquiry`). A row that moved meanwhile, or that `decide` will not settle so (a DONE row, a SENT
 * one still in flight), is `skipped`. It never sends a transfer.
 */
export async function inquireAndRecord(
  deps: Pick<ResolveDeps, 'store' | 'account' | 'clock' | 'metrics'>,
  row: LedgerState,
  opts: {
    readonly minAgeMs: number;
    readonly key?: string | undefined;
    readonly params?: Readonly<Record<string, string | number | boolean | null>> | undefined;
    /** The attempt cap in force (serve's --max-attempts), for a dead letter's notification. */
    readonly cap?: number | undefined;
    /** The trace the inquiry continues (the row's span, a child of its claim's kept trace: CONTRACT.md §10). */
    readonly trace?: Context | undefined;
    /** Once aborted, an inquiry still waiting for its turn under the inquiry budget is not made. */
    readonly signal?: AbortSignal | undefined;
  },
): Promise<InquiryRecorded> {
  const { store, account } = deps;
  // Background work: it waits its turn under --inquiry-rate, the oldest row first.
  const answer = await account.inquire(row.guid, { parent: opts.trace }, { waits: true, rowSentAt: row.sentAt ?? row.updatedAt, signal: opts.signal });
  if (answer.kind === 'deferred') return { outcome: 'skipped', detail: 'not asked: the run stopped while it waited for its turn under --inquiry-rate', answered: 'not asked' };
  deps.metrics?.inquiry(answer.kind === 'unknown' && !answer.reached ? 'unreachable' : answer.kind);
  // One read of the ledger's clock per row, once the answer is in: the time the answer is recorded at.
  const answeredAt = await ledgerTime(store, deps.clock);
  if (E.isLeft(answeredAt)) return { outcome: 'ledger-error', error: answeredAt.left };
  const at = answeredAt.right;
  if (answer.kind === 'unknown') {
    // Spaces out the next inquiry about this attempt, for every process settling this ledger.
    const recorded = await store.recordUnclearInquiry(row.guid, row.sentAt ?? row.updatedAt, at, opts.minAgeMs);
    if (E.isLeft(recorded)) return { outcome: 'ledger-error', error: recorded.left };
    return { outcome: answer.reached ? 'still-unknown' : 'unreachable', detail: answer.detail, answered: 'unknown' };
  }
  const answered = answer.kind === 'processed' ? `processed ${answer.code}` : 'absent';
  const command: Command =
    answer.kind === 'processed'
      ? { type: 'Resolve', outcome: 'processed', code: answer.code, response: answer.body }
      : { type: 'Resolve', outcome: 'absent' };
  // decide on the row as selected, appended only if the row is still exactly that (same lastSeq): the same
  // decision `store.execute` would take inside the transaction, pinned to the attempt we asked about.
  const decided = decide(row, command, at);
  if (E.isLeft(decided)) {
    return { outcome: 'skipped', detail: decided.left.reason, answered };
  }
  const params = { minAgeMs: opts.minAgeMs, inquiryStatus: inquiryHttpStatus(answer), ...opts.params };
  const appended = await store.appendEvents(row.guid, row.lastSeq, decided.right, { key: opts.key, params, cap: opts.cap });
  if (E.isLeft(appended)) return { outcome: 'ledger-error', error: appended.left };
  if (!appended.right.won) return { outcome: 'skipped', detail: `moved to ${appended.right.state?.status ?? 'nothing'} meanwhile`, answered };
  deps.metrics?.settled(at - row.updatedAt);
  return { outcome: answer.kind, detail: answer.kind === 'processed' ? answer.code : undefined, answered };
}
