import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { orThrow } from '../../src/events/storeResult.js';
import { recordIn } from '../../src/commands/reconciliations.js';
import { openLedger } from '../support/ledgerStore.js';
import { runOver, sentRecord } from '../support/reconcile.js';
import { useTempDir } from '../support/tmp.js';

/** The recorder the reconcile command hands a finished run to (#27): the ledger's recordReconciliation. */
describe('recordIn: a finished run recorded in the ledger', () => {
  const tmp = useTempDir();
  const window = { from: 1000, to: 2000, pendingMs: 0 };

  it('records the engine\'s result as it is; given back as the ledger reads it, first-seen runs filled', async () => {
    const dir = tmp();
    const store = openLedger(join(dir, 'ledger.db'));
    try {
      const result = await runOver(dir, [sentRecord('a', 1100), sentRecord('b', 1200)], [{ guid: 'b', appliedAt: 1210 }, { guid: 'c', appliedAt: 1300 }], window);
      const recorded = await recordIn(store)(result);
      expect(await orThrow(store.reconciliation(recorded.id))).toEqual(recorded);
      expect(recorded.summary).toEqual(result.summary);
      expect(recorded.breaks.map((b) => [b.guid, b.category, b.firstSeen])).toEqual([['a', 'missing_in_journal', recorded.id], ['c', 'missing_in_ledger', recorded.id]]);
    } finally {
      await store.close();
    }
  });

  it('a ledger that cannot record it: the run fails with the store\'s error, nothing half recorded', async () => {
    const dir = tmp();
    const store = openLedger(join(dir, 'ledger.db'));
    const result = await runOver(dir, [sentRecord('a', 1100)], [], window);
    await store.close();
    await expect(recordIn(store)(result)).rejects.toMatchObject({ code: 'LEDGER_CLOSED' });
  });
});
