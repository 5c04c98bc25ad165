import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { runToEnd } from '../support/children.js';
import { allApplied, httpRequest, replyCodes, transfer, transferBodies } from '../support/relayHarness.js';
import { BIN, closed, startServe } from '../support/serveProcess.js';
import { sigkillAndWait } from '../support/settle.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';
import { sleep, waitFor } from '../support/waitFor.js';

/**
 * CONTRACT.md v4 §9, "a restored directory is caught" (SQLite): operators put back the whole data directory (`cp -a`,
 * `tar`, `rsync`, a snapshot), with the relay stopped or running, and may run a command on the copy before `serve`.
 * Transfers made after the copy are applied by the (non-idempotent) account system and forgotten by the restored
 * ledger; the channels resend them. None may be applied twice: each resend is inquired about and answered with the
 * account system's answer. The continuity mark lives outside the data directory (GUIDGATE_CONTINUITY_DIR, which a
 * guidgate without the folder ignores: on one that keeps its mark beside the ledger, each of these applies them twice).
 */
describe('continuity: a restored SQLite data directory is caught (real serve processes, the simulator)', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  const post = (url: string, body: string) => httpRequest(`${url}/v1/transfers`, { method: 'POST', body });

  async function setting(): Promise<{ sim: Simulator; data: string; db: string; env: Record<string, string>; spawnServe(): ReturnType<typeof startServe> }> {
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const root = tmp();
    const data = join(root, 'data');
    const db = join(data, 'ledger.db');
    const env = { GUIDGATE_CONTINUITY_DIR: join(root, 'state') };
    const args = ['--db', db, '--account-url', sim.url, '--min-age', '8s', '--settle-every', '0'];
    return {
      sim, data, db, env,
      spawnServe() {
        const s = startServe(args, env);
        cleanup.add(() => sigkillAndWait(s.child));
        return s;
      },
    };
  }

  const stopped = async (s: ReturnType<typeof startServe>) => {
    s.child.kill('SIGTERM');
    expect(await closed(s.child)).toBe(0);
  };

  /** 20 transfers applied, the data directory copied with cp -a while serve runs, 20 more applied after the copy. */
  async function copiedWhileRunning(s: Awaited<ReturnType<typeof setting>>) {
    const first = s.spawnServe();
    const url1 = await first.ready;
    const before = transferBodies(20);
    await allApplied(url1, before);
    const copy = join(tmp(), 'backup');
    execFileSync('cp', ['-a', s.data, copy]);
    const after = transferBodies(20);
    await allApplied(url1, after);
    return { first, url1, before, copy, after };
  }

  /** The restored relay: every GUID resent, none applied twice, the forgotten ones answered by inquiry (0000). */
  async function expectResendsSafe(sim: Simulator, url: string, all: readonly string[], applied: number, answers = all.map(() => '0000')): Promise<void> {
    const resent = await replyCodes(url, all);
    expect(sim.stats().doubleApplied).toEqual([]);
    expect(sim.stats().totalApplied).toBe(applied);
    expect(resent).toEqual(answers);
    const stats = (await httpRequest(`${url}/v1/stats`, { method: 'GET' })).json();
    expect(stats['continuity']).toMatchObject({ state: 'window', breaks: 1 });
  }

  it('the whole directory copied with cp -a while serve ran, put back with serve stopped: the going back is seen; 0 of 20 applied twice', async () => {
    const s = await setting();
    const { first, before, copy, after } = await copiedWhileRunning(s);
    await stopped(first);

    rmSync(s.data, { recursive: true, force: true });
    execFileSync('cp', ['-a', copy, s.data]);

    const second = s.spawnServe();
    await expectResendsSafe(s.sim, await second.ready, [...before, ...after], 40);
    expect(second.output()).toMatch(/the ledger went back \(the ledger('s history| is behind)/);
    await stopped(second);
  }, 60_000);

  it('the directory put back under a running serve by renaming its files into place (rsync): E503 until restarted, then judged against the mark; 0 of 20 applied twice', async () => {
    const s = await setting();
    const { first, url1, before, copy, after } = await copiedWhileRunning(s);
    // A restore comes well after the last transfer: at least one of the guard's checks (every 1 s, not observable from
    // outside) has recorded the standing in between, as in any real restore.
    await sleep(1500);

    // rsync's way: each file written to a temporary name beside it, then renamed over the one in place.
    for (const f of readdirSync(copy)) {
      copyFileSync(join(copy, f), join(s.data, `.${f}.tmp`));
      renameSync(join(s.data, `.${f}.tmp`), join(s.data, f));
    }
    await waitFor(async () => (await post(url1, JSON.stringify(transfer()))).json()['code'] === 'E503', { intervalMs: 100, timeoutMs: 10_000, what: 'the running serve noticing its file replaced' });
    await stopped(first);
    expect(existsSync(s.db)).toBe(true);

    const second = s.spawnServe();
    await expectResendsSafe(s.sim, await second.ready, [...before, ...after], 40);
    await stopped(second);
  }, 60_000);

  it('the file alone put back, then guidgate purge before serve: purge refuses (exit 1, nothing written); run as another user it writes, and serve still sees the going back by history; 0 of 10 applied twice', async () => {
    const s = await setting();
    const first = s.spawnServe();
    const url1 = await first.ready;
    // More transfers in the copy than after it: its purge alone would bring the log's count back up to the mark.
    const before = transferBodies(30);
    await allApplied(url1, before);
    const copy = join(tmp(), 'copy.db');
    const reader = new Database(s.db, { readonly: true });
    reader.prepare('VACUUM INTO ?').run(copy);
    reader.close();
    const after = transferBodies(10);
    await allApplied(url1, after);
    await stopped(first);

    for (const f of [s.db, `${s.db}-wal`, `${s.db}-shm`]) rmSync(f, { force: true });
    copyFileSync(copy, s.db);

    const purge = (env: Record<string, string>) =>
      runToEnd(spawn(process.execPath, [BIN, 'purge', '--db', s.db, '--retention', '0s'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } }));
    const refused = await purge(s.env);
    expect(refused.stderr).toMatch(/the ledger at .* went back: .*Nothing written[\s\S]*guidgate restore --db/);
    expect(refused.code).toBe(1);
    // The same purge as another user (another home, no mark there): it cannot judge and writes; its 30 Purged events
    // bring the log's count back up to the mark. serve still sees the going back: at the marked position the log has
    // another event than the one the mark names.
    const elsewhere = await purge({ GUIDGATE_CONTINUITY_DIR: join(tmp(), 'another-home-state') });
    expect([elsewhere.code, elsewhere.stdout]).toEqual([0, expect.stringMatching(/purged=30/)]);

    const second = s.spawnServe();
    // The purged ones answer E905 (a tombstone); the forgotten ones 0000 by inquiry.
    await expectResendsSafe(s.sim, await second.ready, [...before, ...after], 40, [...before.map(() => 'E905'), ...after.map(() => '0000')]);
    expect(second.output()).toMatch(/the ledger's history is not the one its continuity mark recorded/);
    await stopped(second);
    // Once serve has handled it, the command runs again.
    expect((await purge(s.env)).code).toBe(0);
  }, 60_000);
});
