/**
 * The store contract on a multi-host URL (CONTRACT.md §9), on a cluster of this file's own: a primary and a hot
 * standby streaming from it (test/support/pgCluster.ts). The URL lists, in this order, a port nothing listens on,
 * the standby, then the primary: every connection the store makes must pass the first two by (refused; in recovery)
 * and land on the primary. A store that connected to the standby would fail every write (25006); one that stopped at
 * the first host would not open at all.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/openStore.js';
import { parsePostgresUrl } from '../../src/store/postgres/postgresUrl.js';
import { clustersForTests, freePorts, onServer, serverUrl, startPrimaryWithAsyncStandby, type PrimaryWithStandby } from '../support/pgCluster.js';
import { postgresBackdoor } from './postgresBackdoor.js';
import { describeStoreContract, type StoreFactory, type StoreFixture } from './storeContract.js';

const { available } = clustersForTests();

describe.skipIf(!available)('PostgreSQL, multi-host URL (a host down, a standby, then the primary)', () => {
  let cluster: PrimaryWithStandby;
  let downPort: number;
  let n = 0;
  beforeAll(async () => {
    cluster = await startPrimaryWithAsyncStandby();
    [downPort] = (await freePorts(1)) as [number];
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  const multiHostUrl = (database: string) =>
    `postgres://postgres@127.0.0.1:${downPort},127.0.0.1:${cluster.standbyPort},127.0.0.1:${cluster.primaryPort}/${database}?target_session_attrs=read-write&sslmode=disable`;

  it('the URL lists the standby before the primary, and the standby is one (in recovery)', async () => {
    expect(parsePostgresUrl(multiHostUrl('postgres')).hosts.map((h) => h.port)).toEqual([downPort, cluster.standbyPort, cluster.primaryPort]);
    expect(await onServer(cluster.standbyPort, async (c) => (await c.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r')).rows[0]!.r)).toBe(true);
  });

  const factory: StoreFactory = {
    // A database per fixture on the primary (the standby gets it by replication); the cluster goes with the file.
    async create(): Promise<StoreFixture> {
      const name = `multi_${process.pid}_${n++}`;
      await onServer(cluster.primaryPort, (c) => c.query(`CREATE DATABASE ${name}`));
      // On the standby too before the store connects: else the standby is passed by for lacking the database, not for being one.
      await cluster.waitForStandbyCaughtUp();
      const url = multiHostUrl(name);
      return { db: url, open: (o) => openStore(url, { ...o }), backdoor: postgresBackdoor(serverUrl(cluster.primaryPort, name)) };
    },
    dispose: () => Promise.resolve(),
  };
  describeStoreContract('PostgreSQL (multi-host)', factory);

  it('every connection the store made is on the primary: none on the standby', async () => {
    const name = `multi_${process.pid}_check`;
    await onServer(cluster.primaryPort, (c) => c.query(`CREATE DATABASE ${name}`));
    await cluster.waitForStandbyCaughtUp();
    const store = await openStore(multiHostUrl(name), { create: true });
    try {
      const onStandby = await onServer(cluster.standbyPort, async (c) => (await c.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'guidgate'")).rows[0]!.n as number);
      const onPrimary = await onServer(cluster.primaryPort, async (c) => (await c.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'guidgate'")).rows[0]!.n as number);
      expect(onStandby).toBe(0);
      expect(onPrimary).toBeGreaterThan(0);
    } finally {
      await store.close();
    }
  });
});
