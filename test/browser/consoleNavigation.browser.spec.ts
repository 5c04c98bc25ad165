import { spawn } from 'node:child_process';
import { mkdirSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { chromiumForTests, closeConsoleTest, openConsolePage } from '../support/browser.js';
import { runToEnd } from '../support/children.js';
import { httpRequest } from '../support/relayHarness.js';
import { BIN, startServe } from '../support/serveProcess.js';
import { noConnectionLeft } from '../support/tcpStates.js';
import { useTempDir } from '../support/tmp.js';

/**
 * The console as an operator moves through it, in Chromium against a real `serve` process (no keys, loopback), a
 * real simulator and a real ledger file: a GUID opened from the rows, or from the page's address, is scrolled into
 * view; a dead letter's advice is a command that runs when pasted; counts read as English; money in major units.
 */
const { available } = chromiumForTests();

describe.skipIf(!available)('the console in Chromium: opening a transfer, a dead letter\'s advice, counts and money', () => {
  const tmp = useTempDir('file');
  let sim: Simulator;
  let relay: ReturnType<typeof startServe>;
  let url: string;
  let browser: Browser;
  let page: Page;
  let db: string;
  const pageErrors: string[] = [];
  const run = Date.now().toString(36);
  /** Enough rows that the transfer's section lies screens below the rows table. */
  const done = Array.from({ length: 40 }, (_, i) => `ok-${run}-${String(i).padStart(2, '0')}`);
  /** Sent while the account system refused connections, at a cap of one attempt: a dead letter. */
  const dead = `dead-${run}`;

  const post = (guid: string) =>
    httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify({ guid, from: '6222021001', to: '6222021002', amount: 1500, currency: 'CNY' }) });
  const rowOf = async (guid: string) => (await httpRequest(`${url}/v1/transfers/${guid}`, { method: 'GET' })).json();

  beforeAll(async () => {
    sim = await startSimulator({ port: 0 });
    db = join(tmp(), 'ledger.db');
    relay = startServe(['--db', db, '--account-url', sim.url, '--max-attempts', '1', '--settle-every', '0', '--min-age', '0s', '--timeout', '2s']);
    url = await relay.ready;
    for (const guid of done) expect((await post(guid)).json()['code']).toBe('0000');
    // The last call failed (refused): the breaker has one failure in a row.
    const refusing = sim.refuseConnections(1500);
    await noConnectionLeft(relay.child.pid!, sim.port);
    expect((await post(dead)).json()['code']).toBe('E902');
    await refusing;
    expect(await rowOf(dead)).toMatchObject({ status: 'FAILED', attempts: 1 });

    ({ browser, page } = await openConsolePage(pageErrors));
  }, 60_000);

  afterAll(() => closeConsoleTest({ browser, errors: pageErrors, relay, sim }));

  /** Signs in (the relay runs without keys: an empty token) and waits for the session to be ready. */
  const signIn = async (p: Page) => {
    await p.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => p.locator('#session').textContent()).toBe('No token: the relay runs without keys.');
  };
  /** Where an element's box lies against the viewport: whether any of it is visible without scrolling. */
  const placeOf = (p: Page, selector: string) =>
    p.evaluate(`(() => { const r = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect(); return { top: Math.round(r.top), inView: r.bottom > 0 && r.top < window.innerHeight, height: window.innerHeight }; })()`) as Promise<{ top: number; inView: boolean; height: number }>;

  it('counts read as English, one rule for all: "1 failed call", "1 FAILED row", "1 row"', async () => {
    await page.goto(`${url}/console/`);
    await signIn(page);
    await expect.poll(() => page.locator('#facts').textContent()).toContain('Breakerclosed (1 failed call in a row of 20 to open)');
    expect(await page.locator('#facts').textContent()).toContain('At the attempt cap1 FAILED row (');
    await page.getByRole('checkbox', { name: 'FAILED' }).check();
    await page.getByRole('button', { name: 'Show rows' }).click();
    await expect.poll(() => page.locator('#rows-status').textContent()).toBe('1 row (FAILED).');
    await page.getByRole('checkbox', { name: 'FAILED' }).uncheck();
    await page.getByRole('button', { name: 'Show rows' }).click();
    await expect.poll(() => page.locator('#rows-status').textContent()).toMatch(/^41 rows \(any status\)/);
  });

  it('a GUID clicked in the rows opens its timeline in view, with its amount in major units', async () => {
    // The transfer's section lies below the rows: out of view before the click.
    const before = await placeOf(page, '#transfer-title');
    expect(before.inView).toBe(false);
    expect(before.top).toBeGreaterThan(2 * before.height);
    const guid = done[3]!;
    await page.getByRole('table', { name: 'Ledger rows' }).getByRole('link', { name: guid }).click();
    const timeline = page.getByRole('table', { name: new RegExp(`^Timeline of ${guid}: \\d+ entries`) });
    await timeline.waitFor();
    await expect.poll(() => placeOf(page, '#timeline').then((p) => p.inView)).toBe(true);
    expect((await placeOf(page, '#transfer-title')).top).toBeGreaterThanOrEqual(0);
    // The focus follows, for whoever moves by keyboard.
    expect(await page.evaluate('document.activeElement.id')).toBe('transfer-title');
    expect(await page.locator('#row-facts').textContent()).toContain('Amount15.00 CNY');
  });

  it('/console/#guid=… opens that transfer in view once signed in', async () => {
    const tab = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    tab.on('pageerror', (err) => pageErrors.push(err.message));
    try {
      const guid = done[7]!;
      await tab.goto(`${url}/console/#guid=${guid}`);
      await signIn(tab);
      await tab.getByRole('table', { name: new RegExp(`^Timeline of ${guid}`) }).waitFor();
      await expect.poll(() => placeOf(tab, '#timeline').then((p) => p.inView)).toBe(true);
    } finally {
      await tab.close();
    }
  });

  it('a dead letter\'s advice is a command that runs when pasted: it names the ledger and the account system, and sends it again', async () => {
    await page.getByLabel('GUID').fill(dead);
    await page.getByRole('button', { name: 'Show timeline' }).click();
    await page.getByRole('table', { name: new RegExp(`^Timeline of ${dead}`) }).waitFor();
    const note = (await page.locator('#action-note').textContent())!;
    expect(note).toMatch(/^A dead letter: FAILED at the attempt cap \(1\)/);
    const command = /guidgate reprocess .*$/.exec(note)?.[0];
    expect(command, note).toBeDefined();
    // Pasted into a shell on the relay's host, `guidgate` on the PATH as the docs install it, nothing else set.
    const home = tmp();
    const bin = join(home, 'bin');
    mkdirSync(bin);
    symlinkSync(BIN, join(bin, 'guidgate'));
    const pasted = await runToEnd(spawn('sh', ['-c', command!], { cwd: home, env: { PATH: `${bin}:${dirname(process.execPath)}:/usr/bin:/bin`, HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] }));
    expect(pasted.code, `${pasted.stdout}${pasted.stderr}`).toBe(0);
    expect(pasted.stdout).toMatch(/^reprocess: candidates=1 done=1 /m);
    expect(command).toContain(`--db ${db}`);
    expect(command).toMatch(new RegExp(`--account-url ${sim.url} .*--max-attempts 2 ${dead}$`));
    expect(await rowOf(dead)).toMatchObject({ status: 'DONE', code: '0000', attempts: 2 });
  });
});
