import type { AccountClient } from '../account/accountClient.js';
import type { EventLog, InquirySchedule, LedgerClock, LedgerReadModel, RowLeases } from '../events/store.js';
import type { Status } from '../events/codecs.js';
import type { LedgerState } from '../events/state.js';
import { ledgerTime } from '../events/policy.js';
import { orThrow } from '../events/storeResult.js';
import {
  reconcile, ledgerRecordOf, TooManyBreaksError, type Break, type ColumnNames, type JournalInput, type LedgerRecord, type LedgerSource, type ReconcileProgress,
  type ReconcileSummary, type ReconcileWindow,
} from '../reconcile/index.js';
import { inquireAndRecord, type InquiryRecorded } from './resolve.js';
import { claimContext } from './claimTrace.js';
import { forEachBounded, pagedRows } from './rows.js';
import { DEFAULTS } from '../shared/defaults.js';
import { sweepOrphans } from '../send/sweepOrphans.js';

/**
 * The ledger side of a reconciliation, read from either store: the rows created (first sent) in the window, in GUID
 * order a page at a time (`LedgerQuery.createdFrom/createdBefore`), and single rows by GUID for the journal's
 * entries whose transfer was sent before the window. A read that fails is thrown (its StoreError): the run stops.
 */
export function storeLedgerSource(store: LedgerReadModel, pageSize?: number): LedgerSource {
  return {
    async *window(from, to) {
      for await (const row of pagedRows(store, { createdFrom: from, createdBefore: to }, pageSize === undefined ? {} : { pageSize })) yield ledgerRecordOf(row);
    },
    async lookup(guids) {
      const rows = await Promise.all(guids.map((g) => orThrow(store.getLedger(g))));
      return rows.filter((r): r is LedgerState => r !== null).map((r): LedgerRecord => ledgerRecordOf(r));
    },
  };
}

/** The categories `--settle` inquires about (CONTRACT.md §8): the journal proves the transfer arrived. */
export const SETTLED_CATEGORIES: ReadonlySet<Break['category']> = new Set(['unsettled_in_ledger', 'rejected_in_ledger']);

/** What `--settle` did about one GUID. */
export interface Settlement {
  readonly guid: string;
  readonly category: Break['category'];
  /** The row's status when the settlement started (after the reconciliation; it may have moved since the break). */
  readonly before: Status | null;
  /** resolve's outcome for the row (`inquireAndRecord`), or `gone` when the row is not there any more. */
  readonly outcome: InquiryRecorded['outcome'] | 'gone';
  /** The row's status once settled (null: no row). */
  readonly after: Status | null;
  readonly detail: string | null;
  /** What the account system said to the inquiry (`processed 0000`, `absent`, `unknown`); null when none was made. */
  readonly answered: string | null;
  /**
   * A FAILED row with a posting, made DONE: the min-age trap caught in the act (an inquiry that said absent too early
   * made it FAILED, and a `reprocess` would have sent it again).
   */
  readonly minAgeTrap: boolean;
}

/** The run as one value (CONTRACT.md §8): what `--json` prints and what is recorded in the ledger. */
export interface ReconciliationResult {
  readonly window: ReconcileWindow;
  readonly source: string;
  readonly sha256: string;
  readonly counts: ReconcileSummary['counts'];
  readonly severities: ReconcileSummary['severities'];
  /** The whole summary: money per category and side, the journal's counts, the ledger rows judged. */
  readonly summary: ReconcileSummary;
  /** Every break, in GUID order, with its severity (firstSeen null until a recorder fills it). */
  readonly breaks: readonly Break[];
  /** `--settle`'s outcome per GUID (empty without it). */
  readonly settlements: readonly Settlement[];
  /** The recorded run's id (null: not recorded). */
  readonly id: string | null;
}

/**
 * Records a finished run in the ledger (the store's run record). It may give back the run as recorded: its id and
 * its breaks with the run that first saw each (`firstSeen`), which the result then carries.
 */
export type RecordRun = (run: ReconciliationResult) => Promise<{ readonly id: string; readonly breaks: readonly Break[] } | void>;

export interface SettleWith {
  readonly account: AccountClient;
  /** Grace of the orphan sweep of a SENT or RECEIVED row before its inquiry (serve's --grace). */
  readonly graceMs: number;
  /** The key that asked (an API), recorded in the events' actor. */
  readonly key?: string | undefined;
  /** Inquiries in flight at once (default: `--concurrency`'s). */
  readonly concurrency?: number | undefined;
  /** Each settlement as it is done. */
  readonly onSettled?: ((s: Settlement) => void) | undefined;
}

export interface ReconcileRunOptions {
  readonly store: EventLog & LedgerReadModel & InquirySchedule & RowLeases & LedgerClock;
  readonly window: ReconcileWindow;
  readonly journal: JournalInput;
  readonly columns?: ColumnNames | undefined;
  /** Each break as it is found, in GUID order (a report writer). */
  readonly onBreak?: ((b: Break) => void | Promise<void>) | undefined;
  readonly onProgress?: ((p: ReconcileProgress) => void) | undefined;
  /** `--settle`: inquire about every unsettled_in_ledger and rejected_in_ledger GUID, whatever its age. */
  readonly settle?: SettleWith | undefined;
  /** Where the run is recorded once finished (and settled). */
  readonly record?: RecordRun | undefined;
  readonly tempDir?: string | undefined;
  /** Breaks kept at most (`--max-breaks`); one more stops the run (TooManyBreaksError), nothing recorded. */
  readonly maxBreaks?: number | undefined;
}

