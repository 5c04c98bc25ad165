/** Replies per code over the last minutes, for `GET /v1/stats` (the console's overview). */
export interface RecentReplies {
  readonly windowSeconds: number;
  readonly perCode: Record<string, number>;
}

const REPLY_WINDOW_SECONDS = 300;

/**
 * A ring of per-second counters: slot `second % size` holds the counts of that second, and a slot is cleared
 * when a later second reuses it. The Prometheus counter cannot say "in the last 5 minutes" by itself (that is
 * the scraper's `rate()`), and the console has no Prometheus to ask.
 */
export function createReplyWindow(clock: () => number, windowSeconds = REPLY_WINDOW_SECONDS) {
  const slots = Array.from({ length: windowSeconds }, () => ({ second: -1, counts: new Map<string, number>() }));
  const slotFor = (second: number) => {
    const slot = slots[second % windowSeconds]!;
    if (slot.second !== second) {
      slot.second = second;
      slot.counts.clear();
    }
    return slot;
  };
  return {
    record(code: string): void {
      const counts = slotFor(Math.floor(clock() / 1000)).counts;
      counts.set(code, (counts.get(code) ?? 0) + 1);
    },
    recent(): RecentReplies {
      const now = Math.floor(clock() / 1000);
      const perCode: Record<string, number> = {};
      for (const slot of slots) {
        if (slot.second <= now - windowSeconds || slot.second > now) continue;
        for (const [code, n] of slot.counts) perCode[code] = (perCode[code] ?? 0) + n;
      }
      return { windowSeconds, perCode };
    },
  };
}
