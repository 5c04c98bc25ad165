import type { LedgerQuery, LedgerReadModel, StoreResult } from '../events/store.js';
import { orThrow } from '../events/storeResult.js';
import * as E from 'fp-ts/lib/Either.js';
import type { LedgerState } from '../events/state.js';

/**
 * Rows per ledger read: small enough never to hold 100k rows at once, big enough that the reads stay cheap.
 * (With the v1 indexes a filtered page sorts every matching row by GUID, ~45 ms at 100k matches, so fewer,
 * bigger pages are what keeps a long run from spending its time re-reading.)
 */
export const PAGE_SIZE = 2000;

export type RowFilter = Omit<LedgerQuery, 'afterGuid' | 'limit'>;

/**
 * The ledger rows matching `filter`, in GUID order, read a page at a time (keyset paging on the GUID).
 * Rows that change while the caller works on a page simply stop matching: each row comes at most once.
 * A page that cannot be read is thrown (its StoreError): an async iteration has no Left; `forEachBounded`
 * hands it to its caller.
 */
export async function* pagedRows(store: LedgerReadModel, filter: RowFilter, opts: { limit?: number | undefined; pageSize?: number } = {}): AsyncGenerator<LedgerState> {
  const pageSize = Math.max(1, opts.pageSize ?? PAGE_SIZE);
  let remaining = opts.limit ?? Number.POSITIVE_INFINITY;
  let afterGuid: string | undefined;
  while (remaining > 0) {
    const want = Math.min(pageSize, remaining);
    const page = await orThrow(store.queryLedger({ ...filter, ...(afterGuid === undefined ? {} : { afterGuid }), limit: want }));
    for (const row of page) yield row;
    remaining -= page.length;
    if (page.length < want) return;
    afterGuid = page[page.length - 1]!.guid;
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
