import type { ChildProcess } from 'node:child_process';
import { expect } from 'vitest';
import { cli } from './commandsSeed.js';
import { exited } from './serveProcess.js';
import { waitFor } from './waitFor.js';
import type { LedgerReadModel } from '../../src/events/store.js';
import { orThrow } from '../../src/events/storeResult.js';
import type { Simulator, SimulatorStats } from '../../src/simulator/index.js';

/**
 * GUIDs that reached the account system's POST /transfer more than once, whatever it answered, sorted. Against a
 * simulator that answers every call (no hold or garbage fault), a second call is a second processing: a B2xx or
 * E500 asked again is as wrong as a 0000 applied twice, though only the latter shows as a posting.
 */
export function calledMoreThanOnce(stats: Pick<SimulatorStats, 'calls'>): string[] {
  return Object.keys(stats.calls).filter((g) => (stats.calls[g] ?? 0) > 1).sort();
}

/**
 * At most once, every GUID, against a simulator that answers every call: nothing called twice; a GUID never claimed
 * (every copy got E503 or never arrived) never called; a claimed one settled DONE, called once and applied once.
 */
export async function expectSettledOnceEach(store: Pick<LedgerReadModel, 'getLedger'>, sim: Pick<Simulator, 'stats'>, guids: readonly string[]): Promise<void> {
  const stats = sim.stats();
  expect(stats.doubleApplied).toEqual([]);
  expect(calledMoreThanOnce(stats), 'GUIDs called more than once').toEqual([]);
  for (const g of guids) {
    const row = await orThrow(store.getLedger(g));
    if (row === null) expect(stats.calls[g] ?? 0, g).toBe(0);
    else expect([row.status, stats.calls[g] ?? 0, stats.applied[g] ?? 0], g).toEqual(['DONE', 1, 1]);
  }
}

/**
 * What an operator runs after an outage or a crash, as processes: `resolve` (every UNKNOWN row, after the
 * orphan sweep with `grace`), then `reprocess`. Both must complete (exit 0).
 */
export async function settleWithCommands(db: string, accountUrl: string, grace: string): Promise<void> {
  const env = { GUIDGATE_DB: db, GUIDGATE_ACCOUNT_URL: accountUrl };
  const resolve = await cli(['resolve', '--min-age', '1ms', '--grace', grace, '--json'], env);
  expect(resolve.code, resolve.stderr).toBe(0);
  // A row an inquiry made FAILED is sent again only after a fresh inquiry, once its last Sent is --min-age old.
  // reprocess's --grace only bounds its own claims (each must commit within half of it, or the run stops early with
  // nothing sent): it takes the default, as an operator's would, and not the relays' short grace, which a loaded
  // machine's PostgreSQL claim can outlast (a run stopped so at 250 ms failed CI once).
  const reprocess = await cli(['reprocess', '--min-age', '1ms', '--json'], env);
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
