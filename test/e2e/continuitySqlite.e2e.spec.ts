import { copyFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { httpRequest, replyCodes, transfer, transferBodies } from '../support/relayHarness.js';
import { closed, startServe } from '../support/serveProcess.js';
import { sigkillAndWait } from '../support/settle.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

/**
 * CONTRACT.md §9, continuity on SQLite: a ledger file restored from an older copy has forgotten the claims made
 * after the copy, which the account system applied. The channels resend everything. With the guard, `serve` sees
 * the file behind the position it recorded beside it and inquires about every GUID the ledger does not know before
 * its first send: none is applied twice. With `--continuity-window 0` the same run applies them twice (the test
 * can fail).
 */
describe('continuity: a SQLite ledger restored from an older copy (real serve processes, the simulator)', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  const post = (url: string, body: string) => httpRequest(`${url}/v1/transfers`, { method: 'POST', body });

  async function run(window: string): Promise<{ sim: Simulator; url: string; restoredCodes: string[]; newBody: string; stop(): Promise<void> }> {
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const dir = tmp();
    const db = join(dir, 'l.db');
    const copy = join(dir, 'copy.db');
    const args = ['--db', db, '--account-url', sim.url, '--min-age', '8s', '--settle-every', '0', '--continuity-window', window];
    const spawn = () => {
      const s = startServe(args);
      cleanup.add(() => sigkillAndWait(s.child));
      return s;
    };

    const first = spawn();
    const url1 = await first.ready;
    const before = transferBodies(20);
    expect(new Set(await replyCodes(url1, before))).toEqual(new Set(['0000']));
    // The backup: a consistent copy taken while serve runs.
    const reader = new Database(db, { readonly: true });
    reader.prepare('VACUUM INTO ?').run(copy);
    reader.close();
    const after = transferBodies(20);
    expect(new Set(await replyCodes(url1, after))).toEqual(new Set(['0000']));
    first.child.kill('SIGTERM');
    expect(await closed(first.child)).toBe(0);

    // The restore: the older copy put back in place of the ledger.
    for (const f of [db, `${db}-wal`, `${db}-shm`]) rmSync(f, { force: true });
    copyFileSync(copy, db);

    const second = spawn();
    const url = await second.ready;
    const restoredCodes = await replyCodes(url, [...before, ...after]);
    return {
      sim, url, restoredCodes, newBody: JSON.stringify(transfer()),
      async stop() {
        second.child.kill('SIGTERM');
        expect(await closed(second.child)).toBe(0);
      },
    };
  }

  it('with the guard: every resend of a GUID the copy forgot is inquired about, found applied and answered DONE; 0 applied twice', async () => {
    const { sim, url, restoredCodes, newBody, stop } = await run('1h');
    expect(sim.stats().doubleApplied).toEqual([]);
    expect(sim.stats().totalApplied).toBe(40);
    // Each forgotten transfer is DONE with the account system's answer (the inquiry's), nothing sent.
    expect(restoredCodes).toEqual(Array.from({ length: 40 }, () => '0000'));
    expect(sim.stats().totalCalls).toBe(40);
    const stats = (await httpRequest(`${url}/v1/stats`, { method: 'GET' })).json();
    expect(stats['continuity']).toMatchObject({ state: 'window', breaks: 1 });
    const metrics = (await httpRequest(`${url}/metrics`, { method: 'GET' })).body;
    expect(metrics).toMatch(/^guidgate_ledger_continuity_breaks_total 1$/m);
    // A new GUID within --min-age of the going back: not sent (E901); once past it, the 404 is believed and it is sent.
    const early = await post(url, newBody);
    expect([early.status, early.json()['code']]).toEqual([504, 'E901']);
    expect(sim.stats().totalCalls).toBe(40);
    const done = await waitFor(async () => {
      const r = await post(url, newBody);
      return r.json()['code'] === '0000' ? r : null;
    }, { intervalMs: 200, timeoutMs: 20_000, what: 'the new GUID sent once --min-age after the going back has passed' });
    expect(done.status).toBe(200);
    expect(sim.stats().doubleApplied).toEqual([]);
    await stop();
  }, 60_000);

  it('with --continuity-window 0: the same resends are applied twice (what proves the test can fail)', async () => {
    const { sim, restoredCodes, stop } = await run('0');
    expect(restoredCodes).toEqual(Array.from({ length: 40 }, () => '0000'));
    expect(sim.stats().doubleApplied.length).toBe(20);
    await stop();
  }, 60_000);
});
