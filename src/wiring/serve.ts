import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { startNotifier } from '../send/notifier.js';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { checkLedger, continuityWarning, ledgerWarning, openStore, processActor, storeKind } from '../store/openStore.js';
import type { HostEvent, Synchronous } from '../store/openStore.js';
import type { EventStore } from '../events/store.js';
import * as E from 'fp-ts/lib/Either.js';
import { createAccountClient } from '../account/accountClient.js';
import { inquiryPacing } from '../account/inquiryPacer.js';
import { buildApp, storeReadiness } from '../relay/app.js';
import { createOutcomeWaiters, watchOutcomes } from '../relay/outcomeWaiters.js';
import type { KeyRing } from '../relay/auth/keyRing.js';
import { createBreaker } from '../relay/breaker.js';
import { createMetrics } from '../telemetry/metrics.js';
import { sendWindowMs } from '../send/sendWindow.js';
import { startSweeper } from '../send/sweeper.js';
import { startSimulator, type Simulator } from '../simulator/index.js';
import { DEFAULTS } from '../shared/defaults.js';
import { packageVersion } from '../shared/packageRoot.js';
import { startSettler } from '../commands/settler.js';
import { readBlackHoleDeadLetters } from '../commands/stats.js';
import { orThrow } from '../events/storeResult.js';
import { gatedStore, watchDurability, type DurabilityWatch } from './durability.js';
import { startContinuityGuard, type ContinuityLog } from '../send/continuityGuard.js';
import { startTracing } from '../telemetry/tracing.js';
import { notifySystemd } from './systemdNotify.js';
import { judgeByJournal, type JournalWitness } from './journalWitness.js';

export interface ServeOptions {
  readonly port: number;
  readonly host: string;
  readonly db: string;
  readonly accountUrl?: string | undefined;
  readonly timeoutMs: number;
  readonly graceMs: number;
  readonly maxAttempts: number;
  /** Background settling every this long (0: off), asking about UNKNOWN rows whose last Sent is `minAgeMs` old. */
  readonly settleEveryMs?: number;
  /** Also the age a row FAILED by an inquiry must reach before a channel's resend may send it again. */
  readonly minAgeMs?: number;
  /** Inquiries this process makes at most, every source together (`50/s`; `0`: no cap; CONTRACT.md §7). */
  readonly inquiryRate?: string;
  /** Calls in a row that ended FAILED or UNKNOWN before the breaker opens (0: off). */
  readonly breakerFailures?: number;
  readonly breakerCooldownMs?: number;
  /** After the ledger went back, every GUID it does not know is inquired about before its first send for this long (0: off; CONTRACT.md §9). */
  readonly continuityWindowMs?: number;
  /** SQLite: the folder of the continuity marks (`--continuity-dir`). */
  readonly continuityDir?: string | undefined;
  /** `--journal-witness`: what the account system's journal may say about the ledger at start (CONTRACT.md §9). */
  readonly journalWitness?: JournalWitness;
  readonly synchronous: Synchronous;
  readonly busyTimeoutMs: number;
  /** A request body not received in full within this gets 408 (E400); nothing is stored (CONTRACT.md §2 v2). */
  readonly bodyTimeoutMs?: number | undefined;
  /** Connections held at most (CONTRACT.md §2 v2). */
  readonly maxConnections?: number | undefined;
  /** Connections held at most from one address (an IPv6 /64). */
  readonly maxConnectionsPerAddress?: number | undefined;
  /** Channel requests waiting for an outcome (`Prefer: wait`) at once; any more get E903 at once. */
  readonly maxWaiters?: number | undefined;
  readonly logLevel: string;
  /** Where ledger commits run: `inline` (default; at FULL the WAL is synced off the event loop) or a worker `thread`. */
  readonly writer?: 'inline' | 'thread';
  readonly out?: (line: string) => void;
  /** Keys on (CONTRACT.md §6); re-read on SIGHUP. Absent: open mode (the command line allows it on loopback only). */
  readonly keys?: KeyRing;
  /** HTTPS; with `clientCa`, only clients whose certificate that CA signed get through (mutual TLS). */
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer; readonly clientCa?: Buffer };
  /** CA certificates (PEM) for an `https://` account URL, instead of the system's. */
  readonly accountCa?: Buffer;
  /** Run `guidgate check` (quick_check over every page) before opening the ledger; refuse to start if it fails. */
  readonly check?: boolean;
  /** PostgreSQL: new transfers E503 and /healthz 503 while the primary has no synchronous standby (CONTRACT.md §9). */
  readonly requireSyncStandby?: boolean;
  /** `--notify-url` and its settings (CONTRACT.md §11): this process delivers the ledger's notifications. */
  readonly notify?: { readonly url: string; readonly secret: Buffer; readonly timeoutMs: number; readonly forMs: number; readonly ca?: Buffer };
  /** Where the OpenTelemetry variables are read (default `process.env`). */
  readonly env?: NodeJS.ProcessEnv;
}

