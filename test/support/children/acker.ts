/**
 * Child process for the crash-recovery conformance test: claims GUIDs `prefix-0`, `prefix-1`, … in waves of
 * concurrent Submits (group commit) until it is killed, and prints each GUID on its own line once its append
 * was acknowledged. Prints "ready" after the first wave. Args: db prefix (db: anything `openStore` takes)
 */
import { openStore } from '../../../src/store/openStore.js';
import { orThrow } from '../../../src/events/storeResult.js';

const [db, prefix] = process.argv.slice(2);
const store = await openStore(db!);
let i = 0;
let announced = false;
for (;;) {
  const wave = Array.from({ length: 25 }, (_, k) => `${prefix}-${i + k}`);
  await Promise.all(
    wave.map(async (g) => {
      const r = await orThrow(store.execute(g, { type: 'Submit', request: `{"guid":"${g}"}`, fingerprint: g, timeoutMs: 1000, maxAttempts: 3 }));
      if (r.kind === 'applied') process.stdout.write(`${g}\n`);
    }),
  );
  if (!announced) {
    announced = true;
    process.stdout.write('ready\n');
  }
  i += wave.length;
}
