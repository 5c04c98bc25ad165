import * as E from 'fp-ts/lib/Either.js';
import type { StoredEvent } from '../events/codecs.js';
import type { EventLog, StoreResult } from '../events/store.js';

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
