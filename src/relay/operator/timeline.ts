import { readHistory } from '../../commands/history.js';
import type { EventLog } from '../../events/store.js';
import { maskAccountsIn } from '../../shared/maskAccount.js';

/** One step of a GUID's story: an event of the log, or (from the audit trail, #15) a channel request. */
export type TimelineEntry =
  | { readonly kind: 'event'; readonly seq: number; readonly type: string; readonly at: number; readonly data: unknown; readonly actor: unknown }
  | { readonly kind: 'request'; readonly at: number; readonly key: string | null; readonly code: string; readonly fingerprintMatch: boolean };

/**
 * The GUID's timeline, oldest first; empty when the log has no such GUID. Today the events alone, each
 * `actor` taken from its data when the event says who wrote it. When the audit trail's `readTimeline(store,
 * guid)` (src/commands/history.ts) lands, this one call is what to swap for it.
 */
export async function readTimelineOf(store: EventLog, guid: string): Promise<TimelineEntry[]> {
  const events = await readHistory(store, guid);
  return events.map((e) => ({ kind: 'event', seq: e.seq, type: e.type, at: e.at, data: e.data, actor: actorOf(e.data) }));
}

function actorOf(data: unknown): unknown {
  return data !== null && typeof data === 'object' && 'actor' in data ? (data as { actor: unknown }).actor : null;
}

/** Raw JSON text (a request or an answer) as the API shows it: parsed, account numbers masked. */
function shownJson(text: unknown): unknown {
  if (typeof text !== 'string') return text;
  try {
    return maskAccountsIn(JSON.parse(text));
  } catch {
    // Only a definite (JSON) answer or a decoded request is ever stored; anything else is shown as it is.
    return text;
  }
}

/**
 * What the operator API shows of an entry: `request` and `response` parsed (not JSON inside JSON) with account
 * numbers masked, and never the fingerprint (an unsalted hash of the account numbers, CONTRACT.md §2 v2).
 */
export function timelineView(entry: TimelineEntry): TimelineEntry {
  if (entry.kind !== 'event' || entry.data === null || typeof entry.data !== 'object') return entry;
  const { fingerprint: _fingerprint, ...data } = entry.data as Record<string, unknown>;
  for (const key of ['request', 'response'] as const) if (key in data) data[key] = shownJson(data[key]);
  return { ...entry, data: maskAccountsIn(data) };
}
