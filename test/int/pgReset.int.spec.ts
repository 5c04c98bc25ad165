/**
 * The PostgreSQL tests share one database per file and empty it between tests with `dbs.reset()`: a table it
 * left full (a lease, an inquiry schedule, a request record) would leak one test's state into the next.
 */
import { describe, expect, it } from 'vitest';
import { orThrow } from '../../src/events/storeResult.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';
import { openPostgresStore } from '../../src/store/postgres/postgresStore.js';
import { useCleanup } from '../support/cleanup.js';
import { seedRow } from '../support/commandsSeed.js';
import { postgresForTests, useTestDatabases } from '../support/pg.js';
import { runOver, sentRecord } from '../support/reconcile.js';
import { useTempDir } from '../support/tmp.js';

const { available } = await postgresForTests();

describe.skipIf(!available)('useTestDatabases().reset() (real PostgreSQL)', () => {
  const dbs = useTestDatabases();
  const cleanup = useCleanup();
  const tmp = useTempDir();

  it('empties every table a store writes, keeps the schema and its version: a store opened afterwards starts empty', async () => {
    const store = cleanup.use(await openPostgresStore({ projection: ledgerProjection, url: dbs.url(), actor: { by: 'reset-test', host: 'h', pid: 1 } }));
    const unknown = await seedRow(store, 'R-1', 'UNKNOWN');
    await orThrow(store.recordUnclearInquiry('R-1', unknown.sentAt!, unknown.sentAt! + 1000, 1000));
    expect(await orThrow(store.leaseRows('reset-test', [{ guid: 'R-1', lastSeq: unknown.lastSeq }], 60_000))).toEqual(new Set(['R-1']));
    await orThrow(store.recordRequests([{ guid: 'R-1', at: Date.now(), key: null, code: 'E901', fingerprintMatch: true }]));
    await orThrow(store.recordKeyUses([{ key: 'reset-key', at: Date.now() }]));
    await orThrow(store.writeMark({ position: 1, at: Date.now(), server: (await orThrow(store.ledgerStanding())).server, relay: 'reset-test', window: { wentBackAt: Date.now(), endsAt: Date.now() + 1000 } }));
    // A notification (an inquiry settled R-3) and one delivery attempt of it.
    await seedRow(store, 'R-3', 'UNKNOWN');
    await orThrow(store.execute('R-3', { type: 'Resolve', outcome: 'processed', code: '0000', response: '{"code":"0000"}' }));
    const [due] = await orThrow(store.leaseNotifications('reset-test', 10, 60_000));
    await orThrow(store.recordDeliveries([{ guid: 'R-3', seq: due!.seq, at: Date.now(), result: 'failed', httpStatus: 500, detail: 'not a 2xx', latencyMs: 3, nextAt: Date.now() + 5000, holder: 'reset-test' }]));
    await orThrow(store.recordReconciliation(await runOver(tmp(), [sentRecord('R-2', 1100)], [], { from: 1000, to: 2000, pendingMs: 0 })));
    const rowsPerTable = async () => {
      const { rows } = await store.pool.query<{ name: string }>("SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1");
      const counts: Record<string, number> = {};
      for (const { name } of rows) counts[name] = Number((await store.pool.query<{ n: string }>(`SELECT count(*) AS n FROM "${name}"`)).rows[0]!.n);
      return counts;
    };
    const before = await rowsPerTable();
    // Every table has something to empty: the test sees a table that reset() skips.
    for (const [table, n] of Object.entries(before)) expect(n, `rows in ${table} before reset()`).toBeGreaterThan(0);

    await dbs.reset();
    const after = await rowsPerTable();
    expect(Object.keys(after)).toEqual(Object.keys(before));
    for (const [table, n] of Object.entries(after)) expect(n, `rows in ${table} after reset()`).toBe(table === 'schema_version' ? before[table] : 0);
    expect(await orThrow(store.getLedger('R-1'))).toBeNull();
    expect(await seedRow(store, 'R-1', 'UNKNOWN')).toMatchObject({ guid: 'R-1', status: 'UNKNOWN', attempts: 1 });
  });
});
