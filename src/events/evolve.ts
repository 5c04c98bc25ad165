import type { NewEvent, StoredEvent } from './codecs.js';
import { LedgerCorruptError } from './errors.js';
import type { LedgerState } from './state.js';

export class EvolveError extends Error {
  override readonly name = 'EvolveError';
}

/**
 * The one fold from events to state. The projection (in the append transaction) and `rebuild` (from the log)
 * both use it, so the ledger and a replay cannot disagree. It is total over the transitions `decide` allows
 * and throws on the ones it never emits (a corrupted log), rather than guessing.
 */
export function evolve(state: LedgerState | null, event: NewEvent, guid: string): LedgerState {
  if (event.type === 'Claimed') {
    if (state !== null) throw new EvolveError(`${guid}: Claimed on an existing stream`);
    return {
      guid,
      status: 'RECEIVED',
      code: null,
      request: event.data.request,
      response: null,
      fingerprint: event.data.fingerprint,
      channel: event.data.channel ?? null,
      attempts: 0,
      createdAt: event.at,
      updatedAt: event.at,
      lastSeq: 0,
      sentAt: null,
      timeoutMs: null,
      failedByInquiry: false,
    };
  }
  if (state === null) throw new EvolveError(`${guid}: ${event.type} before Claimed`);
  if (event.type === 'StaleAnswer') {
    // A fact about an earlier attempt, not a transition: status, code, attempts, the answer stored, the times
    // (sentAt and timeoutMs drive the sweep and min-age) all stay. Only, a FAILED row becomes one whose attempt may
    // have arrived: one of its attempts did reach the account system, so a resend must inquire first, even when
    // its last attempt failed by a refused connection (without that, the resend would go out unasked). A SENT row
    // is marked too, for the refused connection of its attempt in flight to keep (ConnectFailed below).
    const marked = state.status === 'FAILED' || state.status === 'SENT';
    return { ...state, lastSeq: state.lastSeq + 1, failedByInquiry: state.failedByInquiry || marked };
  }
  const next = { ...state, updatedAt: event.at, lastSeq: state.lastSeq + 1, failedByInquiry: false };
  switch (event.type) {
    case 'Sent':
      return { ...next, status: 'SENT', code: null, attempts: event.data.attempt, sentAt: event.at, timeoutMs: event.data.timeoutMs };
    case 'Answered':
      return { ...next, status: 'DONE', code: event.data.code, response: event.data.response };
    case 'TimedOut':
      return { ...next, status: 'UNKNOWN', code: 'E901' };
    case 'ConnectFailed':
      // This attempt never left, but an older one answered while it was in flight (a StaleAnswer marked the row).
      return { ...next, status: 'FAILED', code: 'E902', failedByInquiry: state.failedByInquiry };
    case 'Resolved':
      return event.data.outcome === 'processed'
        ? { ...next, status: 'DONE', code: event.data.code, response: event.data.response }
        : { ...next, status: 'FAILED', code: 'E902', failedByInquiry: true };
    case 'Purged':
      return { ...next, status: 'PURGED', code: event.data.code, request: null, response: null };
  }
}

export function foldEvents(guid: string, events: readonly NewEvent[], initial: LedgerState | null = null): LedgerState | null {
  let state = initial;
  for (const e of events) state = evolve(state, e, guid);
  return state;
}

/**
 * The whole log (in global order) folded into one state per GUID with the same `evolve` the inline projection
 * uses; a gap in a stream's seqs means the log was changed by something other than guidgate.
 */
export function foldLog(events: Iterable<StoredEvent>): Map<string, LedgerState> {
  const states = new Map<string, LedgerState>();
  for (const e of events) {
    const prev = states.get(e.guid) ?? null;
    const expected = (prev?.lastSeq ?? -1) + 1;
    if (e.seq !== expected) throw new LedgerCorruptError(`${e.guid}: seq ${e.seq} where ${expected} was due (gap in the log)`);
    states.set(e.guid, evolve(prev, e, e.guid));
  }
  return states;
}