/** After `close()` starts, connections still open this long past the call timeout are cut (slow bodies, keep-alive). */
const SHUTDOWN_SLACK_MS = 1_000;

export interface RunningRelay {
  readonly url: string;
  readonly app: FastifyInstance;
  readonly simulator: Simulator | null;
  /** Stop accepting, let in-flight calls finish or time out and record them, then close the ledger. */
  close(): Promise<void>;
}

/**
 * `guidgate serve`: the composition root. Opens the ledger, starts the account system's client (and the bundled
 * simulator when no URL is given), the metrics, the breaker and the HTTP app; sweeps orphans at start and then
 * every min(--timeout, --grace); settles in the background; reloads the keys on SIGHUP; listens.
 */
export async function serve(opts: ServeOptions): Promise<RunningRelay> {
  const out = opts.out ?? ((line: string) => process.stdout.write(`${line}\n`));
  const ledger = await openServedLedger(opts, out);
  if (opts.requireSyncStandby === true && ledger.store.durability === undefined) {
    await ledger.store.close();
    throw new Error('--require-sync-standby needs a PostgreSQL ledger (--db postgres://…)');
  }
  // With --require-sync-standby, claims and the ping refused while the durability report finds no synchronous standby.
  let durability: DurabilityWatch | null = null;
  const base = opts.requireSyncStandby === true ? gatedStore(ledger.store, () => (durability === null ? 'the durability report is not read yet' : durability.refusal())) : ledger.store;
  const { url: accountUrl, simulator } = await accountSystemUrl(opts, out);
  const metrics = createMetrics(base, Date.now, {
    maxAttempts: opts.maxAttempts,
    processMetrics: true,
    blackHoleDeadLetters: async () => (await orThrow(readBlackHoleDeadLetters(base, { maxAttempts: opts.maxAttempts }))).guids,
    build: { version: packageVersion(), store: storeKind(opts.db) },
  });
  // Spans exported only when an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT); the trace context is passed on always.
  const tracing = startTracing({ ...(opts.env === undefined ? {} : { env: opts.env }), onLoss: (why, n) => metrics.spansDropped(why, n) });
  const account = createAccountClient({
    baseUrl: accountUrl, timeoutMs: opts.timeoutMs, tracing, ...(opts.accountCa === undefined ? {} : { ca: opts.accountCa }),
    // One inquiry budget for the process: the settler, the operator API and every channel's request share it.
    inquiryPacing: inquiryPacing(opts.inquiryRate ?? DEFAULTS.inquiryRate, { forChannels: true, onDeferred: () => metrics.inquiryDeferred() }),
  });
  // The continuity guard (CONTRACT.md §9) watches the ledger for going back; everything writes through its store.
  // Said on `out` until the app's log exists (a going back seen at start), then in the app's log.
  const early = (line: Record<string, unknown>, message: string): void => out(`${message} ${JSON.stringify(line)}`);
  let currentLog: ContinuityLog = { warn: early, error: early };
  const guarded = await startContinuityGuard(base, { warn: (l, m) => currentLog.warn(l, m), error: (l, m) => currentLog.error(l, m) }, metrics, { windowMs: opts.continuityWindowMs ?? DEFAULTS.continuityWindowMs });
  if (E.isLeft(guarded)) {
    await ledger.store.close();
    await simulator?.close();
    throw guarded.left;
  }
  const continuity = guarded.right;
  // The resends waiting for an outcome (Prefer: wait): every write of this process that settles a row wakes them;
  // what another process records, they read (outcomeWaiters.ts).
  const waiters = createOutcomeWaiters({ store: continuity.store, maxWaiters: opts.maxWaiters ?? DEFAULTS.maxWaiters });
  const store = watchOutcomes(continuity.store, waiters);
  const minAgeMs = opts.minAgeMs ?? DEFAULTS.minAgeMs;
  const breaker = createBreaker({ failures: opts.breakerFailures ?? DEFAULTS.breakerFailures, cooldownMs: opts.breakerCooldownMs ?? DEFAULTS.breakerCooldownMs, clock: Date.now, metrics, log: { warn: (l, m) => currentLog.warn(l, m) } });
  const app = buildApp({
    store,
    account,
    metrics,
    timeoutMs: opts.timeoutMs,
    maxAttempts: opts.maxAttempts,
    minAgeMs,
    graceMs: opts.graceMs,
    breaker,
    continuity,
    tracing,
    waiters,
    commandLine: { db: opts.db, accountUrl },
    logger: { level: opts.logLevel },
    ...(opts.keys === undefined ? {} : { keys: opts.keys.keys }),
    ...(opts.tls === undefined ? {} : { https: httpsOptions(opts.tls) }),
    ...(opts.bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs: opts.bodyTimeoutMs }),
    ...(opts.maxConnections === undefined ? {} : { maxConnections: opts.maxConnections }),
    ...(opts.maxConnectionsPerAddress === undefined ? {} : { maxConnectionsPerAddress: opts.maxConnectionsPerAddress }),
  });
  const stopReloadingKeys = reloadKeysOnSighup(opts.keys, app.log);
  ledger.logLossTo(app.log);
  durability = await watchDurability(ledger.store, {
    require: opts.requireSyncStandby === true,
    report: (r) => metrics.pgSynchronousStandbys(r === null ? null : r.synchronousStandbys),
    warn: (message, r) => app.log.warn({ durability: r }, message),
    error: (message) => app.log.error(message),
  });
  currentLog = app.log;
  // Before listening: a ledger the journal shows gone back opens the window before any first send.
  const witness = await judgeByJournal(opts.journalWitness ?? DEFAULTS.journalWitness, {
    store: base, accountUrl, marginMs: opts.timeoutMs + opts.graceMs, log: app.log, timeoutMs: opts.timeoutMs,
    wentBack: (why, seen) => continuity.wentBackBy(why, seen), failed: () => metrics.journalWitnessFailure(),
  });

  // At start: rows a previous process left in RECEIVED or SENT. Then at least once per timeout.
  const sweeper = await startSweeper(store, { graceMs: opts.graceMs, everyMs: Math.max(250, Math.min(opts.timeoutMs, opts.graceMs)) }, app.log);
  const settleEveryMs = opts.settleEveryMs ?? DEFAULTS.settleEveryMs;
  const settler = settleEveryMs > 0
    ? startSettler(
        { store, account, metrics, tracing, clock: Date.now, log: (summary) => app.log[summary.ledgerErrors > 0 ? 'warn' : 'info']({ ...summary }, 'settled in the background') },
        { everyMs: settleEveryMs, minAgeMs, graceMs: opts.graceMs, concurrency: DEFAULTS.concurrency, maxAttempts: opts.maxAttempts },
      )
    : null;

  const notifier = opts.notify === undefined
    ? null
    : startNotifier(store, {
        ...opts.notify,
        holder: `${hostname()}:${process.pid}:notify`,
        onOutcome: (o) => {
          metrics.notificationAttempt(o.result);
          const line = { guid: o.guid, webhookId: `${o.guid}:${o.seq}`, result: o.result, httpStatus: o.httpStatus, detail: o.detail };
          if (o.result === 'given_up') app.log.error(line, 'notification given up');
          else if (o.result === 'failed') app.log.warn(line, 'notification not delivered; tried again later');
          else app.log.debug(line, 'notification delivered');
        },
        onStoreError: (message) => app.log.warn({ error: message }, 'notifications: the outbox could not be read or written; tried again later'),
      });

  const url = await listen(app, opts);
  out(`listening on ${url}`);
  out(`  console: ${url}/console/${opts.keys === undefined ? '' : ' (sign in with a key of scopes read,admin)'}`);
  out(`  metrics: ${url}/metrics${opts.keys === undefined ? '' : ' (a key of scope read)'}`);
  out(`  ${witness}`);
  // Under systemd (Type=notify): READY=1 once /healthz would say ok, the watchdog's pings, STOPPING=1.
  const systemd = notifySystemd({ env: opts.env ?? process.env, readiness: storeReadiness(store), readyStatus: `listening on ${url}`, log: app.log });
  const close = shutdown(app, opts.timeoutMs, {
    async stopWork() {
      await systemd?.stopping();
      sweeper.stop();
      stopReloadingKeys();
      durability?.stop();
      await settler?.stop();
      await notifier?.stop();
    },
    async release() {
      await account.close();
      // The last position recorded beside the ledger (SQLite) once nothing writes any more.
      await continuity.stop();
      await store.close();
      await simulator?.close();
      await tracing.shutdown();
    },
  });
  return { url, app, simulator, close };
}

