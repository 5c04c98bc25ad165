import type { Command } from 'commander';
import { stopSignal } from './interrupt.js';
import { keepRunningWhenStdoutCloses } from './output.js';
import { flag, intArg, timeoutFlag, urlArg } from './options.js';
import { DEFAULTS } from '../shared/defaults.js';

export function registerNaive(program: Command): void {
  program
    .command('naive')
    .description('the relay without a ledger, forwarding every request (for the demo and the benchmark only)')
    .addOption(flag('--port <n>', 'port').argParser(intArg(0, 65535)).default(DEFAULTS.naivePort))
    .addOption(flag('--host <host>', 'address').default(DEFAULTS.host))
    .addOption(flag('--account-url <url>', 'base URL of the account system').argParser(urlArg).makeOptionMandatory())
    .addOption(timeoutFlag('timeout of one account call'))
    .action(async (o: { port: number; host: string; accountUrl: string; timeout: number }) => {
      const stopped = stopSignal();
      keepRunningWhenStdoutCloses();
      const { startNaive } = await import('../relay/naive.js');
      const naive = await startNaive(o);
      process.stdout.write(`naive relay (no ledger, NOT safe against resends) listening on ${naive.url}\n`);
      await stopped;
      await naive.close();
    });
}
