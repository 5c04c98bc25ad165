/**
 * Every age is judged by the ledger's clock (`store.now()`, src/events/policy.ts `ledgerTime`), never by the host's:
 * on PostgreSQL the two differ, and `resolve` (which acts on ages) reads the ledger's. Here the ledger's clock is
 * a store opened on a clock of its own, years from the host's.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/openStore.js';
import { listLedger } from '../../src/commands/ledger.js';
import { ledgerStats } from '../../src/commands/stats.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import type { EventStore } from '../../src/events/store.js';
import { seedRow } from '../support/commandsSeed.js';
import { useTempDir } from '../support/tmp.js';

const SEEDED_AT = Date.UTC(2020, 0, 1);
const TEN_MINUTES = 600_000;

describe("ages by the ledger's clock", () => {
  const tmp = useTempDir();

  /** A ledger whose clock says SEEDED_AT while its rows are written, then ten minutes later. */
  async function tenMinutesOld(): Promise<EventStore> {
    let now = SEEDED_AT;
    const store = await openStore(join(tmp(), 'ledger.db'), { clock: () => now });
    await seedRow(store, 'unknown-1', 'UNKNOWN');
    await seedRow(store, 'dead-1', 'FAILED', { attempts: 3 });
    await seedRow(store, 'done-1', 'DONE');
    now = SEEDED_AT + TEN_MINUTES;
    return store;
  }

  it('stats: the oldest UNKNOWN and FAILED rows are ten minutes old', async () => {
    const store = await tenMinutesOld();
    try {
      const stats = await ledgerStats(store, { maxAttempts: 3 });
      expect(stats).toMatchObject({ _tag: 'Right', right: { oldest: { UNKNOWN: { ageMs: TEN_MINUTES }, FAILED: { ageMs: TEN_MINUTES } }, deadLetters: { count: 1 } } });
    } finally {
      await store.close();
    }
  });

  it('ledger --older-than: rows older than five minutes, none older than fifteen', async () => {
    const store = await tenMinutesOld();
    try {
      const guids = async (olderThanMs: number) => {
        const found: string[] = [];
        for await (const row of listLedger(store, { olderThanMs })) found.push(row.guid);
        return found;
      };
      expect(await guids(5 * 60_000)).toEqual(['dead-1', 'done-1', 'unknown-1']);
      expect(await guids(15 * 60_000)).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it("the metrics' age gauges say 600 seconds", async () => {
    const store = await tenMinutesOld();
    try {
      const text = await createMetrics(store, Date.now, { maxAttempts: 3 }).registry.metrics();
      expect(text).toContain('guidgate_oldest_row_age_seconds{status="UNKNOWN"} 600\n');
      expect(text).toContain('guidgate_oldest_row_age_seconds{status="FAILED"} 600\n');
      expect(text).toContain('guidgate_dead_letters 1\n');
    } finally {
      await store.close();
    }
  });
});
