/**
 * CONTRACT.md §9, continuity on PostgreSQL where one relay's memory is not enough: real servers, real relays (serve),
 * the simulator counting applications.
 * - A base backup restored on the same timeline (no promotion), two relays: the one whose own recent writes all
 *   survived still sees the log's highest position fall, and resends through it are inquired about.
 * - A lossy failover: the window one relay opened is recorded in the ledger, so a relay restarted inside it, and
 *   one started after the failover, keep it.
 * - A lossy failover while no relay ran: the first relay started afterwards sees another timeline than the one the
 *   relays last recorded, and opens the window.
 * Each resend must be applied 0 times more. On code without these (a fall ignored, the window in memory only) each
 * one applies the lost transfers twice.
 */
import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { clustersForTests, onServer, startPrimaryWithAsyncStandby, startServerWithBackup } from '../support/pgCluster.js';
import { startSwitchProxy } from '../support/pgSwitchProxy.js';
import { httpRequest, resendUntilDefinite, transfer } from '../support/relayHarness.js';
import { startServe } from '../support/serveProcess.js';
import { sigkillAndWait } from '../support/settle.js';
import { useCleanup } from '../support/cleanup.js';
import { sleep, waitFor } from '../support/waitFor.js';

const { available } = clustersForTests();
const LOST = 20;
// A send window (half of --grace) of 3 s: on a loaded machine a claim can take over a second.
const RELAY_ARGS = ['--timeout', '2s', '--grace', '6s', '--min-age', '2s', '--continuity-window', '1h'];

type Serve = ReturnType<typeof startServe> & { url: string };

const post = (url: string, body: string) => httpRequest(`${url}/v1/transfers`, { method: 'POST', body });

const continuityOf = async (url: string) => (await httpRequest(`${url}/v1/stats`, { method: 'GET' })).json()['continuity'] as { state: string };

