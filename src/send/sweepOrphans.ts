import * as E from 'fp-ts/lib/Either.js';
import type { NewEvent } from '../events/codecs.js';
import { decide, type Command } from '../events/decide.js';
import type { EventLog, LedgerReadModel, StoreResult } from '../events/store.js';

export interface SweepSummary {
  /** RECEIVED rows that never got their Sent: FAILED (never sent). */
  readonly neverSent: number;
  /** SENT rows past their call timeout plus the grace: UNKNOWN (orphaned). */
  readonly orphaned: number;
}

/**
 * Settles the rows a dead process left behind (CONTRACT.md §4). A SENT row is only an orphan once its own
 * call timeout plus the grace has passed: before that its owner may still be waiting for the answer, and
 * after it no owner can be (every call is bounded by its timeout). The decision per row is `decide`'s, taken
 * inside the write transaction, so a row its owner settles meanwhile is left alone. With `dryRun` the same
 * decision is taken on each row as read, and nothing is appended: what the sweep would do now.
 */
export async function sweepOrphans(
  store: EventLog & LedgerReadModel,
  graceMs: number,
  now: number,
  opts: { readonly dryRun?: boolean; /** Only this GUID's row (resolve of one GUID). */ readonly guid?: string | undefined; /** The key that asked, for the events' actor. */ readonly key?: string | undefined } = {},
): StoreResult<SweepSummary> {
  const read = await store.queryLedger({ statuses: ['RECEIVED', 'SENT'], updatedBefore: now - graceMs + 1, ...(opts.guid === undefined ? {} : { guid: opts.guid }) });
  if (E.isLeft(read)) return read;
  const candidates = read.right;
  const command: Command = { type: 'SweepOrphan', graceMs };
  let appended: ReadonlyArray<readonly NewEvent[]>;
  if (opts.dryRun === true) {
    appended = candidates.map((row) => {
      const decided = decide(row, command, now);
      return E.isRight(decided) ? decided.right : [];
    });
  } else {
    // Every row's unit runs; the first failure is the answer (the units that went through stay appended).
    const executed = E.sequenceArray(await Promise.all(candidates.map((row) => store.execute(row.guid, command, { key: opts.key, params: { graceMs } }))));
    if (E.isLeft(executed)) return executed;
    appended = executed.right.map((r) => (r.kind === 'applied' ? r.events : []));
  }
  let neverSent = 0;
  let orphaned = 0;
  for (const events of appended) {
    const last = events[events.length - 1];
    if (last?.type === 'ConnectFailed') neverSent++;
    else if (last?.type === 'TimedOut') orphaned++;
  }
  return E.right({ neverSent, orphaned });
}
