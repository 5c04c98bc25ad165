import { join } from 'node:path';
import { describe, it, expect } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite/sqliteStore.js';
import { claimRace } from '../support/children.js';
import { useTempDir } from '../support/tmp.js';
import { orThrow } from '../../src/events/storeResult.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';

describe('many processes, one ledger file', () => {
  const tmp = useTempDir();

  it('4 processes race to claim the same 1,000 GUIDs: each is claimed exactly once', async () => {
    const dbPath = join(tmp(), 'race.db');
    // Create the schema first so the children race on claims, not on the migration.
    await openSqliteStore({ projection: ledgerProjection, path: dbPath }).close();
    // All four open the file first, then start together.
    const won = await claimRace('claimer', [1, 2, 3, 4].map((seed) => [dbPath, '1000', String(seed * 7919)]));
    const all = won.flat();
    expect(all).toHaveLength(1000);
    expect(new Set(all).size).toBe(1000);
    // The race was real: more than one process won something.
    expect(won.filter((w) => w.length > 0).length).toBeGreaterThan(1);

    const store = openSqliteStore({ projection: ledgerProjection, path: dbPath });
    const log = await orThrow(store.readAll(-1, 10_000));
    expect(log.filter((e) => e.type === 'Claimed')).toHaveLength(1000);
    expect(log.filter((e) => e.type === 'Sent')).toHaveLength(1000);
    expect(await orThrow(store.verifyProjection())).toEqual([]);
    await store.close();
  }, 120_000);
});
