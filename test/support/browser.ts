import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { REPO_ROOT } from './children.js';
import { exited } from './serveProcess.js';

/** Debian's Chromium; never a browser download (GUIDGATE_CHROMIUM names another binary). */
export const CHROMIUM = process.env['GUIDGATE_CHROMIUM'] ?? '/usr/bin/chromium';

const ARGS = ['--no-sandbox', '--headless', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/**
 * Where the browser tests put their screenshots: the docs' (`docs/screenshots`) with `GUIDGATE_SCREENSHOTS=1`
 * (`GUIDGATE_SCREENSHOTS=1 npx vitest run test/browser` refreshes them; commit the result), otherwise a folder
 * under the system's temp (they are still taken, so a page that cannot be captured still fails, but an
 * ordinary `npm test` leaves the working tree as it was: times and ages in them change on every run).
 */
export const SCREENSHOTS = process.env['GUIDGATE_SCREENSHOTS'] === '1' ? join(REPO_ROOT, 'docs', 'screenshots') : join(tmpdir(), 'guidgate-screenshots');

/**
 * Whether the browser tests can run here. Under CI (`CI=true`) a missing Chromium is a failure, never a skip;
 * elsewhere the tests are skipped with a message that says what to install.
 */
export function chromiumForTests(): { available: boolean } {
  if (existsSync(CHROMIUM)) return { available: true };
  const message = `no Chromium at ${CHROMIUM}`;
  if (process.env['CI'] === 'true') throw new Error(`${message}; CI needs it: \`apt-get install chromium\` (.ci/run does)`);
  console.warn(`Browser tests skipped: ${message}. To run them, \`apt-get install chromium\` (Debian), or set GUIDGATE_CHROMIUM to a Chromium binary.`);
  return { available: false };
}

export function launchChromium(): Promise<Browser> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}

/** Chromium with one page (1200×900, 15 s per step) whose uncaught errors are pushed to `errors`. */
export async function openConsolePage(errors: string[]): Promise<{ browser: Browser; page: Page }> {
  const browser = await launchChromium();
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  page.setDefaultTimeout(15_000);
  page.on('pageerror', (err) => errors.push(err.message));
  return { browser, page };
}

/** A browser test file's end: the browser closed, no error thrown in its page, serve stopped, the simulator closed. */
export async function closeConsoleTest(o: { browser?: Browser | undefined; errors: readonly string[]; relay?: { child: ChildProcess } | undefined; sim?: { close(): Promise<void> } | undefined }): Promise<void> {
  await o.browser?.close();
  expect(o.errors, 'errors thrown in the page').toEqual([]);
  if (o.relay !== undefined && o.relay.child.exitCode === null) {
    o.relay.child.kill('SIGTERM');
    await exited(o.relay.child);
  }
  await o.sim?.close();
}
