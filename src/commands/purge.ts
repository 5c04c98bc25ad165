import * as E from 'fp-ts/lib/Either.js';
import type { StoreError } from '../events/errors.js';
import type { EventLog, LedgerClock, LedgerMaintenance, LedgerReadModel } from '../events/store.js';
import { ledgerTime } from '../events/policy.js';
import { orThrow } from '../events/storeResult.js';
import type { LedgerState } from '../events/state.js';
import { countRows, pagedRows, PAGE_SIZE, type RowFilter } from './rows.js';

export interface PurgeSummary {
  /** DONE rows that became PURGED tombstones (in a dry run: that would). */
  purged: number;
  /** Tombstones older than the tombstone retention deleted with their events (in a dry run: that would be). */
  tombstonesRemoved: number;
  /** The ledger's size on disk (file + WAL) when the run began and after the freed space went back; equal in a dry run. */
  bytesBefore: number;
  bytesAfter: number;
  dryRun: boolean;
  /** DONE rows last changed before now − retention, when the run began. `candidates − purged` moved meanwhile. */
  candidates: number;
}

export interface PurgeDeps {
  readonly store: EventLog & LedgerReadModel & LedgerMaintenance & LedgerClock;
  /** What the retention is judged by; default the ledger's clock (`store.now()`: on PostgreSQL the database's). */
  readonly clock?: () => number;
}

export interface PurgeOptions {
  readonly retentionMs: number;
  readonly tombstoneRetentionMs: number;
  readonly dryRun?: boolean | undefined;
  readonly onProgress?: ((done: number, total: number) => void) | undefined;
  /** Once aborted, no new row is started; the rows in flight finish and the summary counts what was done. */
  readonly signal?: AbortSignal | undefined;
  readonly onRow?: ((row: LedgerState, outcome: 'candidate' | 'purged' | 'skipped') => void) | undefined;
}

/**
 * `guidgate purge`: DONE rows whose last event is older than now − retention become PURGED tombstones (the raw
 * request and response leave the log, `decide` refuses any row that is not DONE or is too young, so UNKNOWN,
 * FAILED, RECEIVED and SENT rows are never purged whatever their age); then tombstones older than the
 * tombstone retention are deleted with their events; then the freed pages go back to the file system.
 * Rows are read a page at a time by GUID; each page's purges share the write transactions (group commit).
 * A ledger failure rejects with its StoreError (the purges already committed stay; running again continues):
 * the run ends there, and `withLedger` reports it.
 */
export async function purgeDone(deps: PurgeDeps, opts: PurgeOptions): Promise<PurgeSummary> {
  const { store } = deps;
  const dryRun = opts.dryRun === true;
  const now = await orThrow(ledgerTime(store, deps.clock));
  const filter: RowFilter = { statuses: ['DONE'], updatedBefore: now - opts.retentionMs };
  const tombstonesBefore = now - opts.tombstoneRetentionMs;
  const summary: PurgeSummary = { purged: 0, tombstonesRemoved: 0, bytesBefore: 0, bytesAfter: 0, dryRun, candidates: 0 };

  const sizeAtStart = await orThrow(store.spaceOnDisk());
  const total = await orThrow(countRows(store, filter, undefined));
  opts.onProgress?.(0, total);
  let done = 0;

  let page: LedgerState[] = [];
  const flush = async (): Promise<void> => {
    const rows = page;
    page = [];
    if (dryRun) {
      for (const row of rows) opts.onRow?.(row, 'candidate');
    } else {
      const results = await Promise.all(rows.map((row) => store.execute(row.guid, { type: 'Purge', retentionMs: opts.retentionMs }, { params: { retentionMs: opts.retentionMs } })));
      let failure: StoreError | undefined;
      results.forEach((r, i) => {
        if (E.isLeft(r)) {
          failure ??= r.left;
          return;
        }
        const purged = r.right.kind === 'applied';
        if (purged) summary.purged++;
        opts.onRow?.(rows[i]!, purged ? 'purged' : 'skipped');
      });
      if (failure !== undefined) throw failure;
    }
    done += rows.length;
    opts.onProgress?.(done, Math.max(total, done));
  };

  for await (const row of pagedRows(store, filter, { pageSize: PAGE_SIZE })) {
    summary.candidates++;
    page.push(row);
    if (page.length >= PAGE_SIZE) {
      await flush();
      if (opts.signal?.aborted === true) break;
    }
  }
  await flush();
  if (opts.signal?.aborted === true) {
    // Interrupted: what was purged stays purged; tombstones and space wait for the next run.
    summary.bytesBefore = summary.bytesAfter = sizeAtStart;
    return summary;
  }

  if (dryRun) {
    summary.tombstonesRemoved = await orThrow(store.countLedger({ statuses: ['PURGED'], updatedBefore: tombstonesBefore }));
    summary.bytesBefore = summary.bytesAfter = sizeAtStart;
    return summary;
  }
  summary.tombstonesRemoved = await orThrow(store.removeTombstones(tombstonesBefore));
  const space = await orThrow(store.reclaimSpace());
  summary.bytesBefore = sizeAtStart > 0 ? sizeAtStart : space.bytesBefore;
  summary.bytesAfter = space.bytesAfter;
  return summary;
}
