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

/** Waits `ms`; resolves false at once if `signal` aborts (before or during the wait). */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted === true) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
