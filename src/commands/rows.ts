import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import * as E from 'fp-ts/lib/Either.js';
import type { LedgerQuery, LedgerReadModel, RowLeases, StoreResult } from '../events/store.js';
import { orThrow } from '../events/storeResult.js';
import { DEFAULTS } from '../shared/defaults.js';
import type { LedgerState } from '../events/state.js';

/** What the summary of a run over rows (resolve, reprocess) keeps of its ledger failures: how many, and the first one's code and cause. */
export interface LedgerFailures {
  /** Ledger reads or writes that failed; the run stops starting new rows after the first. */
  ledgerErrors: number;
  /** The first of them, as `CODE: cause` (a StoreError's stable code), so that a log line or the CLI can say why. */
  ledgerError?: string | undefined;
}

/** Counts one ledger failure in `summary` and keeps the first one's code and cause; returns the cause. */
export function ledgerFailed(summary: LedgerFailures, err: unknown): string {
  const cause = err instanceof Error ? err.message : String(err);
  const code = err !== null && typeof err === 'object' && 'code' in err && typeof err.code === 'string' ? `${err.code}: ` : '';
  summary.ledgerErrors++;
  summary.ledgerError ??= `${code}${cause}`;
  return cause;
}

/**
 * Rows per ledger read: small enough never to hold 100k rows at once, big enough that a long run makes few reads.
 * The unsettled rows (the sweep, resolve, reprocess) come in GUID order from their partial index
 * (src/store/shared/unsettledIndex.ts); purge's DONE rows have no index in GUID order, so a page of them may sort every
 * matching row, and fewer, bigger pages keep a long run from spending its time re-reading.
 */
export const PAGE_SIZE = 2000;

/** Which rows a run works on: a ledger query without its paging. */
export type RowFilter = Omit<LedgerQuery, 'afterGuid' | 'beforeRow' | 'limit'>;

/**
 * The first condition of `filter` that `row` fails, judged as the store's query judges it, or null when the row
 * matches: why a run's selection left a row out (the operator API's E409). `inquiryDueBy` needs the inquiry
 * schedule beside the log and is not judged here.
 */
export function unmetCondition(filter: RowFilter, row: LedgerState): Exclude<keyof RowFilter, 'inquiryDueBy'> | null {
  if (filter.guid !== undefined && row.guid !== filter.guid) return 'guid';
  if (filter.statuses !== undefined && !filter.statuses.includes(row.status)) return 'statuses';
  if (filter.updatedBefore !== undefined && !(row.updatedAt < filter.updatedBefore)) return 'updatedBefore';
  if (filter.sentAtOrBefore !== undefined && !(row.sentAt !== null && row.sentAt <= filter.sentAtOrBefore)) return 'sentAtOrBefore';
  if (filter.attemptsBelow !== undefined && !(row.attempts < filter.attemptsBelow)) return 'attemptsBelow';
  if (filter.attemptsAtLeast !== undefined && !(row.attempts >= filter.attemptsAtLeast)) return 'attemptsAtLeast';
  return null;
}

/**
 * The ledger rows matching `filter`, in GUID order, read a page at a time (keyset paging on the GUID); with
 * `filter.order` `updated`, newest change first (keyset on the last change and the GUID).
 * Rows that change while the caller works on a page simply stop matching: each row comes at most once.
 * A page that cannot be read is thrown (its StoreError): an async iteration has no Left; `forEachBounded`
 * hands it to its caller.
 */
export async function* pagedRows(
  store: LedgerReadModel,
  filter: RowFilter,
  opts: { limit?: number | undefined; pageSize?: number; /** Start after this GUID (a page cursor). */ afterGuid?: string | undefined } = {},
): AsyncGenerator<LedgerState> {
  const pageSize = Math.max(1, opts.pageSize ?? PAGE_SIZE);
  let remaining = opts.limit ?? Number.POSITIVE_INFINITY;
  let afterGuid = opts.afterGuid;
  let beforeRow: LedgerQuery['beforeRow'];
  while (remaining > 0) {
    const want = Math.min(pageSize, remaining);
    const page = await orThrow(store.queryLedger({ ...filter, ...(afterGuid === undefined ? {} : { afterGuid }), ...(beforeRow === undefined ? {} : { beforeRow }), limit: want }));
    for (const row of page) yield row;
    remaining -= page.length;
    if (page.length < want) return;
    const last = page[page.length - 1]!;
    if (filter.order === 'updated') beforeRow = { updatedAt: last.updatedAt, guid: last.guid };
    else afterGuid = last.guid;
  }
}

/** How many rows a run over `filter` will visit (for the progress bar). */
export async function countRows(store: LedgerReadModel, filter: RowFilter, limit: number | undefined): StoreResult<number> {
  return E.map((n: number) => (limit === undefined ? n : Math.min(n, limit)))(await store.countLedger(filter));
}

