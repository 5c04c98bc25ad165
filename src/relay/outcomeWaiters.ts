import * as E from 'fp-ts/lib/Either.js';
import type { EventStore, LedgerReadModel } from '../events/store.js';
import type { LedgerState } from '../events/state.js';

/** How often the rows of the GUIDs waited for are read, while any is: what another process recorded is seen this late at most. */
export const WAITERS_POLL_MS = 100;

/** How a wait ended: the outcome was recorded, the time ran out, or the waiter was let go (its channel left, shutdown). */
export type WaitEnd = 'settled' | 'timeout' | 'released';

/** A place held in the waiting room by one channel request (`--max-waiters` of them at most). */
export interface WaiterSlot {
  /** Waits for the GUID's row to leave RECEIVED and SENT, at most `ms`; `signal`: the channel went away. */
  wait(ms: number, signal?: AbortSignal): Promise<WaitEnd>;
  /** Gives the place back. */
  leave(): void;
}

/**
 * The resends waiting for an outcome (CONTRACT.md §2, `Prefer: wait`). A waiter holds no lock, no lease and no
 * connection to the ledger: a timer and an entry in a map keyed by GUID. It hears of an outcome two ways:
 * - recorded by this process: `settled(guid)`, which the store `watchOutcomes` wraps calls after every acknowledged
 *   write that leaves a row neither RECEIVED nor SENT (the relay's own answers, the sweep, the settler, the operator API);
 * - recorded by another process sharing the ledger: while anyone waits, every `pollMs` one query (per 500 GUIDs)
 *   asks the store which of the GUIDs waited for have left RECEIVED and SENT (`queryLedger` with `guids`: SQLite
 *   `guid IN (…)`, PostgreSQL `guid = ANY($1)`, by primary key); only those rows are decoded.
 */
export interface OutcomeWaiters {
  /** A place for `guid`, or null when `--max-waiters` are waiting already or the relay is shutting down. */
  enter(guid: string): WaiterSlot | null;
  /** An acknowledged write left `guid`'s row neither RECEIVED nor SENT: its waiters are woken. */
  settled(guid: string): void;
  /** Places held now. */
  readonly waiting: number;
  /** Shutdown: every waiter is woken now (`released`), and every later `enter` is refused. */
  close(): void;
}

/** GUIDs read in one query by the poll. */
const POLL_BATCH = 500;
/** Every status but RECEIVED and SENT: a row in one of them has its outcome recorded. */
const SETTLED_STATUSES = ['DONE', 'UNKNOWN', 'FAILED', 'PURGED'] as const;

/** A row still in progress: its waiters keep waiting. */
const inProgress = (row: LedgerState | null): boolean => row !== null && (row.status === 'RECEIVED' || row.status === 'SENT');

export function createOutcomeWaiters(o: { readonly store: Pick<LedgerReadModel, 'getLedger' | 'queryLedger'>; readonly maxWaiters: number; readonly pollMs?: number }): OutcomeWaiters {
  const pollMs = o.pollMs ?? WAITERS_POLL_MS;
  /** The wake-up of each wait in progress, by GUID. */
  const byGuid = new Map<string, Set<(end: WaitEnd) => void>>();
  let places = 0;
  let closed = false;
  let timer: NodeJS.Timeout | null = null;
  let polling = false;

  const wake = (guid: string, end: WaitEnd): void => {
    const waking = byGuid.get(guid);
    if (waking === undefined) return;
    byGuid.delete(guid);
    for (const w of waking) w(end);
  };
  /** Whether `guid`'s row has left RECEIVED and SENT; a ledger that cannot be read: not known, asked again next tick. */
  const check = async (guid: string): Promise<void> => {
    const row = await o.store.getLedger(guid);
    if (E.isRight(row) && !inProgress(row.right)) wake(guid, 'settled');
  };
  /** One query per POLL_BATCH GUIDs waited for: the rows among them that have left RECEIVED and SENT. */
  const readSettled = async (guids: readonly string[]): Promise<void> => {
    const rows = await o.store.queryLedger({ guids, statuses: SETTLED_STATUSES });
    if (E.isRight(rows)) for (const row of rows.right) wake(row.guid, 'settled');
  };
  const poll = (): void => {
    if (polling) return; // the previous tick's reads are still out: no pile-up behind a slow ledger
    polling = true;
    const guids = [...byGuid.keys()];
    const batches: Promise<void>[] = [];
    for (let i = 0; i < guids.length; i += POLL_BATCH) batches.push(readSettled(guids.slice(i, i + POLL_BATCH)));
    void Promise.all(batches).finally(() => {
      polling = false;
    });
  };
  const startOrStopPolling = (): void => {
    if (byGuid.size > 0 && timer === null) {
      timer = setInterval(poll, pollMs);
      timer.unref();
    } else if (byGuid.size === 0 && timer !== null) {
      clearInterval(timer);
      timer = null;
    }
  };

  const wait = (guid: string, ms: number, signal?: AbortSignal): Promise<WaitEnd> =>
    new Promise<WaitEnd>((resolve) => {
      if (closed || signal?.aborted === true) return resolve('released');
      let set = byGuid.get(guid);
      if (set === undefined) byGuid.set(guid, (set = new Set()));
      const done = (end: WaitEnd): void => {
        clearTimeout(timeout);
        signal?.removeEventListener('abort', onAbort);
        const mine = byGuid.get(guid);
        if (mine !== undefined) {
          mine.delete(done);
          if (mine.size === 0) byGuid.delete(guid);
        }
        startOrStopPolling();
        resolve(end);
      };
      const onAbort = (): void => done('released');
      const timeout = setTimeout(() => done('timeout'), Math.max(0, ms));
      signal?.addEventListener('abort', onAbort, { once: true });
      set.add(done);
      startOrStopPolling();
      // The outcome may have been recorded between the caller's read and now: looked at once at the start.
      void check(guid);
    });

  return {
    enter(guid) {
      if (closed || places >= o.maxWaiters) return null;
      places++;
      let left = false;
      return {
        wait: (ms, signal) => wait(guid, ms, signal),
        leave() {
          if (left) return;
          left = true;
          places--;
        },
      };
    },
    settled: (guid) => wake(guid, 'settled'),
    get waiting() {
      return places;
    },
    close() {
      closed = true;
      for (const guid of [...byGuid.keys()]) wake(guid, 'released');
      startOrStopPolling();
    },
  };
}

/**
 * The store with every acknowledged write that leaves a row neither RECEIVED nor SENT told to `waiters` (after
 * the write is acknowledged, so a woken waiter reads the outcome). The one place the in-process waiters hear from.
 */
export function watchOutcomes(store: EventStore, waiters: Pick<OutcomeWaiters, 'settled'>): EventStore {
  const told = (state: LedgerState | null): void => {
    if (state !== null && !inProgress(state)) waiters.settled(state.guid);
  };
  return {
    ...store,
    async execute(guid, ...rest) {
      const result = await store.execute(guid, ...rest);
      if (E.isRight(result) && result.right.kind === 'applied') told(result.right.state);
      return result;
    },
    async appendEvents(guid, ...rest) {
      const result = await store.appendEvents(guid, ...rest);
      if (E.isRight(result) && result.right.won) told(result.right.state);
      return result;
    },
  };
}
