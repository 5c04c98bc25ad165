/**
 * The durability report (CONTRACT.md §9) on a primary with a streaming standby of this file's own
 * (test/support/pgCluster.ts): asynchronous at first (synchronous_standby_names empty), so `serve` warns at start
 * that a failover could lose acknowledged claims, exports 0 synchronous standbys, and with --require-sync-standby
 * answers /healthz 503 and E503 to a new transfer without calling; once the primary names its standby synchronous,
 * the gauge says 1 and the same relay takes transfers, without a restart.
 */
import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { transferBody } from '../support/commandsSeed.js';
import { clustersForTests, onServer, startPrimaryWithAsyncStandby } from '../support/pgCluster.js';
import { metricAt, sigkillAndWait } from '../support/settle.js';
import { startServe } from '../support/serveProcess.js';
import { useCleanup } from '../support/cleanup.js';
import { waitFor } from '../support/waitFor.js';

const { available } = clustersForTests();

describe.skipIf(!available)('PostgreSQL durability report', () => {
  const cleanup = useCleanup();

  it('asynchronous standby: warned at start, gauge 0, --require-sync-standby refuses new transfers (E503, no call) and /healthz; a synchronous one lets them through', async () => {
    const cluster = await startPrimaryWithAsyncStandby();
    cleanup.add(() => cluster.stop());
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    // The standby listed first, as pg_autoctl and Patroni may print it: the relay writes to the primary all the same.
    const db = `postgres://postgres@127.0.0.1:${cluster.standbyPort},127.0.0.1:${cluster.primaryPort}/postgres?target_session_attrs=read-write`;
    const strict = startServe(['--db', db, '--account-url', sim.url, '--require-sync-standby']);
    const relaxed = startServe(['--db', db, '--account-url', sim.url]);
    cleanup.add(() => sigkillAndWait(strict.child));
    cleanup.add(() => sigkillAndWait(relaxed.child));
    const [strictUrl, relaxedUrl] = await Promise.all([strict.ready, relaxed.ready]);
    const post = async (url: string, guid: string) => {
      const res = await fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: transferBody(guid).body });
      return { status: res.status, code: ((await res.json()) as { code: string }).code };
    };

    for (const relay of [strict, relaxed]) expect(relay.output()).toContain('a failover could lose acknowledged claims: synchronous_standby_names is empty');
    expect(await metricAt(strictUrl, 'guidgate_pg_synchronous_standbys')).toBe(0);
    expect((await fetch(`${strictUrl}/healthz`)).status).toBe(503);
    expect(await post(strictUrl, 'DUR-1')).toEqual({ status: 503, code: 'E503' });
    expect(sim.guidStats('DUR-1').calls).toBe(0);
    expect((await fetch(`${strictUrl}/v1/transfers/DUR-1`)).status).toBe(404);
    // Without the flag the relay only reports: transfers go through.
    expect((await fetch(`${relaxedUrl}/healthz`)).status).toBe(200);
    expect(await post(relaxedUrl, 'DUR-2')).toEqual({ status: 200, code: '0000' });

    await onServer(cluster.primaryPort, async (c) => {
      await c.query("ALTER SYSTEM SET synchronous_standby_names = '*'");
      await c.query('SELECT pg_reload_conf()');
    });
    await waitFor(() => onServer(cluster.primaryPort, async (c) => (await c.query("SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'")).rowCount === 1), { what: 'the standby synchronous' });
    // Read again within a few seconds while the relay refuses (not only every minute).
    await waitFor(async () => (await fetch(`${strictUrl}/healthz`)).status === 200, { timeoutMs: 20_000, intervalMs: 200, what: '/healthz 200 once a synchronous standby is seen' });
    expect(await metricAt(strictUrl, 'guidgate_pg_synchronous_standbys')).toBe(1);
    expect(await post(strictUrl, 'DUR-1')).toEqual({ status: 200, code: '0000' });
    expect(sim.guidStats('DUR-1').calls).toBe(1);
  }, 120_000);
});
