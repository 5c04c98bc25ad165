/**
 * The PostgreSQL clusters the failover tests stand on (test/support/pgCluster.ts) do what those tests rely on: a
 * pg_auto_failover formation whose URL reaches the writable primary and, once the primary is stopped, the promoted
 * secondary with every committed row; an asynchronous standby cut off from its primary that loses, when promoted,
 * what the primary committed after the cut. Both clusters start at once (they share nothing), to keep this short.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { clustersForTests, FORMATION_DB, onServer, startAutoFailoverFormation, startPrimaryWithAsyncStandby, type AutoFailoverFormation, type PrimaryWithStandby } from '../support/pgCluster.js';

const { available } = clustersForTests();

const psql = async (url: string, sql: string) => (await promisify(execFile)('psql', [url, '-Atqc', sql])).stdout.trim();
const count = (port: number, database?: string) => onServer(port, async (c) => Number((await c.query<{ n: string }>('SELECT count(*) AS n FROM t')).rows[0]!.n), database);

describe.skipIf(!available).concurrent('PostgreSQL clusters for failover tests', () => {
  const stops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    await Promise.all(stops.map((s) => s()));
  });

  it('pg_auto_failover: the formation URL reaches the primary; after the primary is stopped the secondary takes writes with every committed row', async () => {
    const formation: AutoFailoverFormation = await startAutoFailoverFormation();
    stops.push(() => formation.stop());
    expect(formation.uri).toMatch(/^postgres:\/\/127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\/guidgate\?target_session_attrs=read-write&sslmode=require$/);
    const first = await formation.primary();
    expect(first?.name).toBe('node1');
    expect(await formation.states()).toEqual([
      { name: 'node1', reported: 'primary', assigned: 'primary' },
      { name: 'node2', reported: 'secondary', assigned: 'secondary' },
    ]);
    // libpq's own multi-host handling (psql), the reference for the drivers: the URL lands on the primary.
    expect(await psql(formation.url, 'CREATE TABLE t (x int); INSERT INTO t SELECT generate_series(1, 100); SELECT inet_server_port()')).toBe(String(first!.port));

    const t0 = performance.now();
    const stopped = await formation.stopPrimary();
    const next = await formation.waitForWritablePrimary({ not: stopped });
    const failoverMs = performance.now() - t0;
    expect(next.name).toBe('node2');
    // Synchronous replication: every row committed on the old primary is on the new one.
    expect(await count(next.port, FORMATION_DB)).toBe(100);
    await onServer(next.port, (c) => c.query('INSERT INTO t VALUES (101)'), FORMATION_DB);
    console.info(`pg_auto_failover formation ready in ${(formation.readyMs / 1000).toFixed(1)} s; writable secondary ${(failoverMs / 1000).toFixed(1)} s after stop --immediate of the primary`);
  }, 300_000);

  it('asynchronous standby: what the primary commits after the standby stops receiving is gone after its promotion', async () => {
    const cluster: PrimaryWithStandby = await startPrimaryWithAsyncStandby();
    stops.push(() => cluster.stop());
    await onServer(cluster.primaryPort, async (c) => {
      await c.query('CREATE TABLE t (x int)');
      await c.query('INSERT INTO t VALUES (0)');
    });
    await cluster.waitForStandbyCaughtUp();
    await cluster.cutStandbyReceiving();
    // 100 transactions, each acknowledged by the primary's COMMIT.
    await onServer(cluster.primaryPort, async (c) => {
      for (let i = 1; i <= 100; i++) await c.query('INSERT INTO t VALUES ($1)', [i]);
    });
    expect(await count(cluster.primaryPort)).toBe(101);

    await cluster.killPrimary();
    await cluster.promoteStandby();
    expect(await count(cluster.standbyPort)).toBe(1);
    await onServer(cluster.standbyPort, (c) => c.query('INSERT INTO t VALUES (1)'));
  }, 120_000);
});
