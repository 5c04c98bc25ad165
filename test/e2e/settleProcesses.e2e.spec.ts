/** CONTRACT.md §7: several relays (processes) settling one SQLite ledger at once; each row is settled once. */
import { join } from 'node:path';
import { describe, it, expect } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { startSimulator } from '../../src/simulator/index.js';
import { seedRow, transferBody } from '../support/commandsSeed.js';
import { sigkill, spawnServe } from '../support/scheduleProcess.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { aWholeSettleRun, metricAt } from '../support/settle.js';
import { waitFor } from '../support/waitFor.js';
import { orThrow } from '../../src/events/storeResult.js';

describe('two relays settling one ledger', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  it('every UNKNOWN row is asked about once and settled exactly once (one Resolved per GUID), processed ones DONE, absent ones FAILED', async () => {
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const db = join(tmp(), 'ledger.db');
    const guids = Array.from({ length: 60 }, (_, i) => `TWO-${String(i).padStart(2, '0')}`);
    // The account system did process the even ones (its inquiry says so); it never saw the odd ones.
    const processed = guids.filter((_, i) => i % 2 === 0);
    for (const guid of processed) {
      const res = await fetch(`${sim.url}/transfer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: transferBody(guid).body });
      expect(res.status).toBe(200);
    }

    const args = ['--db', db, '--account-url', sim.url, '--settle-every', '50ms', '--min-age', '1s'];
    const relays = await Promise.all([spawnServe(args), spawnServe(args)]);
    for (const r of relays) cleanup.add(() => sigkill(r));
    // The rows appear once both settlers run (a process starts in seconds on a loaded machine: rows due before
    // the second one is up would all go to the first), and become due together a moment later.
    const seeder = openLedger(db, { clock: () => Date.now() - 700 });
    for (const guid of guids) await seedRow(seeder, guid, 'UNKNOWN');
    await seeder.close();

    const store = cleanup.use(openLedger(db));
    await waitFor(async () => (await orThrow(store.countLedger({ statuses: ['UNKNOWN'] }))) === 0, { timeoutMs: 20_000, intervalMs: 50, what: 'every row settled' });
    // Both settlers run again over the settled rows: nothing more may be appended.
    await Promise.all(relays.map((r) => aWholeSettleRun(r.url)));
    for (const guid of guids) {
      const events = await orThrow(store.readStream(guid));
      expect(events.filter((e) => e.type === 'Resolved')).toHaveLength(1);
      expect((await orThrow(store.getLedger(guid)))?.status).toBe(processed.includes(guid) ? 'DONE' : 'FAILED');
    }
    expect(sim.stats().totalCalls).toBe(processed.length); // only the direct POSTs above: settling never sends
    // Each relay's metrics: both asked (the race was real), and the settlements they recorded add up to one per GUID.
    const asked = await Promise.all(relays.map((r) => metricAt(r.url, 'guidgate_inquiries_total')));
    const settled = await Promise.all(relays.map((r) => metricAt(r.url, 'guidgate_settlement_lag_seconds_count')));
    console.log(`two relays: inquiries ${asked.join(' + ')}, settlements ${settled.join(' + ')} for ${guids.length} GUIDs`);
    expect(Math.min(...asked)).toBeGreaterThan(0);
    expect(settled[0]! + settled[1]!).toBe(guids.length);
    // The leases: between them the relays asked about each GUID once.
    for (const guid of guids) expect(sim.inquiries(guid), guid).toBe(1);
    expect(asked[0]! + asked[1]!).toBe(guids.length);
  });
});
