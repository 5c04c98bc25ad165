import { Command, CommanderError } from 'commander';
import { serve } from '../commands/serve.js';
import { runSimulatorCommand } from '../simulator/index.js';
import { runNaive } from '../relay/naive.js';
import { choiceArg, DEFAULT_DB, durationArg, flag, intArg } from './options.js';

const program = new Command('guidgate')
  .description('A durable GUID ledger in front of a non-idempotent account system')
  .exitOverride()
  .configureOutput({ outputError: (str, write) => write(str) });

const dbFlag = () => flag('--db <path>', 'ledger file').default(DEFAULT_DB);

program
  .command('serve')
  .description('run the relay (with the bundled account simulator when no --account-url is given)')
  .addOption(flag('--port <n>', 'port to listen on').argParser(intArg(0, 65535)).default(8080))
  .addOption(flag('--host <host>', 'address to listen on').default('127.0.0.1'))
  .addOption(dbFlag())
  .addOption(flag('--account-url <url>', 'base URL of the account system'))
  .addOption(flag('--timeout <duration>', 'timeout of one account call').argParser(durationArg).default(3000, '3s'))
  .addOption(flag('--grace <duration>', 'how long past its timeout a SENT row waits before the sweep calls it orphaned').argParser(durationArg).default(5000, '5s'))
  .addOption(flag('--max-attempts <n>', 'sends of one GUID at most (refused connections count)').argParser(intArg(1)).default(5))
  .addOption(flag('--synchronous <mode>', 'SQLite synchronous: FULL (durable, default) or NORMAL (faster; a power cut may lose the last claims)').argParser(choiceArg(['FULL', 'NORMAL', 'EXTRA'] as const)).default('FULL'))
  .addOption(flag('--busy-timeout <duration>', 'how long to wait for another process holding the ledger lock').argParser(durationArg).default(5000, '5s'))
  .addOption(flag('--log-level <level>', 'fatal, error, warn, info, debug').default('info'))
  .action(async (o: { port: number; host: string; db: string; accountUrl?: string; timeout: number; grace: number; maxAttempts: number; synchronous: 'FULL' | 'NORMAL' | 'EXTRA'; busyTimeout: number; logLevel: string }) => {
    const relay = await serve({
      port: o.port, host: o.host, db: o.db, accountUrl: o.accountUrl, timeoutMs: o.timeout, graceMs: o.grace,
      maxAttempts: o.maxAttempts, synchronous: o.synchronous, busyTimeoutMs: o.busyTimeout, logLevel: o.logLevel,
    });
    await new Promise<void>((resolve) => {
      const stop = () => resolve();
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
    });
    process.stdout.write('shutting down: waiting for in-flight calls\n');
    await relay.close();
  });

program
  .command('simulator')
  .description('run the bundled non-idempotent account system (for demos and tests)')
  .addOption(flag('--port <n>', 'port').argParser(intArg(0, 65535)).default(8090))
  .addOption(flag('--host <host>', 'address').default('127.0.0.1'))
  .addOption(flag('--latency <duration>', 'delay before each answer').argParser(durationArg).default(0, '0ms'))
  .addOption(flag('--db <path>', 'keep the simulated accounts in this SQLite file (in memory when absent)'))
  .action(async (o: { port: number; host: string; latency: number; db?: string }) => {
    await runSimulatorCommand({ port: o.port, host: o.host, latencyMs: o.latency, ...(o.db === undefined ? {} : { db: o.db }) });
  });

program
  .command('naive')
  .description('the relay without a ledger, forwarding every request (for the demo and the benchmark only)')
  .addOption(flag('--port <n>', 'port').argParser(intArg(0, 65535)).default(8081))
  .addOption(flag('--host <host>', 'address').default('127.0.0.1'))
  .addOption(flag('--account-url <url>', 'base URL of the account system').makeOptionMandatory())
  .addOption(flag('--timeout <duration>', 'timeout of one account call').argParser(durationArg).default(3000, '3s'))
  .action(async (o: { port: number; host: string; accountUrl: string; timeout: number }) => {
    await runNaive(o);
  });

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // help and version are not failures; every other parse problem is bad usage.
    process.exit(err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help' ? 0 : 2);
  }
  process.stderr.write(`guidgate: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
