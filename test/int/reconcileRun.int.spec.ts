/** reconcileRun over a real SQLite ledger: the window read from the store, a row sent before it looked up, the record hook. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/openStore.js';
import { openJournalFile } from '../../src/reconcile/index.js';
import { reconcileRun, type ReconciliationResult } from '../../src/commands/reconcileRun.js';
import { seedRow } from '../support/commandsSeed.js';
import { ndjsonText } from '../support/reconcile.js';
import { useTempDir } from '../support/tmp.js';

describe('reconcileRun over the store', () => {
  const tmp = useTempDir();

  it('judges the rows created in the window and looks up a row created before it; the record hook gets the run and may give back its id and first-seen breaks', async () => {
    let now = 1_000_000;
    const store = await openStore(join(tmp(), 'l.db'), { create: true, clock: () => now });
    try {
      await seedRow(store, 'early', 'FAILED'); // created before the window, posted within it
      now = 2_000_000;
      await seedRow(store, 'b', 'DONE');
      await seedRow(store, 'a', 'DONE');
      now = 3_000_000;
      await seedRow(store, 'late', 'DONE'); // created at `to`: not this window's
      const terms = { from: 'ACC-6222021001', to: 'ACC-6222021002', amount: 1500, currency: 'CNY' };
      const file = join(tmp(), 'j.ndjson');
      writeFileSync(file, ndjsonText([{ guid: 'a', ...terms, appliedAt: 2_000_100 }, { guid: 'early', ...terms, appliedAt: 2_000_200 }]));
      let recorded: ReconciliationResult | null = null;
      const run = await reconcileRun({
        store,
        window: { from: 1_500_000, to: 3_000_000, pendingMs: 0 },
        journal: await openJournalFile(file),
        record: async (r) => {
          recorded = r;
          return { id: 'run-7', breaks: r.breaks.map((b) => ({ ...b, firstSeen: 'run-3' })) };
        },
      });
      expect(run.summary.ledgerRows).toBe(3);
      expect(run.breaks.map((b) => [b.guid, b.category, b.severity, b.firstSeen])).toEqual([
        ['b', 'missing_in_journal', 'P2', 'run-3'],
        ['early', 'unsettled_in_ledger', 'P1', 'run-3'],
      ]);
      expect(run.counts.matched).toBe(1);
      expect(run.id).toBe('run-7');
      expect(recorded!.breaks.map((b) => b.firstSeen)).toEqual([null, null]);
      expect(recorded!.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(run.settlements).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
