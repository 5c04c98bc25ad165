import * as E from 'fp-ts/lib/Either.js';
import type { StoreError } from '../events/errors.js';
import type { LedgerState } from '../events/state.js';
import type { AccountClient } from '../account/accountClient.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { SendLogger } from '../send/sendClaimed.js';
import type { MonotonicClock } from '../send/sendWindow.js';
import { reprocessFailed, whyReprocessLeavesOut, type ReprocessDeps } from './reprocess.js';
import { resolveUnknown, whyResolveLeavesOut, type ResolveDeps } from './resolve.js';
import { HELD_ELSEWHERE } from './rows.js';

export type GuidAction = 'resolve' | 'reprocess';

export interface ActOnGuidDeps {
  readonly store: ResolveDeps['store'] & ReprocessDeps['store'];
  readonly account: AccountClient;
  readonly metrics: Metrics;
  readonly tracing?: Tracing | undefined;
  /** What a reprocess's send window is measured on; default `performance.now`. */
  readonly monotonicNow?: MonotonicClock | undefined;
  /** Where a reprocess's withheld send and a stale answer are logged. */
  readonly sendLog?: SendLogger | undefined;
}

export interface ActOnGuidOptions {
  readonly guid: string;
  /** The key that asked, recorded in the events' actor. */
  readonly key?: string | undefined;
  readonly dryRun: boolean;
  readonly minAgeMs: number;
  /** The attempt cap in force: serve's --max-attempts, or the one a reprocess was asked with (above it, a dead letter is sent again). */
  readonly maxAttempts: number;
  readonly timeoutMs: number;
  readonly graceMs: number;
}

/**
 * How an action on one GUID ended, for the operator API to answer: `unavailable`, a read of this workflow failed
 * (`error`); `failed`, the command's own run stopped on the ledger (`cause`: the row's failure, when it had one);
 * `not-taken`, the command left the row alone, and why.
 */
export type GuidActionResult =
  | { readonly kind: 'not-found' }
  | { readonly kind: 'unavailable'; readonly error: StoreError }
  | { readonly kind: 'failed'; readonly cause?: string | undefined }
  | { readonly kind: 'not-taken'; readonly why: string; readonly before: LedgerState; readonly after: LedgerState }
  | { readonly kind: 'done'; readonly outcome: string; readonly detail?: string | undefined; readonly before: LedgerState; readonly after: LedgerState };

/** What the command reported of the GUID through onRow; nothing when its selection left the row out. */
interface Reported {
  readonly outcome?: string;
  readonly detail?: string | undefined;
  /** The row as the command read it. */
  readonly row?: LedgerState;
}

/**
 * `guidgate resolve` or `reprocess` restricted to one GUID (the same eligibility, sweep, min-age, cap and inquiry),
 * with the row as it was before and after. A row the command did not take is said with why: another run holds it
 * (leased, and not moved since the command read it), or the condition of the command's own selection it fails.
 */
export async function actOnGuid(deps: ActOnGuidDeps, action: GuidAction, opts: ActOnGuidOptions): Promise<GuidActionResult> {
  const { store } = deps;
  const { guid } = opts;
  const read = await store.getLedger(guid);
  if (E.isLeft(read)) return { kind: 'unavailable', error: read.left };
  const before = read.right;
  if (before === null) return { kind: 'not-found' };
  // The ledger's time before the run: resolve selects by a time at or after it, so a row too young for the run
  // was too young at it (what the E409 says, even when the row comes of age while the run ends). A clock that
  // fails here fails the run too, which reports it as its own failure.
  const askedAt = await store.now();
  const { reported, ledgerErrors } = await runOnGuid(deps, action, opts);
  if (reported.outcome === 'ledger-error') return { kind: 'failed', cause: reported.detail ?? 'a read or write failed' };
  if (ledgerErrors > 0) return { kind: 'failed' };
  const reread = await store.getLedger(guid);
  if (E.isLeft(reread)) return { kind: 'unavailable', error: reread.left };
  const after = reread.right ?? before;
  if (reported.outcome !== undefined && reported.outcome !== 'not-leased') {
    return { kind: 'done', outcome: reported.outcome, detail: reported.detail, before, after };
  }
  if (reported.outcome === 'not-leased' && after.lastSeq === reported.row?.lastSeq) return { kind: 'not-taken', why: HELD_ELSEWHERE, before, after };
  const now = E.isRight(askedAt) ? askedAt : await store.now();
  if (E.isLeft(now)) return { kind: 'unavailable', error: now.left };
  return { kind: 'not-taken', why: whyNotTaken(action, after, opts, now.right), before, after };
}

async function runOnGuid(deps: ActOnGuidDeps, action: GuidAction, opts: ActOnGuidOptions): Promise<{ reported: Reported; ledgerErrors: number }> {
  const { store, account, metrics, tracing } = deps;
  const { guid, key, dryRun, minAgeMs, graceMs } = opts;
  // The command reports the row through onRow (`not-leased`: selected, but another run held it or it moved).
  let reported: Reported = {};
  const onRow = (row: LedgerState, outcome: string, detail?: string) => void (reported = { row, outcome, detail });
  const { ledgerErrors } =
    action === 'resolve'
      ? await resolveUnknown({ store, account, metrics, tracing }, { guid, key, minAgeMs, graceMs, dryRun, limit: 1, onRow, maxAttempts: opts.maxAttempts })
      : await reprocessFailed(
          { store, account, metrics, monotonicNow: deps.monotonicNow, sendLog: deps.sendLog, tracing },
          { guid, key, maxAttempts: opts.maxAttempts, timeoutMs: opts.timeoutMs, graceMs, minAgeMs, dryRun, limit: 1, onRow },
        );
  return { reported, ledgerErrors };
}

/** Which condition of the command's own selection leaves the row out (resolve's age at `now`). */
function whyNotTaken(action: GuidAction, row: LedgerState, opts: ActOnGuidOptions, now: number): string {
  const why = action === 'resolve' ? whyResolveLeavesOut(row, now, opts.minAgeMs) : whyReprocessLeavesOut(row, opts.maxAttempts);
  return why ?? `${action} did not take it: the row changed while the action ran; try again`;
}
