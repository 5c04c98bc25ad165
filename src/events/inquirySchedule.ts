/** The longest wait between two inquiries about a GUID that stays unknown (unless min-age itself is longer). */
export const MAX_INQUIRY_INTERVAL_MS = 3_600_000;

export interface InquiryScheduled {
  /** Inquiries about this attempt so far that could not tell. */
  readonly inquiries: number;
  /** The settler does not ask about it again before this time. */
  readonly nextInquiryAt: number;
}

/**
 * When to ask again about an attempt that `inquiries` inquiries could not settle, the last at `at`: at most once
 * per min-age, the wait doubling each time (min-age, 2×, 4×, …) up to an hour. An account system that is down
 * or does not know gets a trickle of inquiries, not one per settle run per GUID.
 */
export function nextInquiryAt(inquiries: number, at: number, minAgeMs: number): number {
  const grown = minAgeMs * 2 ** Math.max(0, Math.min(inquiries - 1, LAST_GROWING - 1));
  return at + Math.max(minAgeMs, Math.min(grown, MAX_INQUIRY_INTERVAL_MS));
}

/** From this many inquiries on, the wait no longer grows. */
const LAST_GROWING = 31;

/**
 * `nextInquiryAt` for 1, 2, … inquiries, as far as it changes (the last entry holds for any count beyond): for a
 * store that counts the inquiries and picks the time in one statement, without a second copy of the rule.
 */
export function nextInquiryTimes(at: number, minAgeMs: number): number[] {
  return Array.from({ length: LAST_GROWING }, (_, i) => nextInquiryAt(i + 1, at, minAgeMs));
}
