import type { TimelineEntry } from '../../commands/history.js';
import { maskAccountsIn } from '../../shared/maskAccount.js';

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
  // Masked before the raw texts are parsed: a second walk over a shown text would cut its depth short again.
  const shown = maskAccountsIn(data) as Record<string, unknown>;
  for (const key of ['request', 'response'] as const) if (key in data) shown[key] = shownJson(data[key]);
  return { ...entry, data: shown };
}
