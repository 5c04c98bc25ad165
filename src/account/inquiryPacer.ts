/**
 * The inquiry budget of one process (CONTRACT.md §7, `--inquiry-rate`): at most `count` inquiries in any `perMs`,
 * every source together (the settler, `resolve`, the inquiry before a resend or a first send, `reconcile --settle`),
 * kept by the account client, through which every inquiry passes. After an outage thousands of UNKNOWN rows come due
 * at once; a core answering status checks at full speed answers nothing else.
 *
 * Background work waits its turn, the oldest row first, spaced evenly over the period (never a burst), and leaves
 * `keptForChannels` of each period's budget to channels' requests, so that a storm being settled does not hold every
 * channel's resend back until it is over. A channel's request never waits: it gets a turn if the period has room,
 * else when it may come back (the channel's E901 carries it as `Retry-After`).
 */

/** At most `count` inquiries in any `perMs`. */
export interface InquiryRate {
  readonly count: number;
  readonly perMs: number;
}

const PERIODS: Readonly<Record<string, number>> = { s: 1_000, m: 60_000, h: 3_600_000 };

/** `50/s`, `600/m`, `3/h` → the rate; `0` → null (no cap); undefined when it is neither. */
export function parseInquiryRate(text: string): InquiryRate | null | undefined {
  const t = text.trim();
  if (t === '0') return null;
  const m = /^(\d{1,9})\/(s|m|h)$/.exec(t);
  if (m === null || Number(m[1]) === 0) return undefined;
  return { count: Number(m[1]), perMs: PERIODS[m[2]!]! };
}

/**
 * The pacing of a process by its `--inquiry-rate` (checked already: a rate `parseInquiryRate` reads), or undefined
 * for `0` (no cap). `forChannels`: the process answers channels (`serve`), so background work leaves them a tenth of
 * each period's budget (5 of 50/s); commands without channels (resolve, reprocess, reconcile) keep none.
 */
export function inquiryPacing(rateText: string, opts: { readonly forChannels: boolean; readonly onDeferred?: (() => void) | undefined }): InquiryPacerOptions | undefined {
  const rate = parseInquiryRate(rateText);
  if (rate === undefined) throw new Error(`not an inquiry rate: ${rateText}`);
  if (rate === null) return undefined;
  return { rate, keptForChannels: opts.forChannels ? Math.floor(rate.count / 10) : 0, onDeferred: opts.onDeferred };
}

/**
 * How an inquiry takes its turn: background work waits, the row whose last Sent is oldest first (`rowSentAt`), until
 * `signal` gives up; a channel's request does not wait.
 */
export type InquiryTurn =
  | { readonly waits: true; readonly rowSentAt: number; readonly signal?: AbortSignal | undefined }
  | { readonly waits: false };

/** Asked now, or not: `retryAfterMs`, when a channel's request would find room (0 for a wait given up). */
export type TurnGiven = { readonly go: true } | { readonly go: false; readonly retryAfterMs: number };

export interface InquiryPacer {
  turn(turn: InquiryTurn): Promise<TurnGiven>;
  /** Every waiting turn ends unasked; later ones too (the client is closing). */
  close(): void;
}

export interface InquiryPacerOptions {
  readonly rate: InquiryRate;
  /** Turns per period background work leaves to channels' requests (default none). */
  readonly keptForChannels?: number | undefined;
  /** Each turn that did not go at once: a background one that waited, a channel's that was sent away. */
  readonly onDeferred?: (() => void) | undefined;
  /** A monotonic clock in ms (default `performance.now`). */
  readonly now?: (() => number) | undefined;
}

interface Waiter {
  readonly rowSentAt: number;
  readonly order: number;
  settled: boolean;
  readonly resolve: (given: TurnGiven) => void;
  readonly unlisten: () => void;
}

const before = (a: Waiter, b: Waiter): boolean => a.rowSentAt < b.rowSentAt || (a.rowSentAt === b.rowSentAt && a.order < b.order);

/** A binary heap of the waiting turns, the oldest row on top. */
function waitingTurns() {
  const heap: Waiter[] = [];
  const up = (i: number): void => {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) return;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  };
  const down = (i: number): void => {
    for (;;) {
      const [l, r] = [2 * i + 1, 2 * i + 2];
      let top = i;
      if (l < heap.length && before(heap[l]!, heap[top]!)) top = l;
      if (r < heap.length && before(heap[r]!, heap[top]!)) top = r;
      if (top === i) return;
      [heap[i], heap[top]] = [heap[top]!, heap[i]!];
      i = top;
    }
  };
  const pop = (): Waiter | undefined => {
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last !== undefined) {
      heap[0] = last;
      down(0);
    }
    return top;
  };
  return {
    push(w: Waiter): void {
      heap.push(w);
      up(heap.length - 1);
    },
    /** The oldest row's turn still waiting (turns given up are dropped on the way). */
    peek(): Waiter | undefined {
      while (heap.length > 0 && heap[0]!.settled) pop();
      return heap[0];
    },
    pop,
    drain(): Waiter[] {
      return heap.splice(0);
    },
  };
}

