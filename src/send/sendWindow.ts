import type * as E from 'fp-ts/lib/Either.js';
import type { StoreError } from '../events/errors.js';
import type { StoreResult } from '../events/storeResult.js';

/**
 * The send window: how long after a relay starts writing a claim (Claimed + Sent, or the Sent of a resend) it may
 * still call the account system for it. One rule for every path that sends (`sendClaimed`).
 *
 * Why a call inside the window cannot meet another process's send: the orphan sweep takes a SENT row over only once
 * the ledger's clock passes its `sentAt + timeoutMs + grace`, and `sentAt` is stamped at or after the moment the
 * relay started the write (SQLite: the relay's clock read when it submits the write; PostgreSQL: the server's clock
 * read inside the write's transaction). The account client's overall deadline counts from the call's start or the
 * window's end (startedAt + grace/2), whichever is earlier, and is checked on the monotonic clock right before the
 * request's first byte is written: so no byte leaves after startedAt + grace/2 + `timeoutMs`, whatever pause falls
 * between this check and the write, and that is grace/2 before anyone may sweep the row, inquire, and send it
 * again. That other half is for what the relay's monotonic clock does not see: a step between its clock and the
 * ledger's, a pause hidden from a VM's guest, bytes still in flight. A claim acknowledged later than the window (a
 * commit whose reply was held, a process frozen after its commit) is not called at all: the row stays SENT and the
 * sweep settles it like any orphan.
 */

/**
 * The smallest `--grace` accepted. Its half, 250 ms, must hold a claim's commit under load, and its other half cover
 * a pause or clock step between the window's check and the request leaving: NTP (ntpd) steps a clock only for an
 * offset over 128 ms, and slews smaller ones. Below this a relay would lose claims to E503 under ordinary load
 * (docs/architecture.md, "The grace and the send window": at 200 ms, 0.2-3% of claims missed their window under 50 concurrent transfers here).
 */
export const MIN_GRACE_MS = 500;

/** The send window of a grace, and the deadline of the claim's own write: half the grace (see above). */
export function sendWindowMs(graceMs: number): number {
  return Math.floor(graceMs / 2);
}

/** The clock the window is measured on: monotonic, never stepped by NTP or an operator. */
export type MonotonicClock = () => number;
export const monotonicNow: MonotonicClock = () => performance.now();

/** A ledger write and the monotonic time taken right before it was submitted: the start of its send window. */
export interface TimedWrite<T> {
  readonly startedAt: number;
  readonly result: E.Either<StoreError, T>;
}

/** Runs `write`, taking the clock immediately before it (not when it is acknowledged: a late acknowledgement must count). */
export async function timedWrite<T>(clock: MonotonicClock, write: () => StoreResult<T>): Promise<TimedWrite<T>> {
  const startedAt = clock();
  return { startedAt, result: await write() };
}
