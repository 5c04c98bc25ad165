import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { REPO_ROOT } from './children.js';

/** Debian's Chromium; never a browser download (GUIDGATE_CHROMIUM names another binary). */
export const CHROMIUM = process.env['GUIDGATE_CHROMIUM'] ?? '/usr/bin/chromium';

const ARGS = ['--no-sandbox', '--headless', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Where the browser tests put the screenshots the README shows. */
export const SCREENSHOTS = join(REPO_ROOT, 'docs', 'screenshots');

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
