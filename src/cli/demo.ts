import type { Command } from 'commander';
import { flag, intArg } from './options.js';
import { setExit } from './output.js';
import { DEFAULTS } from '../shared/defaults.js';

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description("the seed's lesson in about 15 seconds: the same resending load through the naive relay and through guidgate, then settled")
    .addOption(flag('--transfers <n>', 'transfers the channel sends').argParser(intArg(10, 100_000)).default(DEFAULTS.demoTransfers))
    .addOption(flag('--concurrency <n>', 'transfers in flight at once').argParser(intArg(1, 256)).default(DEFAULTS.demoConcurrency))
    .action(async (o: { transfers: number; concurrency: number }) => {
      const { runDemo } = await import('../wiring/demo.js');
      const r = await runDemo({ transfers: o.transfers, concurrency: o.concurrency });
      // The demo fails if guidgate itself double-debited or left a transfer unsettled…
      const allDone = r.settled['DONE'] === o.transfers;
      // …or if its reconciliation finds a break.
      setExit(r.guidgate.doubleDebits === 0 && r.settledDoubles === 0 && allDone && r.reconciled.guidgate.breaks === 0 ? 0 : 1);
    });
}
