import type { OutcomeWaiters } from './outcomeWaiters.js';
import type { RelayResult } from './relayTransfer.js';

/**
 * `Prefer: wait=N` (CONTRACT.md §2): a request answered E903 (its GUID in progress) waits until the GUID's outcome is
 * recorded or `seconds` pass, then is answered as a resend arriving at that moment would be (`resend` runs the
 * channel's POST again: the stored answer, E901, a FAILED row sent again, …). A row in progress again by then (a
 * later attempt was sent meanwhile) waits on within the same N seconds. `waited`: false when no place was free
 * (`--max-waiters`) or the relay is shutting down: the E903 goes back at once, without `Preference-Applied`.
 * `signal`: the channel went away; the place is given back at once.
 */
export async function waitForOutcome(
  waiters: OutcomeWaiters,
  first: RelayResult & { readonly request: { readonly guid: string } },
  seconds: number,
  resend: () => Promise<RelayResult>,
  signal?: AbortSignal,
): Promise<{ readonly result: RelayResult; readonly waited: boolean }> {
  const slot = waiters.enter(first.request.guid);
  if (slot === null) return { result: first, waited: false };
  const deadline = performance.now() + seconds * 1000;
  let result: RelayResult = first;
  try {
    for (;;) {
      const end = await slot.wait(deadline - performance.now(), signal);
      // Nobody is left to answer: nothing more is read or sent for it.
      if (signal?.aborted === true) return { result, waited: true };
      result = await resend();
      if (result.decision !== 'in-progress' || end !== 'settled' || performance.now() >= deadline) return { result, waited: true };
    }
  } finally {
    slot.leave();
  }
}