export function createInquiryPacer(opts: InquiryPacerOptions): InquiryPacer {
  const { count, perMs } = opts.rate;
  const forBackground = Math.max(1, count - Math.max(0, Math.floor(opts.keptForChannels ?? 0)));
  const spacingMs = perMs / forBackground;
  // Background work counts its period a spacing longer: two inquiries a period apart may reach the account system
  // closer together than they left (one delayed on the way: a busy event loop, a connection being opened), and it
  // must still see no more than `count` (half a spacing was seen to be too little: 21 in a second at 20/s).
  const backgroundPeriodMs = perMs + spacingMs;
  const now = opts.now ?? (() => performance.now());
  // The start times of the inquiries of the last period, oldest first (`head`: the first still inside it).
  const starts: number[] = [];
  let head = 0;
  let lastBackground = Number.NEGATIVE_INFINITY;
  let order = 0;
  let timer: NodeJS.Timeout | null = null;
  let closed = false;
  const waiting = waitingTurns();

  /** The index of the first start within `periodMs` before `t` (starts older than the longest period are dropped). */
  const firstWithin = (t: number, periodMs: number): number => {
    while (head < starts.length && starts[head]! <= t - backgroundPeriodMs) head++;
    if (head > 4096) {
      starts.splice(0, head);
      head = 0;
    }
    let i = head;
    while (i < starts.length && starts[i]! <= t - periodMs) i++;
    return i;
  };
  const inPeriod = (t: number, periodMs = perMs): number => starts.length - firstWithin(t, periodMs);
  /** When the `periodMs` ending then holds fewer than `limit` starts. */
  const roomAt = (t: number, limit: number, periodMs = perMs): number => {
    const first = firstWithin(t, periodMs);
    const n = starts.length - first;
    return n < limit ? t : starts[first + n - limit]! + periodMs;
  };
  const backgroundAt = (t: number): number => Math.max(roomAt(t, forBackground, backgroundPeriodMs), lastBackground + spacingMs);
  const startBackground = (t: number): void => {
    starts.push(t);
    // A turn a timer gave a little late keeps its slot, so that timers' lateness does not add up into a slower rate;
    // one given after a pause starts the spacing anew (the period's cap holds either way).
    const slot = lastBackground + spacingMs;
    lastBackground = t - slot < spacingMs ? slot : t;
  };

  const pump = (): void => {
    timer = null;
    const t = now();
    for (let w = waiting.peek(); w !== undefined && backgroundAt(t) <= t; w = waiting.peek()) {
      waiting.pop();
      w.settled = true;
      w.unlisten();
      startBackground(t);
      w.resolve({ go: true });
    }
    if (waiting.peek() !== undefined) timer = setTimeout(pump, Math.max(1, Math.ceil(backgroundAt(t) - t)));
  };

  return {
    turn(turn: InquiryTurn): Promise<TurnGiven> {
      if (closed) return Promise.resolve({ go: false, retryAfterMs: 0 });
      const t = now();
      if (!turn.waits) {
        if (inPeriod(t) < count) {
          starts.push(t);
          return Promise.resolve({ go: true });
        }
        opts.onDeferred?.();
        return Promise.resolve({ go: false, retryAfterMs: roomAt(t, count) - t });
      }
      if (turn.signal?.aborted === true) return Promise.resolve({ go: false, retryAfterMs: 0 });
      if (waiting.peek() === undefined && backgroundAt(t) <= t) {
        startBackground(t);
        return Promise.resolve({ go: true });
      }
      opts.onDeferred?.();
      return new Promise<TurnGiven>((resolve) => {
        const signal = turn.signal;
        const giveUp = (): void => {
          if (waiter.settled) return;
          waiter.settled = true;
          resolve({ go: false, retryAfterMs: 0 });
        };
        signal?.addEventListener('abort', giveUp, { once: true });
        const waiter: Waiter = { rowSentAt: turn.rowSentAt, order: order++, settled: false, resolve, unlisten: () => signal?.removeEventListener('abort', giveUp) };
        waiting.push(waiter);
        if (timer === null) timer = setTimeout(pump, Math.max(1, Math.ceil(backgroundAt(t) - t)));
      });
    },
    close(): void {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
      for (const w of waiting.drain()) {
        if (w.settled) continue;
        w.settled = true;
        w.unlisten();
        w.resolve({ go: false, retryAfterMs: 0 });
      }
    },
  };
}