/**
 * Runs `work` over every item of `source` with at most `concurrency` at a time. Once `stop()` says so, no new
 * item is started; the ones in flight finish. `work` must not throw (it counts its own failures).
 */
export async function forEachBounded<T>(source: AsyncIterable<T>, concurrency: number, work: (item: T) => Promise<void>, stop: () => boolean = () => false): Promise<void> {
  const iterator = source[Symbol.asyncIterator]();
  let sourceError: unknown;
  let failed = false;
  async function worker(): Promise<void> {
    for (;;) {
      if (failed || stop()) return;
      let next: IteratorResult<T>;
      try {
        // Concurrent next() calls on an async generator are queued by the language: each item comes once.
        next = await iterator.next();
      } catch (err) {
        if (!failed) sourceError = err;
        failed = true;
        return;
      }
      if (next.done === true) return;
      await work(next.value);
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, Math.floor(concurrency)) }, worker));
  if (failed) throw sourceError;
  await iterator.return?.(undefined);
}

/**
 * How long a maintenance run holds a row it took (by the ledger's clock): far longer than one inquiry or send
 * takes, short enough that the rows a dead process held come back to the others soon.
 */
const LEASE_MS = 120_000;

/** Rows leased at once: a few per worker, so a lease is taken shortly before its row is worked on. */
const LEASE_BATCH_PER_WORKER = 2;

/** Tells this process from an earlier one that had the same pid (a restart, a container's pid 1). */
const PROCESS_TAG = randomUUID().slice(0, 8);

/**
 * Who holds a lease, as an operator would look for it: host and process, then `role` (a holder that is the same
 * for every run of one loop in this process, such as serve's settler) or one run of it.
 */
export const leaseHolder = (role?: string): string => `${hostname()}:${process.pid}:${role === undefined ? randomUUID().slice(0, 8) : `${role}:${PROCESS_TAG}`}`;

/** Waits before each retry of ending a run's leases: a lock or a connection lost for a moment, bounded in all. */
const RELEASE_RETRY_DELAYS_MS = [100, 300, 900] as const;

/**
 * Ends `holder`'s leases, trying again a few times when the ledger refuses: rows left leased are skipped by every
 * other run until the lease runs out (`LEASE_MS`). Once `signal` is aborted (serve shutting down) it tries once.
 */
