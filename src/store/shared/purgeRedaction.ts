import type { EventType } from '../../events/codecs.js';

/**
 * What a Purged takes out of the GUID's earlier events, in both stores: the raw request of its Claimed, the raw
 * response of its Answered, Resolved and StaleAnswer events. The events themselves (types, times, codes, the answer's
 * SHA-256) stay for auditors.
 */
const REDACTED_FIELD: Partial<Record<EventType, 'request' | 'response'>> = {
  Claimed: 'request',
  Answered: 'response',
  Resolved: 'response',
  StaleAnswer: 'response',
};

/** The event types whose data `redactData` changes: a store reads only those of a purged GUID. */
export const REDACTED_TYPES = Object.keys(REDACTED_FIELD) as readonly EventType[];

/** An event's stored data (JSON text) as it stays once its GUID is purged. */
export function redactData(type: string, data: string): string {
  const field = REDACTED_FIELD[type as EventType];
  if (field === undefined) return data;
  const parsed = JSON.parse(data) as Record<string, unknown>;
  return JSON.stringify({ ...parsed, [field]: null });
}