/** Said once if the background checkpoints' thread fails (src/store/sqlite/checkpointer.ts). */
const CHECKPOINTS_STOPPED = 'background WAL checkpoints stopped; commits checkpoint the WAL themselves again, every 1,000 pages';

/**
 * The ledger file (CONTRACT.md §4): checked first if asked, opened with the send window as its claims' deadline,
 * a warning when others may read it, watched for replacement. Its loss is said on `out` until `logLossTo` is given
 * the app's log.
 */
async function openServedLedger(opts: ServeOptions, out: (line: string) => void): Promise<{ store: EventStore; logLossTo(log: FastifyBaseLogger): void }> {
  if (opts.check === true && existsSync(opts.db)) {
    const checked = checkLedger(opts.db);
    if (!checked.ok) throw new Error(`ledger check failed: ${checked.problems.join('; ')}`);
    out(`ledger check: ${opts.db} is sound (quick_check ${checked.quickCheckMs} ms)`);
  }
  let ledgerLost = (reason: string): void => out(reason);
  let checkpointsStopped = (reason: string): void => out(`warning: ${CHECKPOINTS_STOPPED}: ${reason}`);
  // PostgreSQL: which host takes the writes, and when none does (once per outage, naming every host tried).
  let hostEvent = (e: HostEvent): void => out(hostLine(e));
  // Inline: commits on this thread (no copy of each unit to another thread and back), their fsync off the event loop.
  // A claim either commits within the send window, and is called, or fails E503 with nothing written (sendWindow.ts).
  const store = await openStore(opts.db, {
    synchronous: opts.synchronous, busyTimeoutMs: opts.busyTimeoutMs, claimDeadlineMs: sendWindowMs(opts.graceMs), writer: opts.writer ?? DEFAULTS.writer,
    backgroundCheckpoints: { onStopped: (reason) => checkpointsStopped(reason) },
    watchFile: { onLost: (reason) => ledgerLost(reason) }, actor: processActor('serve'), onHosts: (e) => hostEvent(e), continuityDir: opts.continuityDir,
  });
  const loose = ledgerWarning(opts.db);
  if (loose !== null) out(`warning: ${loose}`);
  const marks = continuityWarning(opts.db, opts.continuityDir);
  if (marks !== null) out(`warning: ${marks}`);
  return {
    store,
    logLossTo(log) {
      ledgerLost = (reason) => log.error({ reason }, 'ledger file lost: every new transfer gets E503 until serve is restarted on the right file');
      checkpointsStopped = (reason) => log.warn({ reason }, CHECKPOINTS_STOPPED);
      hostEvent = (e) => {
        if (e.kind === 'none') log.error({ tried: e.tried }, hostLine(e));
        else if (e.previous === null) log.info({ host: e.host }, hostLine(e));
        else log.warn({ host: e.host, previous: e.previous }, hostLine(e));
      };
    },
  };
}

