import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { chromiumForTests, closeConsoleTest, launchChromium, openConsolePage, SCREENSHOTS } from '../support/browser.js';
import { runToEnd } from '../support/children.js';
import { httpRequest, makeKeys } from '../support/relayHarness.js';
import { BIN, exited, startServe } from '../support/serveProcess.js';
import { useTempDir } from '../support/tmp.js';
import { orThrow } from '../../src/events/storeResult.js';
import { ledgerRecordOf } from '../../src/reconcile/ledgerFacts.js';
import { openLedger } from '../support/ledgerStore.js';
import { runOver, type EntrySpec } from '../support/reconcile.js';

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
  let db: string;
  const pageErrors: string[] = [];
  /** The path of every request the page made. */
  const calls: string[] = [];
  const dataCalls = () => calls.filter((c) => !c.startsWith('/console'));
  /** E401 replies the relay has counted (each one is also a warning in its log). */
  const refusals = async () => {
    const metrics = (await httpRequest(`${url}/metrics`, { method: 'GET', headers: { authorization: `Bearer ${tokens['ops']!}` } })).body;
    return [...metrics.matchAll(/^guidgate_replies_total\{code="E401",route="\w+"\} (\d+)$/gm)].reduce((n, [, k]) => n + Number(k), 0);
  };
  const run = Date.now().toString(36);
  // Timed out (the account system answers after the relay's timeout), then settled by `guidgate resolve`.
  const settled = `late-${run}-settled`;
  // Timed out and left UNKNOWN (settling is off), for the filter and the console's own resolve.
  const unknown = [`late-${run}-u1`, `late-${run}-u2`];
  const done = [`ok-${run}-1`, `ok-${run}-2`, `ok-${run}-3`];
  // Sent and never answered (the account system holds it), then FAILED by the inquiry of `guidgate resolve` (absent).
  const absent = `hole-${run}-1`;
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
    sim = await startSimulator({ port: 0, faults: { lateMs: 6000, byGuidPrefix: { [`late-${run}`]: 'late-answer', [`hole-${run}`]: 'hold' } } });
    db = join(dir, 'ledger.db');
    relay = startServe(['--keys', keys, '--db', db, '--account-url', sim.url, '--timeout', '2s', '--settle-every', '0', '--min-age', '0s']);
    url = await relay.ready;

    // A transfer that timed out, was settled by inquiry, and whose resends got E901 and then the answer; and one the
    // account system never received (held, never applied), which the same resolve finds absent.
    const [first, held] = await Promise.all([post(settled, { note: NOTE }), post(absent)]);
    expect([first.json()['code'], held.json()['code']]).toEqual(['E901', 'E901']);
    expect((await post(settled, { note: NOTE })).json()['code']).toBe('E901');
    const resolve = await runToEnd(spawn(process.execPath, [BIN, 'resolve', '--db', db, '--account-url', sim.url, '--min-age', '0s'], { stdio: ['ignore', 'pipe', 'pipe'] }));
    expect(resolve.code, resolve.stderr).toBe(0);
    expect(await rowStatus(absent)).toBe('FAILED');
    expect((await post(settled, { note: NOTE })).json()['code']).toBe('0000');
    // Two left UNKNOWN, three done, one rejected (an account id starting with X does not exist).
    for (const r of await Promise.all(unknown.map((g) => post(g)))) expect(r.json()['code']).toBe('E901');
    for (const g of done) expect((await post(g)).json()['code']).toBe('0000');
    expect((await post(`bad-${run}`, { to: 'X-NOWHERE' })).json()['code']).toBe('B202');

    ({ browser, page } = await openConsolePage(pageErrors));
    page.on('request', (r) => calls.push(new URL(r.url()).pathname));
  }, 60_000);

  afterAll(() => closeConsoleTest({ browser, errors: pageErrors, relay, sim }));

  const session = () => page.locator('#session');
  /** For a poll that waits on the relay: a loaded machine (the whole suite at once) may take seconds. */
  const WAIT = { timeout: 10_000 };

  it('before sign-in: the sign-in form only, and nothing asked of the relay (no E401 logged or counted)', async () => {
    const refusedBefore = await refusals();
    await page.goto(`${url}/console`);
    await expect.poll(() => session().textContent()).toBe('Enter a token to sign in.');
    expect(dataCalls()).toEqual([]);
    expect(await refusals()).toBe(refusedBefore);
    expect(await page.getByRole('button', { name: 'Sign out' }).count()).toBe(0);
    expect(await page.getByRole('heading', { name: 'Overview' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Sign in' }).isVisible()).toBe(true);
  });

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
    expect(await count('FAILED')).toBe('1');
    const facts = await page.locator('#facts').textContent();
    expect(facts).toMatch(/Oldest UNKNOWN.*late-/);
    expect(facts).toMatch(/Breaker\s*closed/);
    expect(facts).toMatch(/Ledger continuity\s*watching/);
    const replies = page.getByRole('table', { name: /^Replies per code, last/ });
    expect(await replies.getByRole('row', { name: /^E901 / }).locator('td').textContent()).toBe('5');
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
    // The channel's three requests (E901, E901 on the resend while UNKNOWN, then the answer the inquiry stored,
    // replayed: marked so, #28), from the audit trail's request records: between the events, by time.
    const requests = steps.filter((s) => s.startsWith('request answered'));
    expect(requests).toEqual(['request answered E901', 'request answered E901', 'request answered 0000 (replayed, nothing sent)']);
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
    // A DONE row offers no action (resolve or reprocess would only be refused, E409), and says why.
    expect(await page.getByRole('button', { name: /^Preview/ }).count()).toBe(0);
    expect(await page.locator('#action-note').textContent()).toBe('DONE: settled. Nothing to resolve or reprocess.');
  });

  it('a row FAILED by an inquiry reads "sent", not "not sent" (E902); reprocess is offered, resolve is not', async () => {
    await page.getByRole('checkbox', { name: 'UNKNOWN' }).uncheck();
    await page.getByRole('checkbox', { name: 'FAILED' }).check();
    await page.getByRole('button', { name: 'Show rows' }).click();
    const rows = page.getByRole('table', { name: 'Ledger rows' });
    await expect.poll(() => page.locator('#rows-status').textContent(), WAIT).toMatch(/^1 row \(FAILED\)/);
    const cells = await rows.locator('tbody tr').first().locator('td').allTextContents();
    expect(cells.slice(0, 2)).toEqual(['FAILED', 'sent, may have arrived (a resend inquires first)']);
    await rows.getByRole('link', { name: absent }).click();
    await page.getByRole('table', { name: new RegExp(`^Timeline of ${absent}`) }).waitFor();
    expect(await page.locator('#row-facts').textContent()).toContain('Codesent, account system has no record (inquiry); a resend inquires first');
    expect(await page.getByRole('button', { name: 'Preview resolve' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Preview reprocess' }).click();
    await expect.poll(() => page.locator('#preview').textContent(), WAIT).toMatch(/Could become.*an inquiry first: processed → DONE, nothing sent/);
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect(await rowStatus(absent)).toBe('FAILED');
    await page.getByRole('checkbox', { name: 'FAILED' }).uncheck();
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
    // A dry run changes nothing: the preview says what the real run could make of the row, not "after" = "before".
    const could = await preview.locator('li').allTextContents();
    expect(could.map((c) => c.split(' → ')[0])).toEqual(['processed', 'absent', 'no answer, or none it can use']);
    expect(could.map((c) => /→ (\w+(?: UNKNOWN)?)/.exec(c)?.[1])).toEqual(['DONE', 'FAILED', 'stays UNKNOWN']);
    expect(await preview.textContent()).not.toContain('Status after');
    expect(await page.getByRole('button', { name: 'Preview reprocess' }).count()).toBe(0);
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
    // Now DONE: no action offered any more.
    expect(await page.getByRole('button', { name: /^Preview/ }).count()).toBe(0);
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
    expect(seen).toEqual([...done, settled, ...unknown, absent, `bad-${run}`].sort());
    await page.getByRole('button', { name: 'First page' }).click();
    await expect.poll(() => rows.locator('tbody th').allTextContents()).toEqual(seen.slice(0, 2));
  });

  it('Reconciliation: the latest recorded run, its breaks by severity, each GUID opening its timeline; first seen kept while open', async () => {
    // Two runs of the engine over the relay's own ledger rows, recorded in its ledger as `guidgate reconcile` records them.
    const store = openLedger(db);
    const ghost = `ghost-${run}`;
    try {
      const records = (await orThrow(store.queryLedger({}))).map(ledgerRecordOf);
      const at = Math.max(...records.map((r) => r.firstSentAt)) + 10;
      const window = { from: Math.min(...records.map((r) => r.firstSentAt)), to: at + 60_000, pendingMs: 0 };
      const posting = (guid: string, over: Partial<EntrySpec> = {}): EntrySpec => ({ guid, from: FROM, to: '6222021002', amount: 1500, currency: 'CNY', appliedAt: at, ...over });
      const matched = [settled, done[2]!].map((g) => posting(g));
      const day = new Date(window.from).toISOString().slice(0, 10);
      await orThrow(store.recordReconciliation(await runOver(tmp(), records, [...matched, posting(done[0]!), posting(done[0]!, { ref: 'second' }), posting(done[1]!)], window, `core-journal-${day}.ndjson`)));
      // The next morning, the same day again: done[0] still posted twice, done[1]'s posting altered, the FAILED row posted, a posting for a GUID never relayed.
      const journal = [...matched, posting(done[0]!), posting(done[0]!, { ref: 'second' }), posting(done[1]!, { amount: 1501 }), posting(absent), posting(ghost, { amount: 990 })];
      await orThrow(store.recordReconciliation(await runOver(tmp(), records, journal, window, `core-journal-${day}.ndjson`)));
    } finally {
      await store.close();
    }
    await page.goto(`${url}/console/`);
    await expect.poll(() => session().textContent()).toMatch(/^Signed in/);
    const status = page.locator('#recon-status');
    await expect.poll(() => status.textContent(), WAIT).toBe('The latest run, 2: 3 P1 and 2 P2 breaks; each GUID opens its timeline below.');
    expect(await status.getAttribute('class')).toContain('error');
    const facts = await page.locator('#recon-facts').textContent();
    expect(facts).toMatch(/^Run2Recorded/);
    expect(facts).toMatch(/SHA-256[0-9a-f]{64}/);
    const counts = page.getByRole('table', { name: 'GUIDs per category' });
    const count = (category: string) => counts.getByRole('row', { name: new RegExp(`^${category} `) }).locator('td').last().textContent();
    expect([await count('duplicate_in_journal'), await count('amount_mismatch'), await count('unsettled_in_ledger'), await count('missing_in_journal'), await count('missing_in_ledger')]).toEqual(['1', '1', '1', '1', '1']);
    const p1 = page.getByRole('table', { name: /^P1 breaks: 3/ });
    const p2 = page.getByRole('table', { name: /^P2 breaks: 2/ });
    const rowOf = (table: typeof p1, guid: string) => table.getByRole('row', { name: new RegExp(`^${guid} `) });
    expect(await rowOf(p1, done[0]!).textContent()).toMatch(/duplicate_in_journal.*DONE 0000, 15\.00 CNY.*2 postings.*run 1 \(still open\)/);
    expect(await rowOf(p1, done[1]!).textContent()).toMatch(/amount_mismatch, differs in amount.*15\.01 CNY.*run 2 \(this run\)/);
    expect(await rowOf(p1, absent).textContent()).toMatch(/unsettled_in_ledger.*FAILED/);
    expect(await rowOf(p2, ghost).textContent()).toMatch(/missing_in_ledger.*no row \(never relayed\).*9\.90 CNY/);
    expect(await rowOf(p2, done[2]!).count()).toBe(0);
    // Account numbers never reach the page in full: the console shows amounts, not accounts.
    expect(await page.locator('#recon').textContent()).not.toContain(FROM);
    await page.locator('section', { has: page.getByRole('heading', { name: 'Reconciliation' }) }).screenshot({ path: join(SCREENSHOTS, 'console-reconciliation.png') });
    // Every recorded run is listed, newest first, the one shown marked; an earlier one opens with its own breaks.
    const runs = page.getByRole('table', { name: 'Recorded runs, newest first' });
    expect(await runs.locator('tbody th').allTextContents()).toEqual(['Run 2', 'Run 1']);
    expect(await runs.locator('tbody tr[aria-current="true"] th').textContent()).toBe('Run 2');
    expect(await page.getByRole('button', { name: 'Older runs' }).isHidden()).toBe(true);
    await runs.getByRole('button', { name: 'Run 1' }).click();
    await expect.poll(() => status.textContent(), WAIT).toMatch(/^Run 1 \(not the latest\): 1 P1 and \d+ P2 breaks?; each GUID opens its timeline below\.$/);
    expect(await page.locator('#recon-facts').textContent()).toMatch(/^Run1Recorded/);
    expect(await runs.locator('tbody tr[aria-current="true"] th').textContent()).toBe('Run 1');
    const p1Of1 = page.getByRole('table', { name: /^P1 breaks: 1/ });
    expect(await rowOf(p1Of1, done[0]!).textContent()).toMatch(/duplicate_in_journal.*run 1 \(this run\)/);
    expect(await rowOf(p1Of1, done[1]!).count()).toBe(0);
    // Refresh keeps the run chosen; the latest is one click away.
    await page.getByRole('button', { name: 'Refresh' }).and(page.locator('#recon-refresh')).click();
    await expect.poll(() => status.textContent(), WAIT).toMatch(/^Run 1 \(not the latest\)/);
    await runs.getByRole('button', { name: 'Run 2' }).click();
    await expect.poll(() => status.textContent(), WAIT).toMatch(/^The latest run, 2: /);
    // A GUID opens its transfer's timeline.
    await rowOf(p1, done[0]!).getByRole('link', { name: done[0]! }).click();
    await expect.poll(() => page.locator('#transfer-status').textContent(), WAIT).toMatch(new RegExp(`^${done[0]!}: DONE`));
  });

  it('Reconciliation: a run with many breaks is asked for a page at a time; Next and First walk it, every break once', async () => {
    const store = openLedger(db);
    const guids = Array.from({ length: 450 }, (_, i) => `many-${run}-${String(i).padStart(3, '0')}`);
    try {
      const window = { from: 1000, to: 2000, pendingMs: 0 };
      await orThrow(store.recordReconciliation(await runOver(tmp(), [], guids.map((guid) => ({ guid, appliedAt: 1500 })), window)));
    } finally {
      await store.close();
    }
    const asked: string[] = [];
    const onRequest = (r: { url(): string }) => {
      if (/\/v1\/reconciliations\/\d+/.test(r.url())) asked.push(new URL(r.url()).search);
    };
    page.on('request', onRequest);
    try {
      await page.locator('#recon-refresh').click();
      const p2 = page.locator('#recon-p2');
      const guidsShown = () => p2.locator('tbody th').allTextContents();
      await expect.poll(() => p2.locator('caption').textContent(), WAIT).toBe('P2 breaks: 450; page 1 (200 breaks a page, in GUID order) shows 200');
      const seen = [...(await guidsShown())];
      for (const [n, size] of [[2, 200], [3, 50]] as const) {
        await page.getByRole('button', { name: 'Next breaks' }).click();
        await expect.poll(() => p2.locator('caption').textContent(), WAIT).toBe(`P2 breaks: 450; page ${n} (200 breaks a page, in GUID order) shows ${size}`);
        seen.push(...(await guidsShown()));
      }
      expect(seen).toEqual(guids);
      expect(await page.getByRole('button', { name: 'Next breaks' }).isHidden()).toBe(true);
      await page.getByRole('button', { name: 'First breaks' }).click();
      await expect.poll(() => p2.locator('caption').textContent(), WAIT).toBe('P2 breaks: 450; page 1 (200 breaks a page, in GUID order) shows 200');
      // Every ask was for one page, never the whole run.
      expect(asked.length).toBeGreaterThanOrEqual(4);
      for (const q of asked) expect(q).toMatch(/^\?limit=200(&after=.+)?$/);
    } finally {
      page.off('request', onRequest);
    }
  });

  it('at 390 px wide nothing is cut off: the rows and the timeline stack, each cell under its column\'s name', async () => {
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 } });
    try {
      await phone.goto(`${url}/console/#guid=${settled}`);
      await phone.getByLabel('Token').fill(tokens['ops']!);
      await phone.getByRole('button', { name: 'Sign in' }).click();
      await phone.locator('#timeline tbody tr').first().waitFor();
      // (The page's own code, as a string: the test's TypeScript knows no DOM.)
      const overflow = await phone.evaluate(`(() => {
        const width = document.documentElement.clientWidth;
        const cells = [...document.querySelectorAll('#timeline tbody td, #timeline tbody th, #rows tbody td, #rows tbody th, table.breaks tbody td, table.breaks tbody th')]
          .map((el) => el.getBoundingClientRect())
          .filter((r) => r.left < -0.5 || r.right > width + 0.5).length;
        return { page: document.documentElement.scrollWidth - width, cells };
      })()`);
      expect(overflow).toEqual({ page: 0, cells: 0 });
      // Each cell says which column it is.
      expect(await phone.locator('#timeline tbody tr').first().locator('[data-label="What"]').textContent()).toMatch(/^request answered|^Claimed/);
    } finally {
      await phone.close();
    }
  });

  it('auto-refresh is off by default; on, it reloads the overview every interval, and the trend of the last hour fills', async () => {
    const tab = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    // The page's timers run on a clock the test moves: no waiting for a real interval.
    await tab.clock.install();
    const statsCalls: number[] = [];
    tab.on('request', (r) => {
      if (new URL(r.url()).pathname === '/v1/stats') statsCalls.push(Date.now());
    });
    try {
      await tab.goto(`${url}/console/`);
      await tab.getByLabel('Token').fill(tokens['ops']!);
      await tab.getByRole('button', { name: 'Sign in' }).click();
      await expect.poll(() => tab.locator('#session').textContent()).toMatch(/^Signed in/);
      const autoRefresh = tab.getByRole('checkbox', { name: 'Auto-refresh' });
      expect(await autoRefresh.isChecked()).toBe(false);
      expect(statsCalls).toHaveLength(1);
      await tab.clock.runFor(10 * 60_000);
      expect(statsCalls).toHaveLength(1);

      await tab.getByLabel('Interval').selectOption({ label: '10 s' });
      await autoRefresh.check();
      // Each load is awaited to its end (its "Updated" time, by the page's clock): a load still waiting for its answer
      // when the next starts is dropped, sample and all.
      const updated = () => tab.locator('#overview-status').textContent();
      await expect.poll(() => statsCalls.length, WAIT).toBe(2);
      await expect.poll(updated, WAIT).toMatch(/auto-refresh every 10 s\.$/);
      for (let n = 3; n <= 5; n++) {
        const before = await updated();
        await tab.clock.runFor(10_000);
        await expect.poll(() => statsCalls.length, WAIT).toBe(n);
        await expect.poll(updated, WAIT).not.toBe(before);
      }
      // The trend: the relay's replies per minute, and the unsettled rows this page sampled at each load.
      const trend = tab.getByRole('region', { name: 'Last hour' });
      await expect.poll(() => trend.locator('#trend-unsettled-text').textContent(), WAIT).toMatch(/^Unsettled rows \(RECEIVED, SENT, UNKNOWN, FAILED\): 2 now, 2 at \d\d:\d\d UTC; 5 samples/);
      const replies = (await trend.locator('#trend-replies-text').textContent())!;
      const [, total, unsettling] = /^Replies per minute, last 60 minutes: (\d+) in all, .*; (\d+) of them not settling/.exec(replies) ?? [];
      // Every reply of this run came within the hour: the trend's counts are the relay's counters of replies to channels.
      const counted = [...(await httpRequest(`${url}/metrics`, { method: 'GET', headers: { authorization: `Bearer ${tokens['ops']!}` } })).body.matchAll(/^guidgate_replies_total\{code="(\w+)",route="channel"\} (\d+)$/gm)];
      const sumOf = (codes?: string[]) => counted.filter(([, code]) => codes === undefined || codes.includes(code!)).reduce((n, [, , k]) => n + Number(k), 0);
      expect([Number(total), Number(unsettling)]).toEqual([sumOf(), sumOf(['E901', 'E902', 'E903', 'E503'])]);
      expect(Number(unsettling)).toBeGreaterThanOrEqual(5);
      expect(await trend.getByRole('img').count()).toBe(2);
      await trend.screenshot({ path: join(SCREENSHOTS, 'console-trend.png') });

      await autoRefresh.uncheck();
      await tab.clock.runFor(60_000);
      expect(statsCalls).toHaveLength(5);
    } finally {
      await tab.close();
    }
  });
});

describe.skipIf(!available)('the console in Chromium, relay without keys', () => {
  const tmp = useTempDir();
  it('needs no token: signing in with the field empty loads the overview; nothing is asked before', async () => {
    const relay = startServe(['--db', join(tmp(), 'ledger.db'), '--settle-every', '0']);
    const browser = await launchChromium();
    try {
      const url = await relay.ready;
      const page = await browser.newPage();
      const calls: string[] = [];
      page.on('request', (r) => calls.push(new URL(r.url()).pathname));
      await page.goto(`${url}/console/`);
      await expect.poll(() => page.locator('#session').textContent()).toBe('Enter a token to sign in.');
      expect(calls.filter((c) => !c.startsWith('/console'))).toEqual([]);
      await page.getByRole('button', { name: 'Sign in' }).click();
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
