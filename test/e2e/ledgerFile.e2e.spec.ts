import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, linkSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { childScript, runToEnd, waitForLine } from '../support/children.js';
import { httpRequest, transfer, type HttpReply } from '../support/relayHarness.js';
import { BIN, closed, exited, startServe } from '../support/serveProcess.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { sigkillAndWait } from '../support/settle.js';
import { waitFor } from '../support/waitFor.js';
import { orThrow } from '../../src/events/storeResult.js';

const LOST = /ledger file .* was deleted or replaced/;

describe('the ledger file under a running serve process', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const useSim = async () => cleanup.use(await startSimulator({ port: 0 }));
  const spawnServe = (args: string[]) => {
    const s = startServe(args);
    cleanup.add(() => sigkillAndWait(s.child));
    return s;
  };
  /** SIGTERM; resolves once the process has exited 0 and all it printed has been read. */
  const stop = async (child: ChildProcess) => {
    child.kill('SIGTERM');
    expect(await closed(child)).toBe(0);
  };
  const post = (url: string, body: string): Promise<HttpReply> => httpRequest(`${url}/v1/transfers`, { method: 'POST', body });
  /** A consistent copy of a live ledger, as an operator's backup would be. */
  const backup = async (db: string, to: string) => {
    const live = new Database(db, { readonly: true });
    await live.backup(to);
    live.close();
  };

  /**
   * Three transfers go through; then `lose` takes the file away; every new transfer is E503 with no call,
   * /healthz is 503 with the reason, the reason is logged once. `restore` puts the old file back; after a
   * restart every GUID is sent again: the first three are replays and each GUID reached the account system
   * once (without the check, the transfers accepted after the loss were missing from the file put back, and
   * their resends were applied a second time).
   */
  async function loseAndRestore(lose: (db: string) => Promise<void>, restore: (db: string) => void) {
    const sim = await useSim();
    const db = join(tmp(), 'ledger.db');
    const args = ['--db', db, '--account-url', sim.url, '--busy-timeout', '1s'];
    const first = spawnServe(args);
    const url = await first.ready;
    const before = Array.from({ length: 3 }, () => JSON.stringify(transfer()));
    for (const t of before) expect((await post(url, t)).json()['code']).toBe('0000');
    expect((await httpRequest(`${url}/healthz`, { method: 'GET' })).status).toBe(200);

    await lose(db);
    const after = Array.from({ length: 3 }, () => JSON.stringify(transfer()));
    for (const t of after) {
      const r = await post(url, t);
      expect([r.status, r.json()['code']]).toEqual([503, 'E503']);
    }
    const health = await httpRequest(`${url}/healthz`, { method: 'GET' });
    expect(health.status).toBe(503);
    // Whichever saw it first: the file check, or the sync of a commit answered before its WAL sync (an outcome)
    // finding the WAL it syncs deleted.
    expect(health.json()).toMatchObject({ code: 'E503', reason: expect.stringMatching(new RegExp(`${LOST.source}|ledger sync failed: .*-wal was deleted while the ledger had it open`)) });
    // More traffic, each request checking the file again: the reason is logged once (counted in all the
    // process printed, once it has exited).
    expect((await post(url, after[0]!)).json()['code']).toBe('E503');
    expect((await httpRequest(`${url}/healthz`, { method: 'GET' })).status).toBe(503);
    expect(sim.stats().totalCalls).toBe(3);
    // The file watch logs the loss (it checks about once a second), even when a failed WAL sync found it first.
    await waitFor(() => /ledger file lost/.test(first.output()), { what: 'the loss logged' });
    await stop(first.child);
    expect(first.output().match(/ledger file lost/g)).toHaveLength(1);
    expect(first.output()).toMatch(LOST);

    restore(db);
    const second = spawnServe(args);
    const url2 = await second.ready;
    for (const t of before) {
      const r = await post(url2, t);
      expect([r.json()['code'], r.headers['idempotent-replayed']]).toEqual(['0000', 'true']);
    }
    for (const t of after) expect((await post(url2, t)).json()['code']).toBe('0000');
    const stats = sim.stats();
    expect(stats.doubleApplied).toEqual([]);
    for (const t of [...before, ...after]) expect(sim.guidStats(String(JSON.parse(t).guid)).calls).toBe(1);
    await stop(second.child);
  }

  it('deleted (with its -wal and -shm): E503 and 503 from then on, no call, logged once; restored from a backup, no GUID is applied twice', async () => {
    await loseAndRestore(
      async (db) => {
        await backup(db, `${db}.bak`);
        for (const f of [db, `${db}-wal`, `${db}-shm`]) rmSync(f);
      },
      (db) => renameSync(`${db}.bak`, db),
    );
  }, 60_000);

  it('replaced by another file (an older copy moved over it): E503 and 503, no call, logged once; the old file put back, no GUID is applied twice', async () => {
    await loseAndRestore(
      async (db) => {
        await backup(db, `${db}.older`);
        linkSync(db, `${db}.orig`);
        renameSync(`${db}.older`, db);
      },
      // The -wal beside the path is still the original's: the original goes back beside it.
      (db) => renameSync(`${db}.orig`, db),
    );
  }, 60_000);

  it('a write lock held by another process past the claim\'s deadline (the send window, half of --grace): E503, 503, no call, nothing written; after release the resend goes out once', async () => {
    const sim = await useSim();
    const db = join(tmp(), 'ledger.db');
    const s = spawnServe(['--db', db, '--account-url', sim.url, '--busy-timeout', '1s', '--timeout', '1s', '--grace', '500ms']);
    const url = await s.ready;
    expect((await post(url, JSON.stringify(transfer()))).json()['code']).toBe('0000');

    const holder = spawn(process.execPath, [childScript('lockHolder'), db], { stdio: ['pipe', 'pipe', 'pipe'] });
    cleanup.add(() => sigkillAndWait(holder));
    await waitForLine(holder, 'locked');
    const t = JSON.stringify(transfer());
    const guid = String(JSON.parse(t).guid);
    const r = await post(url, t);
    expect([r.status, r.json()['code']]).toEqual([503, 'E503']);
    const health = await httpRequest(`${url}/healthz`, { method: 'GET' });
    expect([health.status, health.json()['code']]).toEqual([503, 'E503']);
    expect(String(health.json()['reason'])).toMatch(/locked|did not complete/);
    expect(sim.guidStats(guid).calls).toBe(0);

    holder.stdin!.end('release\n');
    expect(await exited(holder)).toBe(0);
    // A claim behind a held lock fails with nothing written (#24), then or later: no row, so the resend is a
    // first send, called once.
    const row = await httpRequest(`${url}/v1/transfers/${guid}`, { method: 'GET' });
    expect([row.status, row.json()['code']]).toEqual([404, 'E404']);
    await waitFor(async () => (await httpRequest(`${url}/healthz`, { method: 'GET' })).status === 200, { what: '/healthz 200 once the lock is gone' });

    const resend = await post(url, t);
    expect(resend.json()['code']).toBe('0000');
    expect(sim.guidStats(guid)).toMatchObject({ calls: 1, applied: 1 });
    expect(sim.stats().doubleApplied).toEqual([]);
    await stop(s.child);
  }, 60_000);
});

