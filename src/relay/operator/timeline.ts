import type { TimelineEntry } from '../../commands/history.js';
import { maskAccountsIn } from '../../shared/maskAccount.js';
import { shownStoredJson } from '../rowViews.js';

/** Raw JSON text (a request or an answer) as every view shows it (`shownStoredJson`), parsed: not JSON inside JSON. */
function shownJson(text: unknown): unknown {
  if (typeof text !== 'string') return text;
  const shown = shownStoredJson(text);
  return shown === null ? null : (JSON.parse(shown) as unknown);
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
