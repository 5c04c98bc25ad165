import * as E from 'fp-ts/lib/Either.js';
import type { EventLog, LedgerClock, LedgerReadModel } from '../events/store.js';
import { sweepOrphans } from './sweepOrphans.js';

/** Where the sweeps' lines go (a pino logger fits). */
export interface SweepLog {
  warn(line: Record<string, unknown>, message: string): void;
  error(line: Record<string, unknown>, message: string): void;
}

export interface Sweeper {
  /** No further sweep starts (one in flight finishes by itself). */
  stop(): void;
}

/**
 * `serve`'s orphan sweep (CONTRACT.md §4): once before it resolves (the rows a previous process left in RECEIVED or
 * SENT), then every `everyMs`, never two at once, each at the ledger's time. A sweep that fails is logged and the
 * next one tries again.
 */
export async function startSweeper(store: EventLog & LedgerReadModel & LedgerClock, opts: { readonly graceMs: number; readonly everyMs: number }, log: SweepLog): Promise<Sweeper> {
  const sweep = async (): Promise<void> => {
    const now = await store.now();
    const swept = E.isLeft(now) ? now : await sweepOrphans(store, opts.graceMs, now.right);
    if (E.isLeft(swept)) log.error({ error: swept.left.code, cause: swept.left.message }, 'orphan sweep failed');
    else if (swept.right.neverSent + swept.right.orphaned > 0) log.warn({ ...swept.right }, 'swept orphaned rows');
  };
  await sweep();
  let sweeping = false;
  const timer = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    void sweep().finally(() => (sweeping = false));
  }, opts.everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
