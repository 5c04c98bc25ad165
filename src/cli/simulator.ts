import type { Command } from 'commander';
import { stopSignal } from './interrupt.js';
import { keepRunningWhenStdoutCloses } from './output.js';
import { durationArg, flag, intArg, shownDefault } from './options.js';
import { DEFAULTS } from '../shared/defaults.js';

const simulatorFlag = (flags: string, description: string) => flag(flags, description, 'GUIDGATE_SIMULATOR_');

export function registerSimulator(program: Command): void {
  program
    .command('simulator')
    .description('run the bundled non-idempotent account system (for demos and tests)')
    .addOption(simulatorFlag('--port <n>', 'port').argParser(intArg(0, 65535)).default(DEFAULTS.simulatorPort))
    .addOption(simulatorFlag('--host <host>', 'address').default(DEFAULTS.host))
    .addOption(simulatorFlag('--latency <duration>', 'delay before each answer').argParser(durationArg).default(DEFAULTS.simulatorLatencyMs, shownDefault(DEFAULTS.simulatorLatencyMs)))
    .addOption(simulatorFlag('--db <path>', 'keep the simulated accounts in this SQLite file (in memory when absent)'))
    .action(async (o: { port: number; host: string; latency: number; db?: string }) => {
      const stopped = stopSignal();
      keepRunningWhenStdoutCloses();
      const { startSimulator } = await import('../simulator/index.js');
      const sim = await startSimulator({ port: o.port, host: o.host, latencyMs: o.latency, ...(o.db === undefined ? {} : { dbPath: o.db }) });
      process.stdout.write(`simulator listening on ${sim.url}\n`);
      await stopped;
      await sim.close();
    });
}
