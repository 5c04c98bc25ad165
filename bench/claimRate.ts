import type { EventStore } from '../src/events/store.js';
import { orThrow } from '../src/events/storeResult.js';

/** Claims (Submit: Claimed + Sent) per second with `concurrency` in flight, each a new GUID, for `seconds`. */
export async function claimsPerSecond(store: EventStore, concurrency: number, seconds: number): Promise<number> {
  let n = 0;
  const deadline = performance.now() + seconds * 1000;
  const start = performance.now();
  async function worker(w: number): Promise<void> {
    while (performance.now() < deadline) {
      const guid = `w${w}-${n++}`;
      const r = await orThrow(store.execute(guid, { type: 'Submit', request: `{"guid":"${guid}","from":"A1","to":"B2","amount":100}`, fingerprint: guid, timeoutMs: 3000, maxAttempts: 5 }));
      if (r.kind !== 'applied') throw new Error(`claim of ${guid} refused`);
    }
  }
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  return n / ((performance.now() - start) / 1000);
}
