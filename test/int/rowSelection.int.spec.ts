/**
 * A rule written as a row predicate and as a ledger query says the same of every row: `isDeadLetter` and
 * `deadLetterRows`, and the commands' selections (what the store returns) and `unmetCondition` (why the operator
 * API says a row was left out). A real SQLite ledger, rows of every state, sent 1 to 3 times and of two ages.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { STATUSES } from '../../src/events/codecs.js';
import { deadLetterRows, isDeadLetter } from '../../src/events/policy.js';
import type { EventStore } from '../../src/events/store.js';
import type { LedgerState } from '../../src/events/state.js';
import { orThrow } from '../../src/events/storeResult.js';
import { openStore } from '../../src/store/openStore.js';
import { reprocessSelection, whyReprocessLeavesOut } from '../../src/commands/reprocess.js';
import { resolveSelection, whyResolveLeavesOut } from '../../src/commands/resolve.js';
import { pagedRows, unmetCondition, type RowFilter } from '../../src/commands/rows.js';
import { seedRow, transferBody } from '../support/commandsSeed.js';
import { useTempDir } from '../support/tmp.js';

const START = Date.UTC(2020, 0, 1);
const MINUTE = 60_000;

describe('a rule as a predicate and as a query says the same of every row', () => {
  const tmp = useTempDir();

  async function everyKindOfRow(): Promise<{ store: EventStore; rows: LedgerState[]; now: number }> {
    let now = START;
    const store = await openStore(join(tmp(), 'ledger.db'), { clock: () => now });
    for (const status of STATUSES) {
      for (const attempts of [1, 2, 3]) {
        now = START;
        await seedRow(store, `old-${status}-${attempts}`, status, { attempts });
        now = START + 10 * MINUTE;
        await seedRow(store, `new-${status}-${attempts}`, status, { attempts });
      }
    }
    // Sent long ago, its timeout recorded late: its last Sent and its last change are ten minutes apart.
    now = START;
    const { body, fingerprint } = transferBody('late-timeout');
    await orThrow(store.execute('late-timeout', { type: 'Submit', request: body, fingerprint, timeoutMs: 1000, maxAttempts: 3 }));
    now = START + 10 * MINUTE;
    await orThrow(store.execute('late-timeout', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
    now = START + 11 * MINUTE;
    return { store, rows: await orThrow(store.queryLedger({})), now };
  }

  const selected = async (store: EventStore, filter: RowFilter) => (await orThrow(store.queryLedger(filter))).map((r) => r.guid).sort();

  it('pagedRows in updated order, a page of 2 at a time: every row once, newest change first, as one query gives them (#28)', async () => {
    const { store } = await everyKindOfRow();
    try {
      const one = (await orThrow(store.queryLedger({ order: 'updated' }))).map((r) => r.guid);
      const paged: string[] = [];
      for await (const row of pagedRows(store, { order: 'updated' }, { pageSize: 2 })) paged.push(row.guid);
      expect(paged).toEqual(one);
      expect(new Set(paged).size).toBe(STATUSES.length * 6 + 1);
      const times = (await orThrow(store.queryLedger({ order: 'updated' }))).map((r) => r.updatedAt);
      expect(times).toEqual([...times].sort((a, b) => b - a));
      const limited: string[] = [];
      for await (const row of pagedRows(store, { order: 'updated', statuses: ['FAILED'] }, { pageSize: 2, limit: 5 })) limited.push(row.guid);
      expect(limited).toEqual(one.filter((g) => g.includes('-FAILED-')).slice(0, 5));
    } finally {
      await store.close();
    }
  });

  it('dead letters: isDeadLetter is deadLetterRows', async () => {
    const { store, rows } = await everyKindOfRow();
    try {
      for (const maxAttempts of [1, 2, 3, 4]) {
        const byPredicate = rows.filter((r) => isDeadLetter(r, maxAttempts)).map((r) => r.guid).sort();
        expect(await selected(store, deadLetterRows(maxAttempts)), `maxAttempts ${maxAttempts}`).toEqual(byPredicate);
      }
      expect(rows.filter((r) => isDeadLetter(r, 3)).map((r) => r.guid).sort()).toEqual(['new-FAILED-3', 'old-FAILED-3']);
    } finally {
      await store.close();
    }
  });

  it("resolve's and reprocess's selections: a row is selected exactly when no condition is unmet, and the E409 says why", async () => {
    const { store, rows, now } = await everyKindOfRow();
    try {
      for (const minAgeMs of [0, 5 * MINUTE, 30 * MINUTE]) {
        const filter = resolveSelection(now, { minAgeMs });
        expect(await selected(store, filter), `resolve, minAge ${minAgeMs}`).toEqual(rows.filter((r) => unmetCondition(filter, r) === null).map((r) => r.guid).sort());
        for (const row of rows) expect(whyResolveLeavesOut(row, now, minAgeMs) === null, row.guid).toBe(unmetCondition(filter, row) === null);
      }
      for (const maxAttempts of [1, 2, 3, 4]) {
        const filter = reprocessSelection({ maxAttempts });
        expect(await selected(store, filter), `reprocess, maxAttempts ${maxAttempts}`).toEqual(rows.filter((r) => unmetCondition(filter, r) === null).map((r) => r.guid).sort());
        for (const row of rows) expect(whyReprocessLeavesOut(row, maxAttempts) === null, row.guid).toBe(unmetCondition(filter, row) === null);
      }
      expect(whyReprocessLeavesOut(rows.find((r) => r.guid === 'old-FAILED-3')!, 3)).toContain('dead letter');
      expect(whyResolveLeavesOut(rows.find((r) => r.guid === 'new-UNKNOWN-1')!, now, 5 * MINUTE)).toContain('younger than minAge');
      expect(whyResolveLeavesOut(rows.find((r) => r.guid === 'old-DONE-1')!, now, 0)).toContain('this one is DONE');
      expect(whyResolveLeavesOut(rows.find((r) => r.guid === 'late-timeout')!, now, 5 * MINUTE)).toBeNull();
    } finally {
      await store.close();
    }
  });
});
