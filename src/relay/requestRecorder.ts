import * as E from 'fp-ts/lib/Either.js';
import type { RequestLog, RequestRecord } from '../events/store.js';

/** A flush is due this long after the first record buffered since the last one. */
const REQUEST_FLUSH_MS = 50;
/** This many buffered records are written at once, without waiting for the timer. */
const REQUEST_FLUSH_RECORDS = 256;
/**
 * The most records held in memory (buffered and being written). This is what a crash can lose at most; a ledger
 * that refuses writes for long makes the oldest ones go (counted and logged), never the relay wait.
 */
const REQUEST_BUFFER_MAX = 4096;
/** The longest wait between two writes while the ledger refuses them. */
const RETRY_MAX_MS = 5000;

export interface RequestRecorder {
  /** Buffers one record; never waits and never fails (the reply does not depend on it). */
  record(r: RequestRecord): void;
  /** Writes everything buffered now (what SIGTERM does before the ledger closes). */
  flush(): Promise<void>;
  /** Writes what is buffered; what the ledger still refuses then is lost (counted): the relay is stopping. */
  close(): Promise<void>;
  /** Records lost so far: dropped at the buffer bound, refused by the ledger, or unwritten at close. */
  dropped(): number;
}

export interface RequestRecorderOptions {
  readonly store: RequestLog;
  readonly flushMs?: number;
  readonly flushRecords?: number;
  readonly maxBuffered?: number;
  /** Told once per failed write or drop, with how many records it cost. */
  readonly onLoss?: (lost: number, why: string) => void;
}

/**
 * The channel's requests, recorded off the hot path: a request only pushes into memory; every `flushMs` (or at
 * `flushRecords`) one write stores the batch in one transaction (on SQLite through the same writer, joining its
 * group commit). One write in flight at a time. A write that fails keeps its records for the next one, as long as
 * the bound allows.
 */
export function createRequestRecorder(options: RequestRecorderOptions): RequestRecorder {
  const { store, flushMs = REQUEST_FLUSH_MS, flushRecords = REQUEST_FLUSH_RECORDS, maxBuffered = REQUEST_BUFFER_MAX } = options;
  let buffer: RequestRecord[] = [];
  let writing: RequestRecord[] = [];
  let inFlight: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;
  let lost = 0;
  let failedWrites = 0;
  /** After a failed write, the wait before the next one (doubling up to RETRY_MAX_MS); 0 after a success. */
  let retryMs = 0;

  const lose = (n: number, why: string): void => {
    if (n <= 0) return;
    lost += n;
    options.onLoss?.(n, why);
  };

  const write = (): Promise<void> => {
    if (inFlight !== null) return inFlight;
    if (timer !== null) {
      clearTimeout(timer);
      timer = null;
    }
    if (buffer.length === 0) return Promise.resolve();
    writing = buffer;
    buffer = [];
    inFlight = store.recordRequests(writing).then((written) => {
      if (E.isRight(written)) {
        writing = [];
        retryMs = 0;
        return;
      }
      failedWrites++;
      retryMs = Math.min(RETRY_MAX_MS, Math.max(flushMs, retryMs * 2));
      // Kept for the next write, oldest first, within the bound.
      const kept = [...writing, ...buffer];
      writing = [];
      buffer = kept.slice(Math.max(0, kept.length - maxBuffered));
      lose(kept.length - buffer.length, `request records not written: ${written.left.message}`);
    }).finally(() => {
      inFlight = null;
      if (buffer.length > 0) schedule();
    });
    return inFlight;
  };

  function schedule(): void {
    // A full batch goes at once, unless the last write failed: then only the timer retries, backing off, so that
    // a ledger failing at once (a lost file, a closed store, a refused connection) is never retried in a loop of
    // microtasks that would starve the event loop, the replies included.
    if (buffer.length >= flushRecords && retryMs === 0) {
      void write();
      return;
    }
    if (timer !== null) return;
    timer = setTimeout(() => {
      timer = null;
      void write();
    }, retryMs === 0 ? flushMs : retryMs);
    timer.unref();
  }

  async function flush(): Promise<void> {
    // Until nothing is buffered or in flight; a write that fails ends it (its records stay buffered).
    for (;;) {
      if (inFlight !== null) {
        await inFlight;
        continue;
      }
      if (buffer.length === 0) return;
      const failedBefore = failedWrites;
      await write();
      if (failedWrites !== failedBefore) return;
    }
  }

  return {
    record(r) {
      if (buffer.length + writing.length >= maxBuffered) {
        lose(1, `request record buffer full (${maxBuffered})`);
        // The oldest buffered one goes; if every held record is in the write in flight, this one does.
        if (buffer.length === 0) return;
        buffer.shift();
      }
      buffer.push(r);
      schedule();
    },
    flush,
    async close() {
      await flush();
      if (timer !== null) clearTimeout(timer);
      timer = null;
      const left = buffer.length;
      buffer = [];
      lose(left, 'request records not written before the relay stopped');
    },
    dropped: () => lost,
  };
}
