import type { Command } from 'commander';
import { stopSignal } from './interrupt.js';
import { keepRunningWhenStdoutCloses } from './output.js';
import { addSecurityOptions, securityOptionsOrExit, type SecurityFlags } from './serveSecurity.js';
import { addNotifyOptions, notifyOptionsOrExit, type NotifyFlags } from './serveNotify.js';
import { continuityDirFlag, durationOrOffArg, inquiryRateFlag, minAgeFlag, choiceArg, dbFlag, flag, graceFlag, intArg, LOG_LEVELS, maxAttemptsFlag, shownDefault, timeLimitArg, timeoutFlag, urlArg } from './options.js';
import { DEFAULTS } from '../shared/defaults.js';
import { warnUnderFloor } from './warnings.js';
import { MIN_GRACE_MS } from '../send/sendWindow.js';

export function registerServe(program: Command): void {
  addNotifyOptions(addSecurityOptions(program.command('serve')))
    .description('run the relay (with the bundled account simulator when no --account-url is given)')
    .addOption(flag('--port <n>', 'port to listen on').argParser(intArg(0, 65535)).default(DEFAULTS.port))
    .addOption(flag('--host <host>', 'address to listen on').default(DEFAULTS.host))
    .addOption(dbFlag())
    .addOption(flag('--account-url <url>', 'base URL of the account system (http or https)').argParser(urlArg))
    .addOption(timeoutFlag('timeout of one account call'))
    .addOption(graceFlag(`how long past its timeout a SENT row waits before the sweep calls it orphaned; a claim must commit and its call start within half of it (at least ${MIN_GRACE_MS}ms)`))
    .addOption(maxAttemptsFlag('sends of one GUID at most (refused connections count)'))
    .addOption(flag('--synchronous <mode>', 'SQLite synchronous: FULL (durable, default) or NORMAL (faster; a power cut may lose the last claims)').argParser(choiceArg(['FULL', 'NORMAL', 'EXTRA'] as const)).default(DEFAULTS.synchronous))
    .addOption(flag('--busy-timeout <duration>', 'how long to wait for another process holding the ledger lock').argParser(timeLimitArg).default(DEFAULTS.busyTimeoutMs, shownDefault(DEFAULTS.busyTimeoutMs)))
    .addOption(flag('--body-timeout <duration>', 'a request body not received in full within this gets 408 (E400); nothing is stored').argParser(timeLimitArg).default(DEFAULTS.bodyTimeoutMs, shownDefault(DEFAULTS.bodyTimeoutMs)))
    .addOption(flag('--max-connections <n>', 'connections held at most; a new one takes the slot of the longest idle one').argParser(intArg(1)).default(DEFAULTS.maxConnections))
    .addOption(flag('--max-connections-per-address <n>', 'connections held at most from one client address (an IPv6 /64); behind a proxy, all come from the proxy').argParser(intArg(1)).default(DEFAULTS.maxConnectionsPerAddress))
    .addOption(flag('--max-waiters <n>', 'channel requests waiting at once for an outcome (Prefer: wait=N on a GUID in progress); any more get E903 at once (0: none waits)').argParser(intArg(0)).default(DEFAULTS.maxWaiters))
    .addOption(flag('--log-level <level>', LOG_LEVELS.join(', ')).argParser(choiceArg(LOG_LEVELS)).default(DEFAULTS.logLevel))
    .addOption(flag('--settle-every <duration>', 'settle UNKNOWN rows by inquiry in the background this often (0: off)').argParser(durationOrOffArg).default(DEFAULTS.settleEveryMs, shownDefault(DEFAULTS.settleEveryMs)))
    .addOption(minAgeFlag('settle (and resend a row an inquiry made FAILED) only once its last Sent is this old'))
    .addOption(inquiryRateFlag('inquiries this process makes at most (50/s, 600/m; 0: no cap), the settler, the operator API and channels\' resends together; over it the settler waits, oldest row first, and a channel gets E901 with Retry-After'))
    .addOption(flag('--breaker-failures <n>', 'stop calling the account system after this many calls in a row ended FAILED or UNKNOWN (0: off)').argParser(intArg(0)).default(DEFAULTS.breakerFailures))
    .addOption(flag('--breaker-cooldown <duration>', 'how long the breaker stays open before one trial call').argParser(timeLimitArg).default(DEFAULTS.breakerCooldownMs, shownDefault(DEFAULTS.breakerCooldownMs)))
    .addOption(flag('--continuity-window <duration>', 'after the ledger went back (failover to a standby that missed commits, a restored file), inquire about every GUID it does not know before its first send for this long (0: off, trust the database)').argParser(durationOrOffArg).default(DEFAULTS.continuityWindowMs, shownDefault(DEFAULTS.continuityWindowMs)))
    .addOption(continuityDirFlag())
    .addOption(flag('--journal-witness <mode>', 'at start, read the account system\'s journal (GET /journal, needs --account-url) to judge the ledger: exclusive (every posting of that core comes through guidgate: a posting of a GUID the ledger does not know opens the continuity window), shared (others post too: only said), off').argParser(choiceArg(['off', 'exclusive', 'shared'] as const)).default(DEFAULTS.journalWitness))
    .addOption(flag('--check', 'run the full ledger check (guidgate check) before listening; refuse to start if it fails'))
    .addOption(flag('--require-sync-standby', 'PostgreSQL: refuse new transfers (E503) and answer /healthz 503 while the primary has no synchronous standby (a failover could lose acknowledged claims)'))
    .addOption(flag('--writer <where>', 'where ledger commits run: inline (the request thread; at FULL the WAL is synced off the event loop) or thread (a worker thread with its own connection)').argParser(choiceArg(['inline', 'thread'] as const)).default(DEFAULTS.writer))
    .action(async (o: { port: number; host: string; db: string; accountUrl?: string; timeout: number; grace: number; maxAttempts: number; synchronous: 'FULL' | 'NORMAL' | 'EXTRA'; busyTimeout: number; bodyTimeout: number; maxConnections: number; maxConnectionsPerAddress: number; maxWaiters: number; logLevel: string; writer: 'thread' | 'inline'; check?: boolean; requireSyncStandby?: boolean; settleEvery: number; minAge: number; inquiryRate: string; breakerFailures: number; breakerCooldown: number; continuityWindow: number; continuityDir?: string; journalWitness: 'off' | 'exclusive' | 'shared' } & SecurityFlags & NotifyFlags, cmd: Command) => {
      const security = securityOptionsOrExit(cmd, o);
      const notify = notifyOptionsOrExit(cmd, o);
      warnUnderFloor('serve', 'minAge', o.minAge);
      if (o.journalWitness !== 'off' && o.accountUrl === undefined) cmd.error(`error: --journal-witness ${o.journalWitness} needs --account-url (the account system whose journal is read)`, { exitCode: 2 });
      const stopped = stopSignal();
      keepRunningWhenStdoutCloses();
      // Loaded when used, so that the operator commands start without fastify.
      const { serve } = await import('../wiring/serve.js');
      const relay = await serve({
        port: o.port, host: o.host, db: o.db, accountUrl: o.accountUrl, timeoutMs: o.timeout, graceMs: o.grace,
        maxAttempts: o.maxAttempts, synchronous: o.synchronous, busyTimeoutMs: o.busyTimeout, bodyTimeoutMs: o.bodyTimeout,
        maxConnections: o.maxConnections, maxConnectionsPerAddress: o.maxConnectionsPerAddress, maxWaiters: o.maxWaiters, logLevel: o.logLevel, writer: o.writer, check: o.check === true,
        settleEveryMs: o.settleEvery, minAgeMs: o.minAge, inquiryRate: o.inquiryRate, breakerFailures: o.breakerFailures, breakerCooldownMs: o.breakerCooldown, continuityWindowMs: o.continuityWindow, continuityDir: o.continuityDir, journalWitness: o.journalWitness,
        requireSyncStandby: o.requireSyncStandby === true,
        ...security,
        ...notify,
      });
      await stopped;
      process.stdout.write('shutting down: waiting for in-flight calls\n');
      await relay.close();
    });
}
