import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { STATUSES, type Status } from '../events/codecs.js';
import { choiceArg, DEFAULT_DB, durationArg, durationOrOffArg, flag, intArg } from './options.js';

const program = new Command('guidgate')
  .description('A durable GUID ledger in front of a non-idempotent account system')
  .exitOverride()
  .configureOutput({ outputError: (str, write) => write(str) });

const dbFlag = () => flag('--db <path>', 'ledger file').default(DEFAULT_DB);
const minAgeFlag = (what: string) => flag('--min-age <duration>', what).argParser(durationArg).default(60_000, '60s');

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
  .addOption(flag('--settle-every <duration>', 'settle UNKNOWN rows by inquiry in the background this often (0: off)').argParser(durationOrOffArg).default(10_000, '10s'))
  .addOption(minAgeFlag('settle (and resend a row an inquiry made FAILED) only once its last Sent is this old'))
  .addOption(flag('--breaker-failures <n>', 'stop calling the account system after this many calls in a row ended FAILED or UNKNOWN (0: off)').argParser(intArg(0)).default(20))
  .addOption(flag('--breaker-cooldown <duration>', 'how long the breaker stays open before one trial call').argParser(durationArg).default(5000, '5s'))
  .addOption(flag('--writer <where>', 'where ledger commits run: thread (a worker thread, fsync off the request loop) or inline (the request thread)').argParser(choiceArg(['thread', 'inline'] as const)).default('thread'))
  .action(async (o: { port: number; host: string; db: string; accountUrl?: string; timeout: number; grace: number; maxAttempts: number; settleEvery: number; minAge: number; breakerFailures: number; breakerCooldown: number; synchronous: 'FULL' | 'NORMAL' | 'EXTRA'; busyTimeout: number; logLevel: string; writer: 'thread' | 'inline' }) => {
    // Loaded when used, so that the operator commands start without fastify.
    const { serve } = await import('../commands/serve.js');
    const relay = await serve({
      port: o.port, host: o.host, db: o.db, accountUrl: o.accountUrl, timeoutMs: o.timeout, graceMs: o.grace,
      maxAttempts: o.maxAttempts, settleEveryMs: o.settleEvery, minAgeMs: o.minAge, breakerFailures: o.breakerFailures, breakerCooldownMs: o.breakerCooldown,
      synchronous: o.synchronous, busyTimeoutMs: o.busyTimeout, logLevel: o.logLevel, writer: o.writer,
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
    const { runSimulatorCommand } = await import('../simulator/index.js');
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
    const { runNaive } = await import('../relay/naive.js');
    await runNaive(o);
  });

// ---- operator commands (CONTRACT.md §5); their code is loaded only when one of them runs ----

function urlArg(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError(`'${value}' is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError(`'${value}' is not an http(s) URL`);
  return value;
}

/** `UNKNOWN`, `failed`, `UNKNOWN,FAILED`. */
function statusesArg(value: string): Status[] {
  const parts = value.split(',').map((p) => p.trim().toUpperCase()).filter((p) => p !== '');
  const bad = parts.find((p) => !(STATUSES as readonly string[]).includes(p));
  if (bad !== undefined || parts.length === 0) throw new InvalidArgumentError(`'${value}' is not a status (${STATUSES.join(', ')}; several separated by commas)`);
  return parts as Status[];
}

const run = () => import('../commands/run.js');
const setExit = (code: number): void => {
  process.exitCode = code;
};
program
  .command('demo')
  .description("the seed's lesson in under 30 seconds: the same resending load through the naive relay and through guidgate, then settled")
  .addOption(flag('--transfers <n>', 'transfers the channel sends').argParser(intArg(10, 100_000)).default(200))
  .addOption(flag('--concurrency <n>', 'transfers in flight at once').argParser(intArg(1, 256)).default(20))
  .action(async (o: { transfers: number; concurrency: number }) => {
    const { runDemo } = await import('../commands/demo.js');
    const r = await runDemo({ transfers: o.transfers, concurrency: o.concurrency });
    // The demo fails if guidgate itself double-debited or left a transfer unsettled.
    const allDone = r.settled['DONE'] === o.transfers;
    setExit(r.guidgate.doubleDebits === 0 && r.settledDoubles === 0 && allDone ? 0 : 1);
  });

const accountUrlFlag = () => flag('--account-url <url>', 'base URL of the account system').argParser(urlArg).makeOptionMandatory();
const limitFlag = () => flag('--limit <n>', 'handle at most this many rows').argParser(intArg(1));
const dryRunFlag = (what: string) => flag('--dry-run', what);
const concurrencyFlag = (what: string) => flag('--concurrency <n>', what).argParser(intArg(1, 256)).default(8);
const jsonFlag = (what = 'print the result as JSON') => flag('--json', what);

program
  .command('resolve')
  .description('sweep orphans, then settle UNKNOWN rows whose last send is at least --min-age old by asking the account system')
  .addOption(accountUrlFlag())
  .addOption(minAgeFlag('only rows whose last Sent is at least this old (longer than the account system may take to process)'))
  .addOption(limitFlag())
  .addOption(dryRunFlag('list the candidates; sweep, inquire and change nothing'))
  .addOption(concurrencyFlag('inquiries in flight at once'))
  .addOption(flag('--grace <duration>', 'grace of the orphan sweep run first').argParser(durationArg).default(5000, '5s'))
  .addOption(flag('--timeout <duration>', 'deadline of one inquiry').argParser(durationArg).default(3000, '3s'))
  .addOption(dbFlag())
  .addOption(jsonFlag())
  .action(async (o: { accountUrl: string; minAge: number; limit?: number; dryRun?: boolean; concurrency: number; grace: number; timeout: number; db: string; json?: boolean }) => {
    setExit(await (await run()).runResolve(o));
  });

program
  .command('reprocess')
  .description('send FAILED rows again (same GUID, stored bytes) while attempts < --max-attempts; never touches any other state')
  .addOption(accountUrlFlag())
  .addOption(flag('--max-attempts <n>', 'sends of one GUID at most (refused connections count)').argParser(intArg(1)).default(5))
  .addOption(minAgeFlag('a row FAILED by an inquiry is sent again only when its last Sent is this old and a fresh inquiry says absent'))
  .addOption(limitFlag())
  .addOption(dryRunFlag('list the candidates; send and change nothing'))
  .addOption(concurrencyFlag('sends in flight at once'))
  .addOption(flag('--timeout <duration>', 'timeout of one account call').argParser(durationArg).default(3000, '3s'))
  .addOption(dbFlag())
  .addOption(jsonFlag())
  .action(async (o: { accountUrl: string; maxAttempts: number; minAge: number; limit?: number; dryRun?: boolean; concurrency: number; timeout: number; db: string; json?: boolean }) => {
    setExit(await (await run()).runReprocess(o));
  });

program
  .command('purge')
  .description('DONE rows finished before now - retention become PURGED tombstones; old tombstones are deleted; space is given back')
  .addOption(flag('--retention <duration>', 'keep DONE rows this long after their last change').argParser(durationArg).default(7 * 86_400_000, '7d'))
  .addOption(flag('--tombstone-retention <duration>', 'keep PURGED tombstones (E905 answers) this long').argParser(durationArg).default(90 * 86_400_000, '90d'))
  .addOption(dryRunFlag('count what would be purged and removed; change nothing'))
  .addOption(dbFlag())
  .addOption(jsonFlag())
  .action(async (o: { retention: number; tombstoneRetention: number; dryRun?: boolean; db: string; json?: boolean }) => {
    setExit(await (await run()).runPurge(o));
  });

program
  .command('history')
  .description("a GUID's events in order, for auditors")
  .argument('<guid>', 'the transfer GUID')
  .addOption(dbFlag())
  .addOption(jsonFlag('print an array of {seq, type, at, data}'))
  .action(async (guid: string, o: { db: string; json?: boolean }) => {
    setExit(await (await run()).runHistory({ ...o, guid }));
  });

program
  .command('ledger')
  .description('list ledger rows (never the raw request)')
  .addOption(flag('--status <status>', `only these statuses: ${STATUSES.join(', ')} (comma-separated)`).argParser(statusesArg))
  .addOption(flag('--older-than <duration>', 'only rows whose last change is older than this').argParser(durationArg))
  .addOption(limitFlag())
  .addOption(dbFlag())
  .addOption(jsonFlag('print a JSON array of rows'))
  .action(async (o: { status?: Status[]; olderThan?: number; limit?: number; db: string; json?: boolean }) => {
    setExit(await (await run()).runLedger(o));
  });

program
  .command('stats')
  .description('rows per status, the oldest UNKNOWN and FAILED rows, and FAILED rows at the attempt cap')
  .addOption(flag('--max-attempts <n>', 'the attempt cap the relay and reprocess use').argParser(intArg(1)).default(5))
  .addOption(dbFlag())
  .addOption(jsonFlag())
  .action(async (o: { maxAttempts: number; db: string; json?: boolean }) => {
    setExit(await (await run()).runStats(o));
  });

program
  .command('rebuild')
  .description('rebuild the ledger projection from the event log')
  .addOption(flag('--verify', 'only compare the projection with the log; exit 1 on any difference'))
  .addOption(dbFlag())
  .addOption(jsonFlag())
  .action(async (o: { verify?: boolean; db: string; json?: boolean }) => {
    setExit(await (await run()).runRebuild(o));
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
