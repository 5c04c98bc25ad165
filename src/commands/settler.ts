import type { EventLog, InquirySchedule, LedgerClock, LedgerReadModel, RowLeases } from '../events/store.js';
import type { AccountClient } from '../account/accountClient.js';
import type { Metrics } from '../telemetry/metrics.js';
import { resolveUnknown, type ResolveSummary } from './resolve.js';
import { leaseHolder } from './rows.js';
import type { Tracing } from '../telemetry/tracing.js';

export interface SettlerDeps {
  readonly store: EventLog & LedgerReadModel & InquirySchedule & RowLeases & LedgerClock;
  readonly account: AccountClient;
  readonly metrics: Pick<Metrics, 'inquiry' | 'settled' | 'settleRunFinished'>;
  /** For the metrics' timestamps only: ages are judged by the ledger's clock (`store.now()`). */
  readonly clock: () => number;
  /** One line per run that settled or swept something, and per failed run. */
  readonly log: (summary: ResolveSummary) => void;
  /** Where each row's span goes (CONTRACT.md §10); default none recorded. */
  readonly tracing?: Tracing | undefined;
}

export interface SettlerOptions {
  /** Pause between the end of one run and the start of the next. */
  readonly everyMs: number;
  /** serve's --max-attempts: a row found absent at it is a dead letter (its notification). */
  readonly maxAttempts?: number | undefined;
  readonly minAgeMs: number;
  readonly graceMs: number;
  /** Inquiries in flight at once. */
  readonly concurrency: number;
  /**
   * The lease holder of every run (default: `leaseHolder('settler')`, one per process). The same for each run, so
   * that leases a run could not end (the ledger failed under it) are taken over and ended by the next one rather
   * than keeping their rows from being settled until they run out.
   */
  readonly leaseHolder?: string | undefined;
}

export interface Settler {
  /** No new run starts; the run in flight finishes its inquiries (and records them). */
  stop(): Promise<void>;
}

/** One settle run: `resolve` on the rows whose next inquiry is due; stamps the run's end in the metrics. */
export async function settleOnce(deps: Omit<SettlerDeps, 'log'>, opts: Omit<SettlerOptions, 'everyMs'>, signal?: AbortSignal): Promise<ResolveSummary> {
  const summary = await resolveUnknown(
    { store: deps.store, account: deps.account, metrics: deps.metrics, tracing: deps.tracing },
    { minAgeMs: opts.minAgeMs, graceMs: opts.graceMs, concurrency: opts.concurrency, onlyDue: true, signal, leaseHolder: opts.leaseHolder, maxAttempts: opts.maxAttempts },
  );
  deps.metrics.settleRunFinished(deps.clock());
  return summary;
}

/**
 * `serve`'s background settling (CONTRACT.md §7): every `everyMs`, what `resolve` does (the same function), asking
 * only about rows whose next inquiry is due. It never calls POST /transfer. Several processes may settle one
 * ledger: an inquiry may repeat, but each settlement is a compare-and-set on the row as asked about.
 */
export function startSettler(deps: SettlerDeps, options: SettlerOptions): Settler {
  const opts: SettlerOptions = { ...options, leaseHolder: options.leaseHolder ?? leaseHolder('settler') };
  const abort = new AbortController();
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> = Promise.resolve();

  const run = async (): Promise<void> => {
    const summary = await settleOnce(deps, opts, abort.signal);
    if (summary.processed + summary.absent + summary.swept.neverSent + summary.swept.orphaned + summary.ledgerErrors > 0) deps.log(summary);
  };
  const schedule = (): void => {
    if (abort.signal.aborted) return;
    timer = setTimeout(() => {
      running = run().finally(schedule);
    }, opts.everyMs);
    timer.unref();
  };
  schedule();
  return {
    async stop() {
      abort.abort();
      if (timer !== null) clearTimeout(timer);
      await running.catch(() => undefined);
    },
  };
}
