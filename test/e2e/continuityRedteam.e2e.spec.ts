import { execFileSync, spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { runToEnd } from '../support/children.js';
import { allApplied, httpRequest, replyCodes, transferBodies } from '../support/relayHarness.js';
import { BIN, closed, startServe } from '../support/serveProcess.js';
import { sigkillAndWait } from '../support/settle.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

/**
 * Red team of the SQLite continuity guard (CONTRACT.md v4 §9, "a restored directory is caught"): restores made the
 * way a hurried operator or a fault makes them, with real serve processes and the simulator. In each, transfers made
 * after the copy are applied by the (non-idempotent) account system and forgotten by the restored ledger; the channels
 * resend them. The promise: none is applied twice. Each test here is a way found to break it, and how it is caught now
 * (`it.fails`: a way still open, documented).
 */
describe('continuity red team: restores the guard lets through (real serve processes, the simulator)', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();


  async function setting() {
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const root = tmp();
    const data = join(root, 'data');
    const db = join(data, 'ledger.db');
    const state = join(root, 'state');
    const args = ['--db', db, '--account-url', sim.url, '--min-age', '8s', '--settle-every', '0'];
    return {
      sim, root, data, db, state,
      serve(dir = state, env: Record<string, string> = {}) {
        const s = startServe(args, { GUIDGATE_CONTINUITY_DIR: dir, ...env });
        cleanup.add(() => sigkillAndWait(s.child));
        return s;
      },
      run(command: string[], dir = state) {
        return runToEnd(spawn(process.execPath, [BIN, ...command, '--db', db], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GUIDGATE_CONTINUITY_DIR: dir } }));
      },
    };
  }
  const stopped = async (s: ReturnType<typeof startServe>) => {
    s.child.kill('SIGTERM');
    expect(await closed(s.child)).toBe(0);
  };
  const copyOf = (dir: string): string => {
    const copy = join(tmp(), 'backup');
    execFileSync('cp', ['-a', dir, copy]);
    return copy;
  };
  const putBack = (copy: string, dir: string) => {
    rmSync(dir, { recursive: true, force: true });
    execFileSync('cp', ['-a', copy, dir]);
  };
  /**
   * 3 transfers applied, serve stopped, `what` copied (the data directory unless said), then 5 more applied and serve
   * stopped again: `after`, what the copy forgot.
   */
  async function copyThenApply(s: Awaited<ReturnType<typeof setting>>, what = s.data, env: Record<string, string> = {}): Promise<{ copy: string; after: string[] }> {
    const first = s.serve(s.state, env);
    await allApplied(await first.ready, transferBodies(3));
    await stopped(first);
    const copy = copyOf(what);
    const second = s.serve(s.state, env);
    const after = transferBodies(5);
    await allApplied(await second.ready, after);
    await stopped(second);
    return { copy, after };
  }

  it('serve started with another continuity folder that holds an older mark of this ledger (an earlier run as another user, or without the config): the restore is not seen; 0 of 5 applied twice', async () => {
    const s = await setting();
    const other = join(s.root, 'home-state');
    const early = s.serve(other);
    await allApplied(await early.ready, transferBodies(3));
    await stopped(early);
    // Then deployed with its own folder (the first start with it, after a clean stop: --trust, as the docs say).
    expect((await s.run(['restore', '--trust'])).code).toBe(0);
    const { copy, after } = await copyThenApply(s);

    putBack(copy, s.data);
    // The older mark names an event the copy holds, at its position: the copy is judged current.
    const third = s.serve(other);
    const resent = await replyCodes(await third.ready, after);
    expect(s.sim.stats().doubleApplied).toEqual([]);
    expect(resent).toEqual(after.map(() => '0000'));
  });

  // The continuity folder put back with the data directory (one cp -a of both, as a snapshot of /var/lib does with the
  // shipped unit): the mark restored with the ledger agrees with it. Only another witness sees it: the account system's
  // journal, read at start with --journal-witness exclusive (CONTRACT.md §9, "the account system as witness").
  async function restoredWithItsMark(env: Record<string, string>) {
    const s = await setting();
    const { copy, after } = await copyThenApply(s, s.root, env);

    for (const d of ['data', 'state']) putBack(join(copy, d), join(s.root, d));
    const third = s.serve(s.state, env);
    const url = await third.ready;
    const stats = (await httpRequest(`${url}/v1/stats`, { method: 'GET' })).json();
    const resent = await replyCodes(url, after);
    return { s, third, after, stats, resent };
  }

  it('the continuity folder put back with the data directory, serve with --journal-witness exclusive: the journal shows the 5 GUIDs the ledger forgot, the window opens; 0 of 5 applied twice', async () => {
    const { s, third, after, stats, resent } = await restoredWithItsMark({ GUIDGATE_JOURNAL_WITNESS: 'exclusive' });
    expect(stats['continuity']).toMatchObject({ state: 'window', breaks: 1 });
    expect(String((stats['continuity'] as { lastBreak: { why: string } }).lastBreak.why)).toMatch(/journal shows 5 posting GUID\(s\) the ledger does not know/);
    expect(third.output()).toMatch(/journal witness: exclusive .*: 5 posting GUID\(s\) the ledger does not know/);
    expect(third.output()).toMatch(/"unknownGuids":5,"firstUnknown":\["[^"]+"(,"[^"]+"){4}\]/);
    expect(third.output()).toMatch(/the ledger went back \(the account system's journal shows 5 posting GUID/);
    expect(s.sim.stats().doubleApplied).toEqual([]);
    expect(resent).toEqual(after.map(() => '0000'));
  });

  // Without the witness the restore is a known residual risk, documented (docs/deploying.md's table): the mark restored
  // with the ledger agrees with it. `it.fails`: this starts failing, as a reminder, the day it is caught without the journal.
  it.fails('the continuity folder put back with the data directory, serve without --journal-witness: not seen; 0 of 5 applied twice', async () => {
    const { s, after, resent } = await restoredWithItsMark({});
    expect(s.sim.stats().doubleApplied).toEqual([]);
    expect(resent).toEqual(after.map(() => '0000'));
  });

  it('guidgate restore --trust on a ledger it judges behind its mark: refused, nothing written; serve opens the window; 0 of 5 applied twice', async () => {
    const s = await setting();
    const { copy, after } = await copyThenApply(s);

    putBack(copy, s.data);
    const trust = await s.run(['restore', '--trust']);
    expect(trust.code).toBe(1);
    expect(trust.stderr).toMatch(/refused, nothing written: .*judged gone back \(the ledger is behind its continuity mark/);
    expect(trust.stderr).toMatch(/sent again without an inquiry/);
    expect(trust.stderr).toMatch(/without --trust/);
    const third = s.serve();
    const resent = await replyCodes(await third.ready, after);
    expect(s.sim.stats().doubleApplied).toEqual([]);
    expect(resent).toEqual(after.map(() => '0000'));
  });

  it('a row FAILED by a refused connection in the copy, sent and applied after it: resent without an inquiry inside the window; 0 of 3 applied twice', async () => {
    const s = await setting();
    const first = s.serve();
    const url1 = await first.ready;
    const refused = transferBodies(3);
    s.sim.setFaults({ refuseForMs: 1500 });
    expect(new Set(await replyCodes(url1, refused))).toEqual(new Set(['E902']));
    await stopped(first);
    const copy = copyOf(s.data);
    await waitFor(() => fetch(`${s.sim.url}/stats`).then(() => true, () => false), { intervalMs: 100, timeoutMs: 10_000, what: 'the simulator listening again' });
    const second = s.serve();
    await allApplied(await second.ready, refused);
    await stopped(second);

    putBack(copy, s.data);
    const third = s.serve();
    const url3 = await third.ready;
    const resent = await replyCodes(url3, refused);
    const stats = (await httpRequest(`${url3}/v1/stats`, { method: 'GET' })).json();
    // The going back is seen, the window open: the rows the ledger still has are not inquired about.
    expect(stats['continuity']).toMatchObject({ state: 'window', breaks: 1 });
    expect(s.sim.stats().doubleApplied).toEqual([]);
    expect(resent).toEqual(refused.map(() => '0000'));
  });

  it('serve started on a restored ledger with the clock 2 h behind (a resumed VM), then corrected: the window is gone at once; 0 of 5 applied twice', async () => {
    const s = await setting();
    const { copy, after } = await copyThenApply(s);

    putBack(copy, s.data);
    // The process's clock, 2 h behind while the flag file exists (NTP not yet synced), then stepped to the true time.
    const behind = join(s.root, 'clock-behind');
    const skew = join(s.root, 'skew.cjs');
    writeFileSync(behind, '');
    writeFileSync(skew, `const fs = require('fs'); const real = Date.now; Date.now = () => (fs.existsSync(${JSON.stringify(behind)}) ? real() - 7_200_000 : real());\n`);
    const third = s.serve(s.state, { NODE_OPTIONS: `--require ${skew}` });
    const url3 = await third.ready;
    expect((await httpRequest(`${url3}/v1/stats`, { method: 'GET' })).json()['continuity']).toMatchObject({ state: 'window', breaks: 1 });
    rmSync(behind);
    const resent = await replyCodes(url3, after);
    expect(s.sim.stats().doubleApplied).toEqual([]);
    expect(resent.every((c) => c === '0000' || c === 'E901')).toBe(true);
  });
});
