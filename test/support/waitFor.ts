export interface WaitForOptions {
  /** Give up after this long (default 10 s: the machine is shared, a state may take a while). */
  readonly timeoutMs?: number;
  /** Pause between probes (default 10 ms). */
  readonly intervalMs?: number;
  /** What is awaited, for the error on timeout. */
  readonly what?: string;
}

/**
 * Polls `probe` until it returns a truthy value and resolves with that value; rejects once `timeoutMs` has
 * passed. For a state the test waits for (a call in flight, a row swept), instead of a sleep sized by guess.
 */
export async function waitFor<T>(probe: () => T | Promise<T>, opts: WaitForOptions = {}): Promise<NonNullable<T>> {
  const { timeoutMs = 10_000, intervalMs = 10, what = 'the awaited state' } = opts;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (performance.now() >= deadline) throw new Error(`waitFor: ${what} not reached within ${timeoutMs} ms`);
    await sleep(intervalMs);
  }
}

/**
 * Lets `ms` pass. Only where the passage of time is what the test is about (a row must grow older than
 * --min-age, a cooldown must run out, nothing may happen for a while): say so at the call. To wait for a state,
 * use `waitFor`.
 */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
