/**
 * The breaker's permit (CONTRACT.md §7) held by one channel request: given back however the request ends. A request
 * that took the trial permit and then ended without a call (here: its claim could not be written) must give it
 * back, or the breaker would wait for ever for a trial that never happens and refuse every later request.
 */
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import type { EventStore } from '../../src/events/store.js';
import { toStoreError } from '../../src/events/storeResult.js';
import { createAccountClient } from '../../src/account/accountClient.js';
import { createBreaker } from '../../src/relay/breaker.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { relayTransfer } from '../../src/relay/relayTransfer.js';
import { startSimulator } from '../../src/simulator/index.js';
import { openLedger } from '../support/ledgerStore.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';

const body = (guid: string) => Buffer.from(JSON.stringify({ guid, from: 'ACC-1', to: 'ACC-2', amount: 5 }));

/** `store` whose every `execute` fails as a ledger that cannot be written does (a Left, never a throw). */
function unwritable(store: EventStore): EventStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'execute') return () => Promise.resolve(E.left(toStoreError(new Error('disk full'), 'write')));
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('relayTransfer and the breaker permit', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  it('the trial permit of a request whose claim fails is given back: the next request is the trial, and its answer closes the breaker', async () => {
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const account = cleanup.use(createAccountClient({ baseUrl: sim.url, timeoutMs: 2000 }));
    const store = cleanup.use(await openLedger(join(tmp(), 'l.db')));
    let now = 0;
    const breaker = createBreaker({ failures: 1, cooldownMs: 1000, clock: () => now });
    breaker.permit()?.done('failed');
    expect(breaker.isOpen()).toBe(true);
    now += 1000;
    const deps = { account, metrics: createMetrics(store, Date.now), timeoutMs: 2000, maxAttempts: 3, breaker };

    const failed = await relayTransfer({ ...deps, store: unwritable(store) }, body('TRIAL-1'), undefined);
    expect([failed.reply.code, failed.decision]).toEqual(['E503', 'ledger-unavailable']);
    expect(sim.guidStats('TRIAL-1').calls).toBe(0);

    const trial = await relayTransfer({ ...deps, store }, body('TRIAL-2'), undefined);
    expect([trial.reply.code, trial.decision]).toEqual(['0000', 'claimed']);
    expect(breaker.isOpen()).toBe(false);
  });
});
