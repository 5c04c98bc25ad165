import type { TimelineEntry } from '../../commands/history.js';
import { maskAccountsIn } from '../../shared/maskAccount.js';

/**
 * Raw JSON text (a request or an answer) as every view shows it, parsed (not JSON inside JSON): masked by the rule of
 * `shownStoredJson` and bounded in depth (maskAccountsIn); null when it is not JSON, since nothing in it could be masked.
 */
function shownJson(text: unknown): unknown {
  if (typeof text !== 'string') return text;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  return maskAccountsIn(parsed);
}

/**
 * What the operator API shows of an entry: `request` and `response` parsed (not JSON inside JSON) with account
 * numbers masked, and never the fingerprint (an unsalted hash of the account numbers, CONTRACT.md §2 v2).
 */
export function timelineView(entry: TimelineEntry): TimelineEntry {
  if (entry.kind !== 'event' || entry.data === null || typeof entry.data !== 'object') return entry;
  const { fingerprint: _fingerprint, ...data } = entry.data as Record<string, unknown>;
  // Masked before the raw texts are parsed: a second walk over a shown text would cut its depth short again.
  const shown = maskAccountsIn(data) as Record<string, unknown>;
  for (const key of ['request', 'response'] as const) if (key in data) shown[key] = shownJson(data[key]);
  return { ...entry, data: shown };
}
