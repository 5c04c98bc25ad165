import type { Caller } from '../shared/writeDeadline.js';
import { reviveError, type OpOutcome, type WriteOp } from './writeEngine.js';

/** What the store asks of a writer, on this thread (inlineWriter.ts) or on a thread of its own (threadWriter.ts). */
export interface Writer {
  /** Settles once the writer can write (or never will): a write's deadline counts from then, not from a thread's start. */
  readonly started: Promise<void>;
  /**
   * `caller.gaveUp` turns true when the caller stops waiting (the write deadline); a unit not yet written then is not
   * written at all, since its caller has answered E503 and will never call for it.
   */
  submit(op: WriteOp, caller: Caller): Promise<unknown>;
  /** Why this writer writes nothing any more, or null while it works. */
  problem(): string | null;
  /**
   * The highest log position known to be on disk while this writer has commits that may not be (an outcome
   * answered at its commit, whose sync is the next batch's); null when every commit it made is on disk.
   */
  durablePosition(): number | null;
  close(): Promise<void>;
}

/** The hands of a submitted unit's promise. */
export interface Pending {
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

/** Settles a unit by its outcome from the write engine, an error as its class. */
export function settle(p: Pending, outcome: OpOutcome): void {
  if (outcome.ok) p.resolve(outcome.value);
  else p.reject(reviveError(outcome.error));
}