describe.skipIf(!available)('continuity on PostgreSQL, recorded in the ledger (real servers, real relays)', () => {
  const cleanup = useCleanup();
  const relay = async (db: string, accountUrl: string): Promise<Serve> => {
    const s = startServe(['--db', db, '--account-url', accountUrl, ...RELAY_ARGS]);
    cleanup.add(() => sigkillAndWait(s.child));
    return { ...s, url: await s.ready };
  };

  it('a base backup restored on the same timeline: the relay whose own writes survived sees the log fall; 0 applied twice through it', async () => {
    const server = await startServerWithBackup();
    cleanup.add(() => server.stop());
    const proxy = await startSwitchProxy(server.port);
    cleanup.add(() => proxy.close());
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const db = proxy.through(server.url);
    const [a, b] = [await relay(db, sim.url), await relay(db, sim.url)];

    for (let i = 0; i < 20; i++) expect((await post(b.url, JSON.stringify(transfer()))).json()['code']).toBe('0000');
    for (let i = 0; i < 20; i++) expect((await post(a.url, JSON.stringify(transfer()))).json()['code']).toBe('0000');
    await server.takeBackup();
    // Acknowledged through relay A after the backup: the restore loses them; relay B wrote nothing since.
    const lost = Array.from({ length: LOST }, () => JSON.stringify(transfer()));
    for (const body of lost) expect((await post(a.url, body)).json()['code']).toBe('0000');
    expect(sim.stats().totalApplied).toBe(40 + LOST);
    // B's checks (every second) read the log's highest position; what B saw is not observable from outside: three periods.
    await sleep(3000);

    proxy.switchTo(await server.replaceWithBackup());
    const codes = await resendUntilDefinite(b.url, lost);
    expect(codes.filter((c) => c !== '0000')).toEqual([]);
    const stats = sim.stats();
    console.info(`base backup restored on the same timeline: ${stats.doubleApplied.length} of ${LOST} lost transfers applied twice through the other relay`);
    expect(stats.doubleApplied).toEqual([]);
    expect(stats.totalApplied).toBe(40 + LOST);
    expect(b.output()).toMatch(/the log's highest position fell from \d+ to \d+/);
    expect(await continuityOf(b.url)).toMatchObject({ state: 'window' });
  }, 180_000);

  it('a lossy failover: a relay restarted inside the window and one started after the failover keep it; 0 applied twice through them', async () => {
    const { cluster, proxy, sim, lost } = await lossyCluster();
    const db = proxy.through(cluster.primaryUrl);
    const first = await writeThenLose(cluster, db, sim.url, lost);
    await cluster.killPrimary();
    proxy.switchTo(cluster.standbyPort);
    await cluster.promoteStandby();
    await waitFor(async () => (await continuityOf(first.url).catch(() => ({ state: '' }))).state === 'window', { timeoutMs: 30_000, what: 'the first relay in its window' });

    // Recorded in the ledger (the relay shows the window a moment before its write commits).
    await waitFor(() => onServer(cluster.standbyPort, async (c) => (await c.query('SELECT 1 FROM continuity_windows')).rowCount === 1), { what: 'the window recorded' });
    // Restarted inside the window (a deploy, a crash), and another relay started now.
    await sigkillAndWait(first.child);
    const restarted = await relay(db, sim.url);
    const later = await relay(db, sim.url);
    const states = [await continuityOf(restarted.url), await continuityOf(later.url)];
    const half = lost.lost.length / 2;
    const codes = [...(await resendUntilDefinite(restarted.url, lost.lost.slice(0, half))), ...(await resendUntilDefinite(later.url, lost.lost.slice(half)))];
    expect(codes.filter((c) => c !== '0000')).toEqual([]);
    // A new transfer in the window: inquired about (absent), then sent as usual.
    expect(await resendUntilDefinite(later.url, [JSON.stringify(transfer())])).toEqual(['0000']);
    const stats = sim.stats();
    console.info(`lossy failover, relay restarted / started later inside the window: ${stats.doubleApplied.length} of ${LOST} lost transfers applied twice`);
    expect(stats.doubleApplied).toEqual([]);
    expect(states).toMatchObject([{ state: 'window' }, { state: 'window' }]);
    expect(stats.totalApplied).toBe(lost.before.length + LOST + 1);
    expect(restarted.output()).toMatch(/continuity window still open from before the restart/);
  }, 180_000);

  it('a lossy failover while no relay ran: the first relay started afterwards opens the window; 0 applied twice', async () => {
    const { cluster, proxy, sim, lost } = await lossyCluster();
    const db = proxy.through(cluster.primaryUrl);
    const first = await writeThenLose(cluster, db, sim.url, lost);
    await sigkillAndWait(first.child);
    await cluster.killPrimary();
    proxy.switchTo(cluster.standbyPort);
    await cluster.promoteStandby();

    const later = await relay(db, sim.url);
    const state = await continuityOf(later.url);
    const codes = await resendUntilDefinite(later.url, lost.lost);
    expect(codes.filter((c) => c !== '0000')).toEqual([]);
    const stats = sim.stats();
    console.info(`lossy failover while no relay ran: ${stats.doubleApplied.length} of ${LOST} lost transfers applied twice through a relay started afterwards`);
    expect(stats.doubleApplied).toEqual([]);
    expect(state).toMatchObject({ state: 'window' });
    expect(later.output()).toMatch(/another server or timeline answers than the one the relays last recorded/);
  }, 180_000);

  /** A primary and an async standby behind one address, the simulator, and the transfers of one run. */
  /** A relay that writes `before` (streamed to the standby), then `lost` (acknowledged, never received by it). */
  async function writeThenLose(cluster: Awaited<ReturnType<typeof lossyCluster>>['cluster'], db: string, simUrl: string, lost: { before: readonly string[]; lost: readonly string[] }) {
    const first = await relay(db, simUrl);
    for (const body of lost.before) expect((await post(first.url, body)).json()['code']).toBe('0000');
    await cluster.waitForStandbyCaughtUp();
    await cluster.cutStandbyReceiving();
    for (const body of lost.lost) expect((await post(first.url, body)).json()['code']).toBe('0000');
    return first;
  }

  async function lossyCluster() {
    const cluster = await startPrimaryWithAsyncStandby();
    cleanup.add(() => cluster.stop());
    const proxy = await startSwitchProxy(cluster.primaryPort);
    cleanup.add(() => proxy.close());
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const lost = { before: Array.from({ length: 10 }, () => JSON.stringify(transfer())), lost: Array.from({ length: LOST }, () => JSON.stringify(transfer())) };
    return { cluster, proxy, sim, lost };
  }
});
