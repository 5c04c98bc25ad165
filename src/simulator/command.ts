import type { Faults } from './faults.js';
import { startSimulator, type SimulatorOptions } from './server.js';

export interface SimulatorCommandOptions {
  port: number;
  host: string;
  latencyMs: number;
  db?: string;
  faults?: Partial<Faults>;
}

/**
 * `guidgate simulator`: starts the simulator, prints `simulator listening on http://H:N` once ready, and closes
 * on SIGTERM/SIGINT. The returned promise settles after that shutdown has finished.
 */
export async function runSimulatorCommand(opts: SimulatorCommandOptions): Promise<void> {
  const simOpts: SimulatorOptions = { port: opts.port, host: opts.host, latencyMs: opts.latencyMs };
  if (opts.db !== undefined) simOpts.dbPath = opts.db;
  if (opts.faults !== undefined) simOpts.faults = opts.faults;
  const sim = await startSimulator(simOpts);
  process.stdout.write(`simulator listening on ${sim.url}\n`);
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      resolve();
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await sim.close();
}
