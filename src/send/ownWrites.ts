import * as E from 'fp-ts/lib/Either.js';
import type { EventKey, EventStore, StoreResult } from '../events/store.js';

/** This relay's most recently acknowledged events (the last of each write), the newest `size` kept. */
export interface RecentWrites {
  remember(key: EventKey): void;
  /** The events remembered now, oldest first. */
  recent(): EventKey[];
  /** Starts over: the ones remembered were judged against a standing the guard has moved past. */
  forget(): void;
}

export function recentWrites(size: number): RecentWrites {
  const ring: EventKey[] = [];
  return {
    remember(key) {
      ring.push(key);
      if (ring.length > size) ring.splice(0, ring.length - size);
    },
    recent: () => ring.slice(),
    forget() {
      ring.length = 0;
    },
  };
}

/**
 * The store as the relay, settler and sweeper use it under the continuity guard: the last event of each acknowledged
 * write is told to `acknowledged` (the guard checks later that it is still there), and a failed call to `failed`
 * (a failover under way shows first as a failed call). It changes no result.
 */
export function watchOwnWrites(inner: EventStore, watcher: { acknowledged(key: EventKey): void; failed(): void }): EventStore {
  const watched = async <T>(result: StoreResult<T>, lastEvent: (value: T) => EventKey | null): StoreResult<T> => {
    const r = await result;
    if (E.isLeft(r)) watcher.failed();
    else {
      const key = lastEvent(r.right);
      if (key !== null) watcher.acknowledged(key);
    }
    return r;
  };
  return {
    ...inner,
    execute: (...a) => watched(inner.execute(...a), (r) => (r.kind === 'applied' ? lastOf(r.events) : null)),
    appendEvents: (...a) => watched(inner.appendEvents(...a), (r) => (r.won ? lastOf(r.events) : null)),
    getLedger: (...a) => watched(inner.getLedger(...a), () => null),
  };
}

const lastOf = (events: readonly { guid: string; seq: number }[]): EventKey | null => {
  const e = events[events.length - 1];
  return e === undefined ? null : { guid: e.guid, seq: e.seq };
};
