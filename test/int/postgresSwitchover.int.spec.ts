/**
 * A switchover in which the old primary stays up, fenced read-only (`default_transaction_read_only = on`), and the
 * standby is promoted: the writes move to the new primary (a write on the old one fails 25006, its connection is
 * closed, the next one rotates). The reads must move too: a read on the fenced host does not fail, it answers from
 * a ledger that no longer gets the writes (a resend read there would meet an old row). Every pool's connection to a
 * host other than the one that last took writes is closed when it is next handed out (hosts.ts, HostPool).
 */
import { describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../src/store/postgres/postgresStore.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';
import { orThrow } from '../../src/events/storeResult.js';
import type { Command } from '../../src/events/decide.js';
import * as E from 'fp-ts/lib/Either.js';
import { clustersForTests, onServer, startPrimaryWithAsyncStandby } from '../support/pgCluster.js';
import { sleep } from '../support/waitFor.js';

const submit = (fp = 'fp'): Command => ({ type: 'Submit', request: '{"guid":"g"}', fingerprint: fp, timeoutMs: 3000, maxAttempts: 3 });
const { available } = clustersForTests();

describe.skipIf(!available)('PostgreSQL: the reads after a switchover to a promoted standby, the old primary up and read-only', () => {
  it('the row reads follow the writes to the new primary: a row written there is read back within 3 s of steady traffic', async () => {
    const cluster = await startPrimaryWithAsyncStandby();
    const hosts: string[] = [];
    try {
      const url = `postgres://postgres@127.0.0.1:${cluster.primaryPort},127.0.0.1:${cluster.standbyPort}/postgres`;
      const store = await openPostgresStore({ url, projection: ledgerProjection, connectTimeoutMs: 2000, onHosts: (e) => hosts.push(JSON.stringify(e)) });
      try {
        await orThrow(store.execute('g1', submit()));
        // Traffic as a relay makes it: row reads, and the other pool's own statements.
        for (let i = 0; i < 5; i++) await Promise.all([orThrow(store.getLedger('g1')), orThrow(store.getLedger('g1')), orThrow(store.keyUses())]);
        await cluster.waitForStandbyCaughtUp();
        // The switchover: old primary fenced read-only, standby promoted.
        await onServer(cluster.primaryPort, async (c) => {
          await c.query('ALTER SYSTEM SET default_transaction_read_only = on');
          await c.query('SELECT pg_reload_conf()');
        });
        await cluster.promoteStandby();
        // The write goes through on the new primary (a first try may meet the fenced host).
        let wrote = false;
        for (let i = 0; i < 20 && !wrote; i++) {
          wrote = E.isRight(await store.execute('g2', submit('fp2')));
          // The other pool's writes (request records, key uses) meet the fenced host too, as serve's do.
          await store.recordKeyUses([{ key: 'k', at: Date.now() }]);
          if (!wrote) await sleep(100);
        }
        expect(wrote).toBe(true);
        const onNew = await onServer(cluster.standbyPort, async (c) => (await c.query("SELECT 1 FROM ledger WHERE guid = 'g2'")).rowCount);
        expect(onNew).toBe(1);
        // The relay keeps reading: within 3 s of steady traffic the row written on the new primary must be seen.
        const until = Date.now() + 3000;
        let seen: unknown = null;
        let reads = 0;
        while (Date.now() < until && seen === null) {
          const [row] = await Promise.all([orThrow(store.getLedger('g2')), orThrow(store.getLedger('g1')), store.recordKeyUses([{ key: 'k', at: Date.now() }])]);
          seen = row;
          reads++;
          await sleep(50);
        }
        expect(seen, `g2, written on the new primary, read back by getLedger (${reads} reads; hosts: ${hosts.join(' ')})`).not.toBeNull();
        // And nothing of the store's is left on the fenced host once every pool has been used since.
        await orThrow(store.keyUses());
        const left = await onServer(cluster.primaryPort, async (c) =>
          Number((await c.query<{ n: string }>("SELECT count(*)::text AS n FROM pg_stat_activity WHERE application_name = 'guidgate'")).rows[0]?.n),
        );
        expect(left).toBe(0);
      } finally {
        await store.close();
      }
    } finally {
      await cluster.stop();
    }
  }, 90_000);
});
