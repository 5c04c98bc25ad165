import type { EventLog } from '../events/store.js';

export interface HistoryEntry {
  readonly seq: number;
  readonly type: string;
  /** Milliseconds since the epoch. */
  readonly at: number;
  readonly data: unknown;
}

/** `guidgate history GUID`: the GUID's events in order, for auditors (an empty list: no such GUID). */
export async function readHistory(store: EventLog, guid: string): Promise<HistoryEntry[]> {
  const events = await store.readStream(guid);
  return events.map((e) => ({ seq: e.seq, type: e.type, at: e.at, data: e.data }));
}
