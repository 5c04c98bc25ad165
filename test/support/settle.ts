import type { ChildProcess } from 'node:child_process';
import { expect } from 'vitest';
import { cli } from './commandsSeed.js';
import { exited } from './serveProcess.js';
import { waitFor } from './waitFor.js';

/**
 * What an operator runs after an outage or a crash, as processes: `resolve` (every UNKNOWN row, after the
 * orphan sweep with `grace`), then `reprocess`. Both must complete (exit 0).
 */
export async function settleWithCommands(db: string, accountUrl: string, grace: string): Promise<void> {
  const env = { GUIDGATE_DB: db, GUIDGATE_ACCOUNT_URL: accountUrl };
  const resolve = await cli(['resolve', '--min-age', '1ms', '--grace', grace, '--json'], env);
  expect(resolve.code, resolve.stderr).toBe(0);
  // A row an inquiry made FAILED is sent again only after a fresh inquiry, once its last Sent is --min-age old.
  const reprocess = await cli(['reprocess', '--min-age', '1ms', '--grace', grace, '--json'], env);
  expect(reprocess.code, reprocess.stderr).toBe(0);
}

/** SIGKILLs `child` unless it has already ended, and waits for its end. */
export async function sigkillAndWait(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = exited(child);
  child.kill('SIGKILL');
  await gone;
}

/** The sum of every series of `name` on the relay's /metrics at `relayUrl`; fails the test when it exports none. */
export async function metricAt(relayUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${relayUrl}/metrics`)).text();
  const lines = text.split('\n').filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  expect(lines, `${name} on /metrics`).not.toEqual([]);
  return lines.reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

/**
 * Resolves once the background settler of the relay at `relayUrl` has finished a whole run that started after
 * this call (the run under way when it is called may not count): for "nothing more happens while it settles".
 */
export async function aWholeSettleRun(relayUrl: string): Promise<void> {
  const finishedAfter = (ms: number) =>
    waitFor(async () => {
      const at = (await metricAt(relayUrl, 'guidgate_settle_last_run_timestamp_seconds')) * 1000;
      return at > ms ? at : 0;
    }, { what: 'a settle run' });
  await finishedAfter(await finishedAfter(Date.now()));
}
