/**
 * Group work: items pushed while batches are out (or in one turn of the event loop) go together in the next batch,
 * up to `maxBatch` items, with up to `maxInFlight` batches out at once. The one queue the stores batch through:
 * PostgreSQL's group commit, its coalesced row reads and SQLite's writer.
 */
export interface Batcher<T> {
  push(item: T): void;
  /** Settles once nothing is queued or out. */
  drain(): Promise<void>;
}

export function batcher<T>(o: { readonly maxBatch: number; readonly maxInFlight: number; readonly run: (batch: T[]) => Promise<void> }): Batcher<T> {
  let queue: T[] = [];
  let inFlight = 0;
  let scheduled = false;
  const idle: Array<() => void> = [];

  function pump(): void {
    scheduled = false;
    while (inFlight < o.maxInFlight && queue.length > 0) {
      const batch = queue.length <= o.maxBatch ? queue : queue.slice(0, o.maxBatch);
      queue = queue.length <= o.maxBatch ? [] : queue.slice(o.maxBatch);
      inFlight++;
      // `run` settles its own items and never rejects (a rejection is a bug, left to surface as an unhandled one).
      void o.run(batch).finally(() => {
        inFlight--;
        schedule();
        if (inFlight === 0 && queue.length === 0) for (const wake of idle.splice(0)) wake();
      });
    }
  }

  function schedule(): void {
    if (scheduled || queue.length === 0) return;
    scheduled = true;
    setImmediate(pump);
  }

  return {
    push(item) {
      queue.push(item);
      schedule();
    },
    drain() {
      if (inFlight === 0 && queue.length === 0) return Promise.resolve();
      return new Promise((resolve) => idle.push(resolve));
    },
  };
}