async function releaseLeasesRetrying(store: RowLeases, holder: string, signal: AbortSignal | undefined): Promise<boolean> {
  for (let attempt = 0; ; attempt++) {
    if (E.isRight(await store.releaseLeases(holder))) return true;
    const delay = RELEASE_RETRY_DELAYS_MS[attempt];
    if (delay === undefined || signal?.aborted === true) return false;
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/**
 * The rows of `source` this run may work on: leased a small batch at a time (`RowLeases.leaseRows`), so that
 * several processes running the same maintenance at once each take different rows. A row another process holds,
 * or that moved since it was read, is left out, and handed to `notLeased` (if given): the run did not work on it.
 * The leases end when the run does (`releaseLeases` in the caller's `finally`, retried), or when the holder's next
 * run starts (a holder given by the caller), or run out after `LEASE_MS`.
 */
async function* leasedRows(
  store: RowLeases,
  source: AsyncIterable<LedgerState>,
  lease: { readonly holder: string; readonly workers: number; readonly notLeased?: ((row: LedgerState) => void) | undefined },
): AsyncGenerator<LedgerState> {
  const size = Math.max(1, Math.floor(lease.workers) * LEASE_BATCH_PER_WORKER);
  let batch: LedgerState[] = [];
  const take = async (rows: readonly LedgerState[]): Promise<LedgerState[]> => {
    // Like a page that cannot be read: thrown (an async iteration has no Left), and `forEachBounded` hands it on.
    const leased = await orThrow(store.leaseRows(lease.holder, rows, LEASE_MS));
    for (const r of rows) if (!leased.has(r.guid)) lease.notLeased?.(r);
    return rows.filter((r) => leased.has(r.guid));
  };
  for await (const row of source) {
    batch.push(row);
    if (batch.length < size) continue;
    const rows = batch;
    batch = [];
    yield* await take(rows);
  }
  if (batch.length > 0) yield* await take(batch);
}

/** What every run over rows (resolve, reprocess) is given besides its own rules; `O`: how a row can end. */
/** Why a row selected for a run was left alone (`not-leased`, and it did not move): another run leased it and is inquiring about or sending it right now. */
export const HELD_ELSEWHERE = 'held by another run (the background settler or another process); try again shortly';

export interface RowRunOptions<O extends string> {
  readonly limit?: number | undefined;
  /** Only this GUID: the operator API's action on one GUID. */
  readonly guid?: string | undefined;
  /** The key that asked (the operator API), recorded in the events' actor. */
  readonly key?: string | undefined;
  /** Rows worked on at once (default: `--concurrency`'s). */
  readonly concurrency?: number | undefined;
  /** Change nothing, call nothing: report the candidates. */
  readonly dryRun?: boolean | undefined;
  readonly onProgress?: ((done: number, total: number) => void) | undefined;
  /** Once aborted, no new row is started; the rows in flight finish and the summary counts what was done. */
  readonly signal?: AbortSignal | undefined;
  /** Each row as it is worked on (or listed, in a dry run), or `not-leased`: selected, but another run held it or it moved (left alone). */
  readonly onRow?: ((row: LedgerState, outcome: O, detail?: string) => void) | undefined;
}

/**
 * A run over the rows `filter` selects: counted first (the progress's total), then each row, leased unless it is a
 * dry run, counted as a candidate and, in a dry run, only listed; otherwise handed to `work` with `progressed`, by
 * which it says how the row ended. No row is started after a ledger failure or once the run is aborted; a page or
 * a lease that cannot be had ends the run as a ledger failure of `summary`. `lease`: the holder and the signal
 * for ending the leases (`LeasedRunOptions`).
 */
export async function runOverRows<O extends string>(
  store: LedgerReadModel & RowLeases,
  filter: RowFilter,
  opts: RowRunOptions<O | 'candidate' | 'not-leased'>,
  summary: LedgerFailures & { candidates: number },
  work: (row: LedgerState, progressed: (outcome: O, detail?: string) => void) => Promise<void>,
  lease: Pick<LeasedRunOptions, 'holder' | 'signal'> = {},
): Promise<void> {
  const counted = await countRows(store, filter, opts.limit);
  if (E.isLeft(counted)) {
    ledgerFailed(summary, counted.left);
    return;
  }
  const total = counted.right;
  let done = 0;
  const progressed = (row: LedgerState, outcome: O | 'candidate' | 'not-leased', detail?: string): void => {
    done++;
    opts.onRow?.(row, outcome, detail);
    opts.onProgress?.(done, Math.max(total, done));
  };
  opts.onProgress?.(0, total);
  const dryRun = opts.dryRun === true;
  const each = async (row: LedgerState): Promise<void> => {
    summary.candidates++;
    if (dryRun) return progressed(row, 'candidate');
    return work(row, (outcome, detail) => progressed(row, outcome, detail));
  };
  try {
    const stop = () => summary.ledgerErrors > 0 || opts.signal?.aborted === true;
    const concurrency = dryRun ? 1 : (opts.concurrency ?? DEFAULTS.concurrency);
    await forEachLeasedRow(store, pagedRows(store, filter, { limit: opts.limit }), { leased: !dryRun, concurrency, stop, notLeased: (row) => progressed(row, 'not-leased'), ...lease }, each);
  } catch (err) {
    // A page of the ledger could not be read, or a lease not taken.
    ledgerFailed(summary, err);
  }
}

export interface LeasedRunOptions {
  readonly leased: boolean;
  readonly concurrency: number;
  readonly stop: () => boolean;
  readonly notLeased?: ((row: LedgerState) => void) | undefined;
  /**
   * The lease holder, for a caller whose runs never overlap (serve's settler: `leaseHolder('settler')`): each run
   * first ends what an earlier run of it left leased (its release failed: the ledger was down), and takes over
   * those rows. Default: a holder of this run alone.
   */
  readonly holder?: string | undefined;
  /** Aborted: ending the leases is tried once, not retried (serve shutting down must not wait on it). */
  readonly signal?: AbortSignal | undefined;
}

/**
 * `forEachBounded` over the rows of a maintenance run that calls the account system (inquiries, sends): with
 * `leased`, only rows this run leased (`leasedRows`), the leases ended when it is over, done or failed; a row it
 * could not lease (another run holds it, or it moved since it was read) goes to `notLeased` instead of `work`.
 */
export async function forEachLeasedRow(store: RowLeases, source: AsyncIterable<LedgerState>, opts: LeasedRunOptions, work: (row: LedgerState) => Promise<void>): Promise<void> {
  if (!opts.leased) return forEachBounded(source, opts.concurrency, work, opts.stop);
  const holder = opts.holder ?? leaseHolder();
  // Once is enough here: a lease still ours is taken over anyway when its row comes up (leaseRows keeps ours).
  if (opts.holder !== undefined) await store.releaseLeases(holder);
  try {
    await forEachBounded(leasedRows(store, source, { holder, workers: opts.concurrency, notLeased: opts.notLeased }), opts.concurrency, work, opts.stop);
  } finally {
    // Leases left behind run out by themselves (or go at the holder's next run); failing to end them early is no
    // failure of the run.
    await releaseLeasesRetrying(store, holder, opts.signal);
  }
}