/** A host event (src/store/postgres/hosts.ts) as one line. */
function hostLine(e: HostEvent): string {
  if (e.kind === 'none') return `${e.tried}: every new transfer gets E503 until a listed host takes writes`;
  if (e.previous === null) return `PostgreSQL: writing to ${e.host}`;
  return e.previous === e.host ? `PostgreSQL: ${e.host} takes writes again` : `PostgreSQL: the primary changed from ${e.previous} to ${e.host}; writing there`;
}

/**
 * `--account-url`, or the bundled simulator started on loopback when none is given (it is said on `out`, with its
 * fault URL): on `guidgate simulator`'s default port, 8090, so that the docs' fault examples work on `npm start`,
 * or on a free port when 8090 is taken.
 */
async function accountSystemUrl(opts: ServeOptions, out: (line: string) => void): Promise<{ url: string; simulator: Simulator | null }> {
  if (opts.accountUrl !== undefined && opts.accountUrl !== '') return { url: opts.accountUrl, simulator: null };
  const host = '127.0.0.1';
  const simulator = await startSimulator({ port: DEFAULTS.simulatorPort, host }).catch((err: unknown) => {
    if ((err as { code?: unknown }).code !== 'EADDRINUSE') throw err;
    return startSimulator({ port: 0, host });
  });
  out(`no --account-url given: started the bundled account simulator at ${simulator.url} (it is not idempotent; see /stats)`);
  out(`  inject faults: curl -s -X POST ${simulator.url}/control/faults -d '{"mode":"hold"}'   (back to normal: curl -s -X DELETE ${simulator.url}/control/faults)`);
  return { url: simulator.url, simulator };
}