describe('files that are not a guidgate ledger, given as --db', () => {
  const tmp = useTempDir();
  const refused = async (make: (path: string) => void, reason: RegExp) => {
    const path = join(tmp(), 'x.db');
    make(path);
    const bytes = readFileSync(path);
    // Killed after 20 s if it starts after all (the refusal is what is tested), so no process outlives the test.
    const r = await runToEnd(spawn(process.execPath, [BIN, 'serve', '--port', '0', '--db', path], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 20_000 }));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(reason);
    expect(r.stdout).not.toMatch(/listening/);
    expect(readFileSync(path).equals(bytes)).toBe(true);
  };

  it('a non-SQLite file: serve exits 1 with the reason; the file is unchanged', async () => {
    await refused((p) => writeFileSync(p, '{"accounts":[1,2,3]}\n'.repeat(300)), /not a guidgate ledger: not an SQLite database/);
  }, 30_000);

  it('an SQLite file of another program: serve exits 1 with the reason; the file is unchanged (no migration, no WAL)', async () => {
    await refused((p) => {
      const other = new Database(p);
      other.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('a'), ('b')");
      other.close();
    }, /not a guidgate ledger: schema version 0 with tables of something else \(customers\)/);
  }, 30_000);
});

describe('guidgate check', () => {
  const tmp = useTempDir();
  const check = (db: string, ...extra: string[]) => runToEnd(spawn(process.execPath, [BIN, 'check', '--db', db, ...extra], { stdio: ['ignore', 'pipe', 'pipe'] }));

  it('a sound ledger: exit 0; a copy with bytes flipped in its pages: exit 1 naming what SQLite found; no ledger: exit 1', async () => {
    const db = join(tmp(), 'ledger.db');
    const store = openLedger(db, { synchronous: 'NORMAL' });
    await Promise.all(Array.from({ length: 2000 }, (_, i) =>
      orThrow(store.execute(`G-${i}`, { type: 'Submit', request: `{"guid":"G-${i}","from":"ACC-1","to":"ACC-2","amount":${i + 1}}`, fingerprint: `f${i}`, timeoutMs: 1000, maxAttempts: 3 }))));
    await store.close();

    const good = await check(db);
    expect([good.code, good.stdout]).toEqual([0, expect.stringMatching(/^ok: .* is a sound guidgate ledger \(quick_check \d+ ms\)/)]);

    const bytes = readFileSync(db);
    const pageSize = bytes.readUInt16BE(16);
    const middle = Math.floor(bytes.length / pageSize / 2);
    expect(middle).toBeGreaterThan(10);
    const corrupted = async (name: string, flip: (b: Buffer, pageStart: number) => void) => {
      const copy = Buffer.from(bytes);
      for (const p of [middle, middle + 1]) flip(copy, p * pageSize);
      const path = join(tmp(), name);
      writeFileSync(path, copy);
      const r = await check(path, '--json');
      return { code: r.code, report: JSON.parse(r.stdout) as { ok: boolean; problems: string[] } };
    };
    // Bytes in the cell area of two pages: quick_check lists what it found in the tree, or SQLite refuses the
    // page outright (which of the two depends on what the bytes hit).
    const cells = await corrupted('cells.db', (b, at) => b.fill(0xa5, at + pageSize - 200, at + pageSize - 100));
    expect(cells).toMatchObject({ code: 1, report: { ok: false } });
    expect(cells.report.problems.join('\n')).toMatch(/Tree \d+ page \d+|malformed/);
    // The page headers: SQLite cannot read those pages: it refuses the file, or names each page it cannot
    // initialise (which of the two depends on which tree the middle pages belong to).
    const headers = await corrupted('headers.db', (b, at) => b.fill(0xa5, at, at + 16));
    expect(headers).toMatchObject({ code: 1, report: { ok: false } });
    expect(headers.report.problems.join('\n')).toMatch(/malformed|page \d+: btreeInitPage\(\) returns error code 11/);

    const missing = await check(join(tmp(), 'nope.db'));
    expect([missing.code, missing.stdout]).toEqual([1, expect.stringMatching(/no ledger at/)]);
  }, 60_000);

  it('serve --check refuses to start on a corrupted ledger and starts on a sound one', async () => {
    const db = join(tmp(), 'ledger.db');
    await openLedger(db).close();
    const sound = startServe(['--db', db, '--check']);
    const url = await sound.ready;
    expect(sound.output()).toMatch(/ledger check: .* is sound/);
    expect((await httpRequest(`${url}/healthz`, { method: 'GET' })).status).toBe(200);
    sound.child.kill('SIGTERM');
    expect(await exited(sound.child)).toBe(0);

    const bytes = readFileSync(db);
    const pageSize = bytes.readUInt16BE(16);
    bytes.fill(0xa5, pageSize * 2, pageSize * 2 + 16); // page 3: a table's root
    writeFileSync(db, bytes);
    const refused = await runToEnd(spawn(process.execPath, [BIN, 'serve', '--port', '0', '--db', db, '--check'], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 20_000 }));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/ledger check failed/);
  }, 60_000);
});
