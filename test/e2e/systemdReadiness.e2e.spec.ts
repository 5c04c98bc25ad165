/**
 * `serve` under a notify socket of the test's own, as systemd runs the unit (Type=notify, WatchdogSec): READY=1 only
 * once /healthz would say ok, with a STATUS saying why not until then; WATCHDOG=1 at half WATCHDOG_USEC; STOPPING=1
 * at SIGTERM. On PostgreSQL with --require-sync-standby, /healthz is 503 until the primary has a synchronous standby:
 * the relay is not ready until then, and becomes ready, without a restart, once it has one.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { useCleanup } from '../support/cleanup.js';
import { bindNotifySocket, python3, valueOf } from '../support/notifySocket.js';
import { clustersForTests, onServer, startPrimaryWithAsyncStandby } from '../support/pgCluster.js';
import { sigkillAndWait } from '../support/settle.js';
import { closed, startServe } from '../support/serveProcess.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

const python = python3();
const notifyTool = spawnSync('systemd-notify', ['--version']).status === 0;
if (python === null || !notifyTool) {
  const missing = python === null ? 'python3 (it binds the test\'s notify socket)' : 'systemd-notify (Debian package systemd)';
  if (process.env['CI'] === 'true') throw new Error(`${missing} is required under CI=true`);
  console.warn(`SKIPPED: no ${missing}; serve's readiness under systemd was not tested`);
}
const runnable = python !== null && notifyTool;
const { available: clusters } = clustersForTests();

describe.skipIf(!runnable)('serve under systemd\'s notify socket', () => {
  const tmp = useTempDir('file');
  const cleanup = useCleanup();

  it('READY=1 once listening with /healthz 200, watchdog pings at half WATCHDOG_USEC, STOPPING=1 at SIGTERM', async () => {
    const dir = tmp();
    const socket = await bindNotifySocket(dir, python!);
    cleanup.add(() => socket.close());
    const relay = startServe(['--db', join(dir, 'ledger.db'), '--settle-every', '0'], { NOTIFY_SOCKET: socket.path, WATCHDOG_USEC: '400000' });
    cleanup.add(() => sigkillAndWait(relay.child));
    const url = await relay.ready;
    const ready = await socket.awaitKey('READY');
    expect(ready).toEqual([['READY', '1'], ['STATUS', `listening on ${url}`]]);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    await waitFor(() => socket.messages().filter((m) => valueOf(m, 'WATCHDOG') === '1').length >= 3, { what: 'three watchdog pings' });
    relay.child.kill('SIGTERM');
    expect(await closed(relay.child)).toBe(0);
    const last = socket.messages().at(-1)!;
    expect(valueOf(last, 'STOPPING')).toBe('1');
    // Nothing said it was not ready: it was ready at its first look.
    expect(socket.messages().filter((m) => valueOf(m, 'STATUS')?.startsWith('not ready'))).toEqual([]);
  });

  it.skipIf(!clusters)('PostgreSQL without the synchronous standby --require-sync-standby needs: not ready while /healthz is 503; ready, without a restart, once the standby is synchronous', async () => {
    const cluster = await startPrimaryWithAsyncStandby();
    cleanup.add(() => cluster.stop());
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const socket = await bindNotifySocket(tmp(), python!);
    cleanup.add(() => socket.close());
    const db = `postgres://postgres@127.0.0.1:${cluster.primaryPort}/postgres`;
    const relay = startServe(['--db', db, '--account-url', sim.url, '--require-sync-standby'], { NOTIFY_SOCKET: socket.path });
    cleanup.add(() => sigkillAndWait(relay.child));
    const url = await relay.ready;

    const status = await socket.awaitKey('STATUS');
    expect(valueOf(status, 'STATUS')).toMatch(/^not ready \(\/healthz would say 503\): .*synchronous standby/);
    const healthz = await fetch(`${url}/healthz`);
    expect(healthz.status).toBe(503);
    expect(socket.messages().filter((m) => valueOf(m, 'READY') !== undefined)).toEqual([]);

    await onServer(cluster.primaryPort, async (c) => {
      await c.query("ALTER SYSTEM SET synchronous_standby_names = '*'");
      await c.query('SELECT pg_reload_conf()');
    });
    const ready = await socket.awaitKey('READY', { timeoutMs: 30_000 });
    expect(valueOf(ready, 'STATUS')).toBe(`listening on ${url}`);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    // Every message before READY=1 was a STATUS saying why it was not ready.
    const before = socket.messages().slice(0, socket.messages().indexOf(ready));
    expect(before.length).toBeGreaterThan(0);
    for (const m of before) expect(valueOf(m, 'STATUS')).toMatch(/^not ready/);
  }, 120_000);
});
