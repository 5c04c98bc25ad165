import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { LedgerUnavailableError } from '../../src/events/errors.js';
import type { EventStore, KeyUse } from '../../src/events/store.js';
import { orThrow } from '../../src/events/storeResult.js';
import { createKeyUseRecorder } from '../../src/relay/auth/keyUses.js';
import { openLedger } from '../support/ledgerStore.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';

/** The keys' last uses on a real SQLite ledger: noted in memory per request, written once per interval. */
describe('key use recorder', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  /** A real store whose writes of key uses are counted (and can be made to fail). */
  const ledger = () => {
    const store: EventStore = cleanup.use(openLedger(join(tmp(), 'ledger.db')));
    const writes: Array<readonly KeyUse[]> = [];
    let failing = false;
    return {
      store,
      writes,
      fail: (on: boolean) => (failing = on),
      log: {
        recordKeyUses: (uses: readonly KeyUse[]) => {
          writes.push(uses);
          return failing ? Promise.resolve(E.left(new LedgerUnavailableError('disk full'))) : store.recordKeyUses(uses);
        },
      },
    };
  };

  it('a thousand requests write nothing; the next write holds each key once, with its latest use', async () => {
    const l = ledger();
    let now = 1000;
    const recorder = createKeyUseRecorder({ store: l.log, everyMs: 3_600_000, clock: () => now, onError: () => undefined });
    for (let i = 0; i < 1000; i++) {
      recorder.used(i % 2 === 0 ? 'shop-a' : 'ops');
      now++;
    }
    expect(l.writes).toEqual([]);
    expect(await orThrow(l.store.keyUses())).toEqual([]);
    await recorder.flush();
    expect(l.writes).toHaveLength(1);
    expect(await orThrow(l.store.keyUses())).toEqual([{ key: 'ops', at: 1999 }, { key: 'shop-a', at: 1998 }]);
    // Nothing used since: nothing written.
    await recorder.flush();
    expect(l.writes).toHaveLength(1);
    await recorder.close();
  });

  it('a write the ledger refuses is said, and its uses go with the next write', async () => {
    const l = ledger();
    let now = 1000;
    const errors: string[] = [];
    const recorder = createKeyUseRecorder({ store: l.log, everyMs: 3_600_000, clock: () => now, onError: (m) => void errors.push(m) });
    recorder.used('shop-a');
    l.fail(true);
    await recorder.flush();
    expect(errors).toEqual(['disk full']);
    l.fail(false);
    now = 2000;
    recorder.used('ops');
    await recorder.close();
    expect(await orThrow(l.store.keyUses())).toEqual([{ key: 'ops', at: 2000 }, { key: 'shop-a', at: 1000 }]);
  });
});