/** `kill -HUP`: the keys file read again; a file that does not parse leaves the old keys in force. Returns the undo. */
function reloadKeysOnSighup(keys: KeyRing | undefined, log: FastifyBaseLogger): () => void {
  // Without --keys a SIGHUP is still caught: Node's default for it ends the process, and an operator following the
  // docs (`keys add`, then `kill -HUP`, or `systemctl reload`) must not take the relay down.
  const reload = keys === undefined
    ? (): void => log.warn('SIGHUP: no keys file to reload (serve runs without --keys); nothing changed')
    : (): void => {
        const reloaded = keys.reload();
        if (E.isLeft(reloaded)) log.error({ keys: keys.path, reason: reloaded.left.message }, 'SIGHUP: keys file refused; the old keys stay in force');
        else log.warn({ keys: keys.path, count: reloaded.right }, 'SIGHUP: keys reloaded');
      };
  process.on('SIGHUP', reload);
  return () => void process.off('SIGHUP', reload);
}

/** Listens; the URL it answers on (the port the system gave for port 0; an IPv6 host in brackets). */
async function listen(app: FastifyInstance, opts: Pick<ServeOptions, 'port' | 'host' | 'tls'>): Promise<string> {
  await app.listen({ port: opts.port, host: opts.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : opts.port;
  const hostForUrl = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  return `${opts.tls === undefined ? 'http' : 'https'}://${hostForUrl}:${port}`;
}

/**
 * The shutdown sequence, run once however often it is asked for: `stopWork` (no new sweep, settle run or key
 * reload; the settle run in flight finishes), then the app stops accepting and lets the calls in flight finish and
 * be recorded (idle connections closed as they become idle, every connection cut one second past the call
 * timeout), then `release` (the account client, the ledger, the simulator).
 */
function shutdown(app: FastifyInstance, timeoutMs: number, steps: { stopWork(): Promise<void>; release(): Promise<void> }): () => Promise<void> {
  let closed: Promise<void> | null = null;
  let shuttingDown = false;
  // Ahead of fastify's own listener: once it is closing, fastify answers 503 at once, and a header set after that
  // would throw (ERR_HTTP_HEADERS_SENT) out of the server's 'request' event and end the process mid-shutdown.
  app.server.prependListener('request', (_req, res) => {
    if (shuttingDown && !res.headersSent) res.setHeader('connection', 'close');
  });
  return () => {
    closed ??= (async () => {
      shuttingDown = true;
      await steps.stopWork();
      // Connections busy now become idle once their call is recorded and answered; close them then,
      // so keep-alive channels cannot hold the shutdown open.
      const idleCloser = setInterval(() => app.server.closeIdleConnections(), 100);
      // Every call in flight has answered or timed out by the call timeout; whoever still holds a connection
      // then (a body that never ends, a client that never reads) cannot keep the process alive past it.
      const cutoff = setTimeout(() => app.server.closeAllConnections(), timeoutMs + SHUTDOWN_SLACK_MS);
      try {
        await app.close();
      } finally {
        clearInterval(idleCloser);
        clearTimeout(cutoff);
      }
      await steps.release();
    })();
    return closed;
  };
}

function httpsOptions(tls: NonNullable<ServeOptions['tls']>): import('node:https').ServerOptions {
  const { cert, key, clientCa } = tls;
  return clientCa === undefined ? { cert, key } : { cert, key, ca: clientCa, requestCert: true, rejectUnauthorized: true };
}
