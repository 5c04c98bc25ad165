import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { chromiumForTests, launchChromium, SCREENSHOTS } from '../support/browser.js';
import { runToEnd } from '../support/children.js';
import { httpRequest, makeKeys } from '../support/relayHarness.js';
import { BIN, exited, startServe } from '../support/serveProcess.js';
import { useTempDir } from '../support/tmp.js';

/**
 * The console in a real browser (Debian's Chromium, headless, driven by playwright-core) against a real
 * `serve` process with keys, a real simulator and a real ledger file. Elements are found by their label, role
 * and accessible name, as a screen reader finds them. The screenshots are the docs' (docs/operating.md, docs/auditing.md).
 */
const { available } = chromiumForTests();

describe.skipIf(!available)('the console in Chromium', () => {
  const tmp = useTempDir('file');
  let sim: Simulator;
  let relay: ReturnType<typeof startServe>;
  let url: string;
  let browser: Browser;
  let page: Page;
  let tokens: Record<string, string> = {};
  const pageErrors: string[] = [];
  const run = Date.now().toString(36);
  // Timed out (the account system answers after the relay's timeout), then settled by `guidgate resolve`.
  const settled = `late-${run}-settled`;
  // Timed out and left UNKNOWN (settling is off), for the filter and the console's own resolve.
  const unknown = [`late-${run}-u1`, `late-${run}-u2`];
  const done = [`ok-${run}-1`, `ok-${run}-2`, `ok-${run}-3`];
  const FROM = '6222021001';
  const NOTE = '<img src=x onerror="document.title=\'pwned\'">';

  const post = (guid: string, extra: Record<string, unknown> = {}) =>
    httpRequest(`${url}/v1/transfers`, {
      method: 'POST',
      body: JSON.stringify({ guid, from: FROM, to: '6222021002', amount: 1500, currency: 'CNY', ...extra }),
      headers: { authorization: `Bearer ${tokens['pay']!}` },
    });
  const rowStatus = async (guid: string) =>
    (await httpRequest(`${url}/v1/transfers/${guid}`, { method: 'GET', headers: { authorization: `Bearer ${tokens['ops']!}` } })).json()['status'];

  beforeAll(async () => {
    const dir = tmp();
    const keys = join(dir, 'keys');
    tokens = makeKeys(keys, { pay: ['transfer'], ops: ['read', 'admin'], auditor: ['read'] }).tokens;
    sim = await startSimulator({ port: 0, faults: { lateMs: 6000, byGuidPrefix: { [`late-${run}`]: 'late-answer' } } });
    const db = join(dir, 'ledger.db');
    relay = startServe(['--keys', keys, '--db', db, '--account-url', sim.url, '--timeout', '2s', '--settle-every', '0', '--min-age', '0s']);
    url = await relay.ready;

    // A transfer that timed out, was settled by inquiry, and whose resends got E901 and then the answer.
    expect((await post(settled, { note: NOTE })).json()['code']).toBe('E901');
    expect((await post(settled, { note: NOTE })).json()['code']).toBe('E901');
    const resolve = await runToEnd(spawn(process.execPath, [BIN, 'resolve', '--db', db, '--account-url', sim.url, '--min-age', '0s'], { stdio: ['ignore', 'pipe', 'pipe'] }));
    expect(resolve.code, resolve.stderr).toBe(0);
    expect((await post(settled, { note: NOTE })).json()['code']).toBe('0000');
    // Two left UNKNOWN, three done, one rejected (an account id starting with X does not exist).
    for (const r of await Promise.all(unknown.map((g) => post(g)))) expect(r.json()['code']).toBe('E901');
    for (const g of done) expect((await post(g)).json()['code']).toBe('0000');
    expect((await post(`bad-${run}`, { to: 'X-NOWHERE' })).json()['code']).toBe('B202');

    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    page.setDefaultTimeout(15_000);
    page.on('pageerror', (err) => pageErrors.push(err.message));
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    expect(pageErrors, 'errors thrown in the page').toEqual([]);
    if (relay !== undefined && relay.child.exitCode === null) {
      relay.child.kill('SIGTERM');
      await exited(relay.child);
    }
    await sim?.close();
  });

  const session = () => page.locator('#session');

  it('a wrong token is refused (nothing shown, nothing kept); a channel key without read is told it may not read', async () => {
    await page.goto(`${url}/console`);
    await expect.poll(() => session().textContent()).toBe('Enter a token to sign in.');
    // By keyboard: the page puts the focus in the Token field, with a visible focus ring; before it, the skip link.
    expect(await page.evaluate('[document.activeElement.id, getComputedStyle(document.activeElement).outlineStyle]')).toEqual(['token', 'solid']);
    await page.keyboard.press('Shift+Tab');
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Skip to content');
    await page.keyboard.press('Tab');
    await page.keyboard.type('gg_not-a-real-token');
    await page.keyboard.press('Enter');
    await expect.poll(() => session().textContent()).toMatch(/The token was refused \(E401\)/);
    expect(await page.getByRole('table', { name: 'Rows per status' }).locator('tbody tr').count()).toBe(0);
    expect(await page.evaluate('[sessionStorage.length, localStorage.length, document.cookie]')).toEqual([0, 0, '']);
    // A channel's key (transfer only) is known but may not read: said so, nothing shown.
    await page.getByLabel('Token').fill(tokens['pay']!);
    await page.getByLabel('Token').press('Enter');
    await expect.poll(() => session().textContent()).toMatch(/^Signed in, but this key may not read the ledger: E403: the key pay lacks the scope read/);
    expect(await page.getByRole('table', { name: 'Rows per status' }).locator('tbody tr').count()).toBe(0);
  });

  it('logs in with a token: the overview counts every status, the oldest UNKNOWN, the breaker, replies per code', async () => {
    await page.getByLabel('Token').fill(tokens['ops']!);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => session().textContent()).toMatch(/^Signed in/);
    const counts = page.getByRole('table', { name: 'Rows per status' });
    const count = (status: string) => counts.getByRole('row', { name: new RegExp(`^${status} `) }).locator('td').first().textContent();
    await expect.poll(() => count('DONE')).toBe('5');
    expect(await count('UNKNOWN')).toBe('2');
    expect(await count('FAILED')).toBe('0');
    const facts = await page.locator('#facts').textContent();
    expect(facts).toMatch(/Oldest UNKNOWN.*late-/);
    expect(facts).toMatch(/Breaker\s*closed/);
    const replies = page.getByRole('table', { name: /^Replies per code, last/ });
    expect(await replies.getByRole('row', { name: /^E901 / }).locator('td').textContent()).toBe('4');
    // The token is kept for this tab only.
    expect(await page.evaluate("[sessionStorage.getItem('guidgate.token') !== null, localStorage.length]")).toEqual([true, 0]);
    await page.screenshot({ path: join(SCREENSHOTS, 'console-overview.png') });
  });

  it('finds a GUID that timed out and was settled, and shows every step of its timeline', async () => {
    await page.getByLabel('GUID').fill(settled);
    await page.getByRole('button', { name: 'Show timeline' }).click();
    const timeline = page.getByRole('table', { name: new RegExp(`^Timeline of ${settled}`) });
    await timeline.waitFor();
    const steps = await timeline.locator('tbody th').allTextContents();
    const events = steps.filter((s) => s.includes('(event'));
    expect(events.map((s) => s.split(' ')[0])).toEqual(['Claimed', 'Sent', 'TimedOut', 'Resolved']);
    expect(events.map((s) => /seq (\d+)/.exec(s)?.[1])).toEqual(['0', '1', '2', '3']);
    // The channel's three requests (E901, E901 on the resend while UNKNOWN, then the answer), from the audit
    // trail's request records: between the events, by time.
    const requests = steps.filter((s) => s.startsWith('request answered'));
    expect(requests).toEqual(['request answered E901', 'request answered E901', 'request answered 0000']);
    const text = (await timeline.textContent())!;
    expect(text).toContain('"reason": "timeout"');
    expect(text).toContain('"source": "inquiry"');
    // The channel's extra field is shown as text, never as markup; account numbers are masked.
    expect(text).toContain(NOTE.replace(/"/g, '\\"'));
    expect(await page.locator('#timeline img').count()).toBe(0);
    expect(await page.title()).toBe('guidgate console');
    expect(await page.locator('body').textContent()).not.toContain(FROM);
    expect(await page.locator('#row-facts').textContent()).toMatch(/StatusDONE/);
    await timeline.screenshot({ path: join(SCREENSHOTS, 'console-timeline.png') });
  });

  it('filters the UNKNOWN rows', async () => {
    await page.getByRole('checkbox', { name: 'UNKNOWN' }).check();
    await page.getByRole('button', { name: 'Show rows' }).click();
    const rows = page.getByRole('table', { name: 'Ledger rows' });
    await expect.poll(() => page.locator('#rows-status').textContent()).toMatch(/^2 rows \(UNKNOWN\)/);
    expect((await rows.locator('tbody th').allTextContents()).sort()).toEqual([...unknown].sort());
    expect(await rows.locator('tbody td .badge').allTextContents()).toEqual(['UNKNOWN', 'UNKNOWN']);
    await page.locator('section', { has: rows }).screenshot({ path: join(SCREENSHOTS, 'console-rows.png') });
  });

  it('resolves one from the console: a dry run first (nothing changes), then on confirmation the ledger changes', async () => {
    const guid = unknown[0]!;
    await page.getByRole('table', { name: 'Ledger rows' }).getByRole('link', { name: guid }).click();
    await page.getByRole('table', { name: new RegExp(`^Timeline of ${guid}`) }).waitFor();
    await page.getByRole('button', { name: 'Preview resolve' }).click();
    const preview = page.locator('#preview');
    await preview.waitFor();
    await expect.poll(() => preview.textContent()).toMatch(/Status beforeUNKNOWN/);
    expect(await page.evaluate('document.activeElement.id')).toBe('preview');
    expect(await rowStatus(guid)).toBe('UNKNOWN');
    await page.locator('#transfer').screenshot({ path: join(SCREENSHOTS, 'console-preview.png') });

    await page.getByRole('button', { name: 'Confirm resolve' }).click();
    await expect.poll(() => page.locator('#action-status').textContent()).toMatch(new RegExp(`resolve of ${guid}: outcome processed, UNKNOWN \\(E901\\) → DONE \\(0000\\)`));
    expect(await rowStatus(guid)).toBe('DONE');
    const steps = await page.getByRole('table', { name: new RegExp(`^Timeline of ${guid}`) }).locator('tbody th').allTextContents();
    expect(steps.filter((s) => s.includes('(event')).map((s) => s.split(' ')[0])).toEqual(['Claimed', 'Sent', 'TimedOut', 'Resolved']);
    // The overview follows.
    const counts = page.getByRole('table', { name: 'Rows per status' });
    await expect.poll(() => counts.getByRole('row', { name: /^UNKNOWN / }).locator('td').first().textContent()).toBe('1');
  });

  it('a bad age is refused naming the field; a read-only key sees everything but may not act; signing out forgets the token', async () => {
    await page.getByLabel('Last change older than').fill('soon');
    await page.getByRole('button', { name: 'Show rows' }).click();
    await expect.poll(() => page.locator('#rows-status').textContent()).toMatch(/^E400: .*\(field: olderThan\)$/);
    expect(await page.evaluate('document.activeElement.id')).toBe('older-than');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await expect.poll(() => session().textContent()).toMatch(/^Signed out/);
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    expect(await page.getByRole('table', { name: 'Rows per status' }).locator('tbody tr').count()).toBe(0);

    await page.getByLabel('Token').fill(tokens['auditor']!);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => session().textContent()).toMatch(/^Signed in/);
    const guid = unknown[1]!;
    await page.getByLabel('GUID').fill(guid);
    await page.getByLabel('GUID').press('Enter');
    await page.getByRole('table', { name: new RegExp(`^Timeline of ${guid}`) }).waitFor();
    await page.getByRole('button', { name: 'Preview resolve' }).click();
    await expect.poll(() => page.locator('#action-status').textContent()).toMatch(/^E403: the key auditor lacks the scope admin/);
    expect(await page.locator('#preview').isHidden()).toBe(true);
    expect(await rowStatus(guid)).toBe('UNKNOWN');
  });

  it('pages the rows (here 2 a page, from ?rows=2): every row once, in GUID order', async () => {
    await page.goto(`${url}/console/?rows=2`);
    await expect.poll(() => session().textContent()).toMatch(/^Signed in/);
    const rows = page.getByRole('table', { name: 'Ledger rows' });
    await expect.poll(() => page.locator('#rows-status').textContent()).toBe('2 rows (any status); more on the next page.');
    const seen: string[] = [];
    for (;;) {
      seen.push(...(await rows.locator('tbody th').allTextContents()));
      if (await page.getByRole('button', { name: 'Next page' }).isDisabled()) break;
      const before = await rows.locator('tbody th').first().textContent();
      await page.getByRole('button', { name: 'Next page' }).click();
      await expect.poll(() => rows.locator('tbody th').first().textContent()).not.toBe(before);
    }
    expect(seen).toEqual([...done, settled, ...unknown, `bad-${run}`].sort());
    await page.getByRole('button', { name: 'First page' }).click();
    await expect.poll(() => rows.locator('tbody th').allTextContents()).toEqual(seen.slice(0, 2));
  });
});

describe.skipIf(!available)('the console in Chromium, relay without keys', () => {
  const tmp = useTempDir();
  it('needs no token: the overview loads at once', async () => {
    const relay = startServe(['--db', join(tmp(), 'ledger.db'), '--settle-every', '0']);
    const browser = await launchChromium();
    try {
      const url = await relay.ready;
      const page = await browser.newPage();
      await page.goto(`${url}/console/`);
      await expect.poll(() => page.locator('#session').textContent()).toBe('No token: the relay runs without keys.');
      expect(await page.getByRole('table', { name: 'Rows per status' }).locator('tbody tr').count()).toBe(6);
      expect(await page.locator('#rows-status').textContent()).toBe('0 rows (any status).');
    } finally {
      await browser.close();
      relay.child.kill('SIGTERM');
      await exited(relay.child);
    }
  });
});
