import { performance } from 'node:perf_hooks';

export interface BackoffOptions {
  /** The first wait before a resend (default 100 ms). */
  readonly initialMs?: number;
  /** The longest wait between two sends (default 5 s). */
  readonly maxMs?: number;
}

/**
 * Exponential backoff with jitter: between half and all of min(max, initial·2^n). The jitter spreads the
 * resends of many channels that timed out together; the floor of half keeps a resend from following at once.
 */
export function backoffDelay(resend: number, opts: BackoffOptions, random: () => number = Math.random): number {
  const initial = opts.initialMs ?? 100;
  const max = opts.maxMs ?? 5_000;
  const ceiling = Math.min(max, initial * 2 ** Math.min(resend, 30));
  return ceiling / 2 + (ceiling / 2) * random();
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const DAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
// RFC 9110 §5.6.7: a recipient accepts all three forms; senders use the first.
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
const RFC850_DATE = new RegExp(`^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
const ASCTIME_DATE = new RegExp(`^${DAY} ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`);

/** ms since the epoch of an HTTP-date, or null when it is none (or names a day that does not exist). */
function httpDate(text: string, nowMs: number): number | null {
  let parts: [day: string, month: string, year: number, h: string, m: string, s: string] | null = null;
  let match = IMF_FIXDATE.exec(text);
  if (match !== null) parts = [match[1]!, match[2]!, Number(match[3]), match[4]!, match[5]!, match[6]!];
  else if ((match = RFC850_DATE.exec(text)) !== null) {
    // A two-digit year more than 50 years ahead is in the past century (RFC 9110 §5.6.7).
    let year = 2000 + Number(match[3]);
    if (year > new Date(nowMs).getUTCFullYear() + 50) year -= 100;
    parts = [match[1]!, match[2]!, year, match[4]!, match[5]!, match[6]!];
  } else if ((match = ASCTIME_DATE.exec(text)) !== null) parts = [match[2]!.trim(), match[1]!, Number(match[6]), match[3]!, match[4]!, match[5]!];
  if (parts === null) return null;
  const [day, month, year, h, m, s] = parts;
  const [d, hh, mm, ss] = [Number(day), Number(h), Number(m), Number(s)];
  if (hh > 23 || mm > 59 || ss > 60) return null;
  const at = Date.UTC(year, MONTHS.indexOf(month), d, hh, mm, ss);
  // Date.UTC rolls 31 Feb over into March: such a date is malformed, not a day in March.
  return new Date(at).getUTCDate() === d ? at : null;
}

/**
 * How long a reply's `Retry-After` (RFC 9110 §10.2.3) asks the client to wait, in ms from `nowMs`: delay-seconds
 * or an HTTP-date (a date already past is 0). Null when there is none or it is malformed. Given more than once,
 * the longest wait that parses: never sooner than any of them asked.
 */
export function retryAfterMs(header: string | readonly string[] | undefined, nowMs: number): number | null {
  if (header === undefined) return null;
  let longest: number | null = null;
  for (const raw of typeof header === 'string' ? [header] : header) {
    const text = raw.trim();
    const at = /^\d+$/.test(text) ? nowMs + Number(text) * 1000 : httpDate(text, nowMs);
    if (at !== null && Number.isFinite(at)) longest = Math.max(longest ?? 0, at - nowMs, 0);
  }
  return longest;
}

/**
 * Waits at least `ms` by the monotonic clock (a timer may fire a little early by it: the rest is waited too);
 * resolves false at once if `signal` aborts (before or during the wait). `ms` must fit a timer (under 2^31).
 */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted === true) return Promise.resolve(false);
  const until = performance.now() + ms;
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const wake = (): void => {
      const left = until - performance.now();
      if (left > 0) {
        timer = setTimeout(wake, Math.ceil(left));
        return;
      }
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    };
    timer = setTimeout(wake, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
