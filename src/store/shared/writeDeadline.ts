import type { Command } from '../../events/decide.js';
import { LedgerUnavailableError } from '../../events/errors.js';

/**
 * Past the lock wait (SQLite's busy timeout, PostgreSQL's lock_timeout) a commit is not waiting for a lock any
 * more; this margin leaves room for the commit itself (its fsync) under load.
 */
export const WRITE_DEADLINE_MARGIN_MS = 1000;

/**
 * The deadline of the writes a caller waits on before it acts (an outcome, a sweep, a settlement): the lock wait
 * plus the margin; with `limitMs`, never longer than that. A claim (a write that records a Sent: `recordsSent`) and
 * the health probe get the claim deadline `serve` gives, its send window (half of --grace, src/send/sendWindow.ts),
 * so that a claim either commits in time to be called or fails as E503 with nothing written.
 */
export function writeDeadlineMs(lockWaitMs: number, limitMs?: number): number {
  return Math.min(lockWaitMs + WRITE_DEADLINE_MARGIN_MS, limitMs ?? Number.POSITIVE_INFINITY);
}

/**
 * Whether a command's write may record a Sent, after which its caller calls the account system: those are the
 * writes the send window bounds. An outcome, a sweep or an inquiry's settlement only records what happened; cutting
 * one short would turn a call already made into an E901 and an UNKNOWN row, for nothing.
 */
export function recordsSent(command: Command): boolean {
  return command.type === 'Submit' || command.type === 'Send';
}

/** Whoever waits for a unit of work: `gaveUp` turns true at the moment its deadline's timer answers the caller without it. */
export interface Caller {
  gaveUp: boolean;
  /** Set by a writer that must hear of it elsewhere (SQLite's writer thread: its shared slots). */
  onGiveUp?: () => void;
}

/** What a unit left unwritten because its caller stopped waiting fails with (nobody reads it). */
export const CALLER_GAVE_UP = 'ledger write dropped: its caller stopped waiting (the write deadline)';

/**
 * A unit of work submitted for a new `Caller` and waited for until `deadlineMs` (`withDeadline`): when the caller
 * gives up it is marked so, and its writer told, before it is answered; a writer that checks the mark right before
 * it writes the unit leaves it unwritten.
 */
export function submitWithDeadline<T>(submit: (caller: Caller) => Promise<T>, deadlineMs: number, startsWhen?: Promise<void>): Promise<T> {
  const caller: Caller = { gaveUp: false };
  return withDeadline(submit(caller), deadlineMs, 'write', startsWhen, () => {
    caller.gaveUp = true;
    caller.onGiveUp?.();
  });
}

/**
 * The caller of a ledger write gets its result, or LedgerUnavailableError once `deadlineMs` has passed (a
 * stuck fsync, a frozen file system, a writer stuck behind a long batch): a relay waiting on its claim must
 * answer E503 and not call the account system, rather than hang without limit.
 *
 * Why abandoning a write that may still commit is safe: the caller only calls the account system after
 * its claim (Claimed + Sent) resolved, and a rejected claim never resolves. If the write commits later, the
 * ledger holds a claim no process will call for; the orphan sweep treats it like one whose owner died
 * (RECEIVED → FAILED never sent; SENT past its timeout plus the grace → UNKNOWN, which an inquiry then
 * settles: the account system answers absent, and a resend may go). A late outcome write (after the call)
 * leaves the reply at E901, which the contract gives whenever an outcome cannot be recorded.
 *
 * `onGiveUp` runs at the moment the caller stops waiting, before it is told: a writer that checks it before writing
 * never writes a unit whose caller has already answered without it.
 */
export function withDeadline<T>(write: Promise<T>, deadlineMs: number, what: string, startsWhen: Promise<void> = Promise.resolve(), onGiveUp?: () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    // Counted from when the writer can write: a writer thread that is still starting holds no lock yet.
    void startsWhen.then(() => {
      if (settled) return;
      timer = setTimeout(() => {
        settled = true;
        onGiveUp?.();
        reject(new LedgerUnavailableError(`ledger ${what} did not complete within ${deadlineMs} ms (its write deadline)`));
      }, deadlineMs);
    });
    write.then(
      (value) => {
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        settled = true;
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
