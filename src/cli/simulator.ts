import type { Command } from 'commander';
import { stopSignal } from './interrupt.js';
import { keepRunningWhenStdoutCloses } from './output.js';
import { durationArg, flag, intArg } from './options.js';

const simulatorFlag = (flags: string, description: string) => flag(flags, description, 'GUIDGATE_SIMULATOR_');

export function registerSimulator(program: Command): void {
  program
    .command('simulator')
    .description('run the bundled non-idempotent account system (for demos and tests)')
    .addOption(simulatorFlag('--port <n>', 'port').argParser(intArg(0, 65535)).default(8090))
    .addOption(simulatorFlag('--host <host>', 'address').default('127.0.0.1'))
    .addOption(simulatorFlag('--latency <duration>', 'delay before each answer').argParser(durationArg).default(0, '0ms'))
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
