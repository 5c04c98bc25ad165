import type { ChildProcess } from 'node:child_process';
import { expect } from 'vitest';
import { cli } from './commandsSeed.js';
import { exited } from './serveProcess.js';

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
