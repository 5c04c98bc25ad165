import * as E from 'fp-ts/lib/Either.js';
import type { Actor, StoredEvent } from '../events/codecs.js';
import type { Break, RecordedBreak } from '../events/reconciliation.js';
import type { EventLog, ReconciliationLog, RequestLog, StoredRequestRecord, StoreResult } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import { evolve } from '../events/evolve.js';

export interface HistoryEntry {
  readonly seq: number;
  readonly type: string;
  /** Milliseconds since the epoch. */
  readonly at: number;
  readonly data: unknown;
}

/** `guidgate history GUID`: the GUID's events in order, for auditors (an empty list: no such GUID). */
export async function readHistory(store: EventLog, guid: string): StoreResult<HistoryEntry[]> {
  return E.map((events: StoredEvent[]) => events.map((e): HistoryEntry => ({ seq: e.seq, type: e.type, at: e.at, data: e.data })))(await store.readStream(guid));
}

/** One line of a GUID's audit trail: an event of the log (with who wrote it) or a channel request. */
export type TimelineEntry =
  | { readonly kind: 'event'; readonly seq: number; readonly type: string; readonly at: number; readonly data: unknown; readonly actor: Actor | null }
  | {
      readonly kind: 'request'; readonly at: number; readonly key: string | null; readonly code: string; readonly fingerprintMatch: boolean;
      /** The row was DONE when the request arrived and it got the stored answer (replayed): nothing was sent for it. */
      readonly replayed: boolean;
    };

/** Whether `q`, arriving when the row was `state`, got the row's stored answer (the relay's replay). */
const replays = (state: LedgerState | null, q: StoredRequestRecord): boolean => state?.status === 'DONE' && q.fingerprintMatch && q.code === state.code;

/**
 * Events and request records interleaved by time, each kind keeping its own order. At the same millisecond the
 * request comes first: its time is its arrival, and what it caused (the claim, a Sent) is stamped after that.
 * A request is `replayed` when the row, folded from the events before it, was DONE and the request got its code (not an
 * E904): the relay answered it from the ledger (its `Idempotent-Replayed: true` header), so its "answered 0000" is no
 * second transfer. The
 * request's time is its arrival by the relay's clock, the events' by the ledger's (on PostgreSQL the database's).
 */
export function timeline(events: readonly StoredEvent[], requests: readonly StoredRequestRecord[]): TimelineEntry[] {
  const entries: TimelineEntry[] = [];
  const byTime = [...requests].sort((a, b) => a.at - b.at || a.position - b.position);
  let r = 0;
  let state: LedgerState | null = null;
  const pushRequest = (q: StoredRequestRecord) =>
    entries.push({ kind: 'request', at: q.at, key: q.key, code: q.code, fingerprintMatch: q.fingerprintMatch, replayed: replays(state, q) });
  for (const e of events) {
    while (r < byTime.length && byTime[r]!.at <= e.at) pushRequest(byTime[r++]!);
    entries.push({ kind: 'event', seq: e.seq, type: e.type, at: e.at, data: e.data, actor: e.actor });
    try {
      state = evolve(state, e, e.guid);
    } catch {
      // A stream guidgate did not write (a gap, a hand edit): history still shows it; no request is called a replay.
      state = null;
    }
  }
  while (r < byTime.length) pushRequest(byTime[r++]!);
  return entries;
}

/** A GUID's events and channel requests in time order (an empty list: no such GUID). `history --requests`, the API. */
export async function readTimeline(store: EventLog & RequestLog, guid: string): StoreResult<TimelineEntry[]> {
  const [events, requests] = await Promise.all([store.readStream(guid), store.readRequests(guid)]);
  if (E.isLeft(events)) return events;
  if (E.isLeft(requests)) return requests;
  return E.right(timeline(events.right, requests.right));
}

/** A reconciliation run that flagged the GUID (CONTRACT.md §8), as `history` shows it. */
export interface ReconciliationMention {
  readonly run: string;
  /** When the run was recorded (ms). */
  readonly at: number;
  readonly window: { readonly from: number; readonly to: number };
  readonly category: Break['category'];
  readonly severity: Break['severity'];
  /** The run that first saw this break (the same break open since then). */
  readonly firstSeen: string;
}

/** The reconciliation runs that flagged the GUID, oldest first: `history GUID`. */
export async function readReconciliationMentions(store: ReconciliationLog, guid: string): StoreResult<ReconciliationMention[]> {
  return E.map((found: RecordedBreak[]) =>
    found.map(({ run, break: b }): ReconciliationMention => ({
      run: run.id,
      at: run.recordedAt,
      window: { from: run.summary.window.from, to: run.summary.window.to },
      category: b.category,
      severity: b.severity,
      firstSeen: b.firstSeen ?? run.id,
    })),
  )(await store.reconciliationBreaks(guid));
}
