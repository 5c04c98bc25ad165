/**
 * A full disk under a running `serve` (issue #24): every new transfer gets E503, and /healthz must say so, since a
 * load balancer routes on it. Real file systems (a tmpfs of a few megabytes, filled by a file and freed again),
 * a real `serve` process, a real simulator; on PostgreSQL a tablespace on such a tmpfs holds the test database.
 */
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { PG_ADMIN_URL, postgresForTests } from '../support/pg.js';
import { onServer, serverUrl, startServer } from '../support/pgCluster.js';
import { httpRequest, transfer, type HttpReply } from '../support/relayHarness.js';
import { startServe } from '../support/serveProcess.js';
import { sigkillAndWait } from '../support/settle.js';
import { mountSmallDisk, type SmallDisk } from '../support/smallDisk.js';
import { waitFor } from '../support/waitFor.js';
import { useCleanup } from '../support/cleanup.js';

const canMount = (() => {
  const probe = mountSmallDisk('1m');
  probe?.remove();
  return probe !== null;
})();
const { available: pgAvailable } = await postgresForTests();
/** The uid of the PostgreSQL server's user when the test server runs on this host (a tablespace must be local to it), else null. */
const localPostgresUid = (() => {
  if (!pgAvailable || !['127.0.0.1', 'localhost', '[::1]'].includes(new URL(PG_ADMIN_URL).hostname)) return null;
  try {
    return Number(execFileSync('id', ['-u', 'postgres'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim());
  } catch {
    return null;
  }
})();

describe.skipIf(!canMount)('a full disk under serve: E503 for transfers, and /healthz 503 with the reason; both recover once space is freed', () => {
  const cleanup = useCleanup();

  const post = (url: string, body: string): Promise<HttpReply> => httpRequest(`${url}/v1/transfers`, { method: 'POST', body });
  const health = (url: string) => httpRequest(`${url}/healthz`, { method: 'GET' });
  const disk = (size: string, uid?: number): SmallDisk => {
    const d = mountSmallDisk(size, uid === undefined ? {} : { uid })!;
    cleanup.add(() => d.remove());
    return d;
  };
  const relay = async (db: string, accountUrl: string) => {
    const s = startServe(['--db', db, '--account-url', accountUrl, '--busy-timeout', '1s', '--timeout', '1s', '--settle-every', '0']);
    cleanup.add(() => sigkillAndWait(s.child));
    return s.ready;
  };
  const sim = async () => {
    const s = await startSimulator({ port: 0 });
    cleanup.add(() => s.close());
    return s;
  };

  it('SQLite: the ledger on a 2 MB file system; filled while serve runs, /healthz turns 503 (no transfer needed to notice), a transfer gets E503 and is not sent; freed, both recover', async () => {
    const d = disk('2m');
    const account = await sim();
    const db = join(d.path, 'ledger.db');
    const url = await relay(db, account.url);
    expect((await post(url, JSON.stringify(transfer()))).json()['code']).toBe('0000');
    expect((await health(url)).status).toBe(200);
    // The transfer's request record is written just after its reply: on disk before the fill, so that it is not the
    // write that meets the full disk.
    await waitFor(() => {
      const reader = new Database(db, { readonly: true });
      try {
        return (reader.prepare('SELECT COUNT(*) AS n FROM requests').get() as { n: number }).n === 1;
      } finally {
        reader.close();
      }
    }, { what: 'the request record written' });
    // The WAL emptied into the file and cut to nothing first. Once a checkpoint has copied all of it (serve's
    // background one, every 250 ms), SQLite starts the WAL over at its beginning, inside the space the file already
    // has: a write then needs no new space, and neither the probe nor a transfer would meet the full disk.
    const emptier = new Database(db);
    try {
      await waitFor(() => (emptier.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>)[0]?.busy === 0, { what: 'the WAL cut to nothing' });
    } finally {
      emptier.close();
    }

    d.fill();
    // Before any transfer meets the full disk: the probe writes, so it meets it too.
    const down = await waitFor(async () => {
      const r = await health(url);
      return r.status === 503 ? r : null;
    }, { what: '/healthz 503 on a full disk' });
    expect(down.json()).toMatchObject({ code: 'E503', reason: expect.stringMatching(/full/) });
    const t = JSON.stringify(transfer());
    const refused = await post(url, t);
    expect([refused.status, refused.json()['code']]).toEqual([503, 'E503']);
    expect(account.guidStats(String(JSON.parse(t).guid)).calls).toBe(0);
    expect((await health(url)).status).toBe(503);

    d.free();
    await waitFor(async () => (await health(url)).status === 200, { what: '/healthz 200 once space is free' });
    expect((await post(url, t)).json()['code']).toBe('0000');
    expect(account.guidStats(String(JSON.parse(t).guid)).calls).toBe(1);
    expect(account.stats().doubleApplied).toEqual([]);
  }, 60_000);

  it.skipIf(localPostgresUid === null)('PostgreSQL: the database in a tablespace on a 16 MB file system; filled, a transfer that gets E503 is followed by /healthz 503 with the reason (its ping writes nothing); freed, both recover', async () => {
    const d = disk('16m', localPostgresUid!);
    // A server of its own: a full tablespace fails every checkpoint of its server (a DROP DATABASE of another
    // test file on the shared server then fails with "checkpoint request failed").
    const server = await startServer();
    cleanup.add(() => server.stop());
    const suffix = randomBytes(5).toString('hex');
    const [space, name] = [`guidgate_full_${suffix}`, `guidgate_test_full_${suffix}`];
    await onServer(server.port, (c) => c.query(`CREATE TABLESPACE ${space} LOCATION '${d.path}'`));
    await onServer(server.port, (c) => c.query(`CREATE DATABASE ${name} TABLESPACE ${space}`));
    cleanup.add(() => d.free());
    const db = serverUrl(server.port, name);
    const account = await sim();
    const url = await relay(db, account.url);
    expect((await post(url, JSON.stringify(transfer()))).json()['code']).toBe('0000');
    expect((await health(url)).status).toBe(200);

    d.fill();
    // Claims may still fit pages with room left for a while; once one needs new space it gets E503, and the
    // /healthz asked right after it (within the second a failed write stands) says so.
    const refused = await waitFor(async () => {
      const t = JSON.stringify(transfer());
      const r = await post(url, t);
      if (r.json()['code'] !== 'E503') return null;
      const after = await health(url);
      return after.status === 503 ? { guid: String(JSON.parse(t).guid), health: after } : null;
    }, { what: 'a transfer refused with E503 on a full disk, and /healthz 503 right after it', intervalMs: 0 });
    expect(account.guidStats(refused.guid).calls).toBe(0);
    expect(refused.health.json()).toMatchObject({ code: 'E503', reason: expect.stringMatching(/53100|No space left/) });

    d.free();
    await waitFor(async () => (await post(url, JSON.stringify(transfer()))).json()['code'] === '0000', { what: 'transfers recover once space is free' });
    expect((await health(url)).status).toBe(200);
    expect(account.stats().doubleApplied).toEqual([]);
  }, 60_000);
});
