/** Replies per code over the last minutes, and per minute over the last hour, for `GET /v1/stats` (the console). */
export interface RecentReplies {
  readonly windowSeconds: number;
  readonly perCode: Record<string, number>;
  /** Replies per code in each of the last 60 clock minutes, oldest first; the last is the minute in progress. */
  readonly perMinute: Array<Record<string, number>>;
}

const REPLY_WINDOW_SECONDS = 300;
const TREND_MINUTES = 60;

/**
 * A ring of counters per time unit: slot `unit % size` holds the counts of that unit (a second, a minute), and a
 * slot is cleared when a later unit reuses it.
 */
function counterRing(size: number) {
  const slots = Array.from({ length: size }, () => ({ unit: Number.NaN, counts: new Map<string, number>() }));
  const slotOf = (unit: number) => slots[((unit % size) + size) % size]!;
  return {
    add(unit: number, code: string): void {
      const slot = slotOf(unit);
      if (slot.unit !== unit) {
        slot.unit = unit;
        slot.counts.clear();
      }
      slot.counts.set(code, (slot.counts.get(code) ?? 0) + 1);
    },
    /** The counts of one unit, if it is still in the ring. */
    at(unit: number): Record<string, number> {
      const slot = slotOf(unit);
      return slot.unit === unit ? Object.fromEntries(slot.counts) : {};
    },
  };
}

/**
 * Per-second counters for the last 5 minutes and per-minute counters for the last hour. The Prometheus counter
 * cannot say "in the last 5 minutes" by itself (that is the scraper's `rate()`), and the console has no
 * Prometheus to ask; an hour of per-minute counts is the console's trend of replies.
 */
export function createReplyWindow(clock: () => number, windowSeconds = REPLY_WINDOW_SECONDS) {
  const seconds = counterRing(windowSeconds);
  const minutes = counterRing(TREND_MINUTES);
  return {
    record(code: string): void {
      const now = clock();
      seconds.add(Math.floor(now / 1000), code);
      minutes.add(Math.floor(now / 60_000), code);
    },
    recent(): RecentReplies {
      const now = clock();
      const second = Math.floor(now / 1000);
      const perCode: Record<string, number> = {};
      for (let s = second - windowSeconds + 1; s <= second; s++) {
        for (const [code, n] of Object.entries(seconds.at(s))) perCode[code] = (perCode[code] ?? 0) + n;
      }
      const minute = Math.floor(now / 60_000);
      const perMinute = Array.from({ length: TREND_MINUTES }, (_, i) => minutes.at(minute - TREND_MINUTES + 1 + i));
      return { windowSeconds, perCode, perMinute };
    },
  };
}
