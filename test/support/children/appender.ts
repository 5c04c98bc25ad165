/**
 * Child process for the crash test: drives GUIDs through their life (submit, answer or fail, resend,
 * resolve, purge) in a loop until it is killed. Prints "ready" once the first batch has committed.
 * Args: dbPath guidPrefix
 */
import { openLedger } from '../ledgerStore.js';
import type { Command } from '../../../src/events/decide.js';
import { orThrow } from '../../../src/events/storeResult.js';

const [dbPath, prefix] = process.argv.slice(2);
const store = openLedger(dbPath!);
const submit = (g: string): Command => ({ type: 'Submit', request: `{"guid":"${g}","pad":"${'x'.repeat(200)}"}`, fingerprint: g, timeoutMs: 0, maxAttempts: 5 });

let i = 0;
let announced = false;
for (;;) {
  const batch = Array.from({ length: 20 }, (_, k) => `${prefix}-${i + k}`);
  await Promise.all(batch.map((g) => orThrow(store.execute(g, submit(g)))));
  await Promise.all(
    batch.map((g, k) =>
      k % 3 === 0
        ? orThrow(store.execute(g, { type: 'RecordAnswer', attempt: 1, code: '0000', response: `{"code":"0000","guid":"${g}"}`, latencyMs: 1 }))
        : k % 3 === 1
          ? orThrow(store.execute(g, { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' }))
          : orThrow(store.execute(g, { type: 'RecordTimeout', attempt: 1, reason: 'timeout' })),
    ),
  );
  await Promise.all(batch.map((g) => orThrow(store.execute(g, submit(g)))));
  await Promise.all(batch.map((g) => orThrow(store.execute(g, { type: 'Resolve', outcome: 'absent' }))));
  await Promise.all(batch.map((g) => orThrow(store.execute(g, { type: 'Purge', retentionMs: 0 }))));
  if (!announced) {
    announced = true;
    process.stdout.write('ready\n');
  }
  i += batch.length;
}