/**
 * One reconciliation (CONTRACT.md §8): the journal against the ledger over the window (src/reconcile), read-only on
 * the ledger; then, with `settle`, the inquiries; then `record`. Throws a ReconcileError when the run cannot finish
 * (a bad journal line, a journal that cannot be read) and the store's error when the ledger fails.
 */
export async function reconcileRun(opts: ReconcileRunOptions): Promise<ReconciliationResult> {
  const breaks: Break[] = [];
  const maxBreaks = opts.maxBreaks ?? DEFAULTS.reconcileMaxBreaks;
  const summary = await reconcile({
    window: opts.window,
    journal: opts.journal,
    ...(opts.columns === undefined ? {} : { columns: opts.columns }),
    ledger: storeLedgerSource(opts.store),
    onBreak: async (b) => {
      if (breaks.length >= maxBreaks) throw new TooManyBreaksError(maxBreaks);
      breaks.push(b);
      await opts.onBreak?.(b);
    },
    ...(opts.onProgress === undefined ? {} : { onProgress: opts.onProgress }),
    ...(opts.tempDir === undefined ? {} : { tempDir: opts.tempDir }),
  });
  const settlements: Settlement[] = [];
  const settle = opts.settle;
  if (settle !== undefined) {
    const due = breaks.filter((b) => SETTLED_CATEGORIES.has(b.category));
    const byGuid = new Map<string, Settlement>();
    // A few inquiries at once (as resolve's --concurrency); the first ledger failure stops the rest and is thrown.
    let failure: { error: unknown } | null = null;
    await forEachBounded(
      (async function* () {
        yield* due;
      })(),
      settle.concurrency ?? DEFAULTS.concurrency,
      async (b) => {
        try {
          const s = await settleOne(opts.store, settle, b);
          byGuid.set(b.guid, s);
          settle.onSettled?.(s);
        } catch (error) {
          failure ??= { error };
        }
      },
      () => failure !== null,
    );
    if (failure !== null) throw (failure as { error: unknown }).error;
    for (const b of due) {
      const s = byGuid.get(b.guid);
      if (s !== undefined) settlements.push(s);
    }
  }
  const run: ReconciliationResult = {
    window: summary.window, source: summary.source, sha256: summary.sha256, counts: summary.counts, severities: summary.severities,
    summary, breaks, settlements, id: null,
  };
  const recorded = await opts.record?.(run);
  return recorded === undefined ? run : { ...run, id: recorded.id, breaks: recorded.breaks };
}

/**
 * `--settle` for one GUID: resolve's rule (`inquireAndRecord`: the inquiry, then decide and the seq compare-and-set
 * on the row as read), whatever the row's age, since the journal proves the transfer arrived. A SENT or RECEIVED
 * row is first put through the orphan sweep, as resolve does. Never a POST /transfer. A ledger failure is thrown.
 */
async function settleOne(store: ReconcileRunOptions['store'], w: SettleWith, b: Break): Promise<Settlement> {
  const read = async (): Promise<LedgerState | null> => orThrow(store.getLedger(b.guid));
  let row = await read();
  const before = row?.status ?? null;
  const done = (outcome: Settlement['outcome'], after: LedgerState | null, detail: string | null, answered: string | null = null): Settlement => ({
    guid: b.guid, category: b.category, before, outcome, after: after?.status ?? null, detail, answered,
    minAgeTrap: before === 'FAILED' && after?.status === 'DONE',
  });
  if (row === null) return done('gone', null, 'no row any more');
  if (row.status === 'SENT' || row.status === 'RECEIVED') {
    const now = await orThrow(ledgerTime(store, undefined));
    await orThrow(sweepOrphans(store, w.graceMs, now, { guid: b.guid, key: w.key }));
    row = await read();
    if (row === null) return done('gone', null, 'no row any more');
  }
  // The inquiry continues the trace of the transfer's first request, kept with its claim (CONTRACT.md §10).
  const trace = await claimContext(store, b.guid);
  const r = await inquireAndRecord({ store, account: w.account }, row, { minAgeMs: 0, key: w.key, params: { reconcile: b.category }, trace });
  if (r.outcome === 'ledger-error') throw r.error;
  const after = await read();
  return done(r.outcome, after, r.detail ?? null, r.answered);
}

/** A settlement in words, for a terminal (the min-age trap said as the contract asks). */
export function settlementLine(s: Settlement): string {
  const moved = s.before === s.after ? `${s.after ?? 'no row'} unchanged` : `${s.before ?? 'no row'} → ${s.after ?? 'no row'}`;
  const head = `settle ${s.guid} ${s.category}: `;
  if (s.minAgeTrap) return `${head}${s.answered}, ${moved}: the min-age trap caught: settled before any reprocess could send it again`;
  if (s.outcome === 'processed' || s.outcome === 'absent') return `${head}${s.answered}, ${moved}`;
  if (s.outcome === 'gone') return `${head}no row any more`;
  if (s.outcome === 'skipped' && s.after === 'DONE') {
    return `${head}the account system says ${s.answered}; ${moved} (a DONE row is final: take it up with the account system)`;
  }
  if (s.outcome === 'skipped' && s.after === 'FAILED') {
    return `${head}the account system says ${s.answered} although its journal shows a posting; ${moved}: do not reprocess it before this is cleared up`;
  }
  const why = s.detail === null ? '' : ` (${s.detail})`;
  return `${head}${s.outcome}${why}, the account system says ${s.answered ?? 'nothing'}; ${moved}`;
}

export const isSettled = (s: Settlement): boolean => s.outcome === 'processed' && s.after === 'DONE';
