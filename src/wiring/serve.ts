import { existsSync } from 'node:fs';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { checkLedger, ledgerWarning, openStore, processActor } from '../store/openStore.js';
import type { Synchronous } from '../store/openStore.js';
import type { EventStore } from '../events/store.js';
import * as E from 'fp-ts/lib/Either.js';
import { createAccountClient } from '../account/accountClient.js';
import { buildApp } from '../relay/app.js';
import type { KeyRing } from '../relay/auth/keyRing.js';
import { createBreaker } from '../relay/breaker.js';
import { createMetrics } from '../telemetry/metrics.js';
import { sendWindowMs } from '../settle/sendWindow.js';
import { startSweeper } from '../settle/sweeper.js';
import { startSimulator, type Simulator } from '../simulator/index.js';
import { DEFAULTS } from '../shared/defaults.js';
import { startSettler } from '../settle/settler.js';
import { startTracing } from '../telemetry/tracing.js';

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
  /** Calls in a row that ended FAILED or UNKNOWN before the breaker opens (0: off). */
  readonly breakerFailures?: number;
  readonly breakerCooldownMs?: number;
  readonly synchronous: Synchronous;
  readonly busyTimeoutMs: number;
  /** A request body not received in full within this gets 408 (E400); nothing is stored (CONTRACT.md §2 v2). */
  readonly bodyTimeoutMs?: number | undefined;
  /** Connections held at most (CONTRACT.md §2 v2). */
  readonly maxConnections?: number | undefined;
  /** Connections held at most from one address (an IPv6 /64). */
  readonly maxConnectionsPerAddress?: number | undefined;
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
  const { store } = ledger;
  const { url: accountUrl, simulator } = await accountSystemUrl(opts, out);
  const metrics = createMetrics(store, Date.now, { maxAttempts: opts.maxAttempts });
  // Spans exported only when an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT); the trace context is passed on always.
  const tracing = startTracing({ ...(opts.env === undefined ? {} : { env: opts.env }), onLoss: (why, n) => metrics.spansDropped(why, n) });
  const account = createAccountClient({ baseUrl: accountUrl, timeoutMs: opts.timeoutMs, tracing, ...(opts.accountCa === undefined ? {} : { ca: opts.accountCa }) });
  const minAgeMs = opts.minAgeMs ?? DEFAULTS.minAgeMs;
  const breaker = createBreaker({ failures: opts.breakerFailures ?? DEFAULTS.breakerFailures, cooldownMs: opts.breakerCooldownMs ?? DEFAULTS.breakerCooldownMs, clock: Date.now, metrics });
  const app = buildApp({
    store,
    account,
    metrics,
    timeoutMs: opts.timeoutMs,
    maxAttempts: opts.maxAttempts,
    minAgeMs,
    graceMs: opts.graceMs,
    breaker,
    tracing,
    logger: { level: opts.logLevel },
    ...(opts.keys === undefined ? {} : { keys: opts.keys.keys }),
    ...(opts.tls === undefined ? {} : { https: httpsOptions(opts.tls) }),
    ...(opts.bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs: opts.bodyTimeoutMs }),
    ...(opts.maxConnections === undefined ? {} : { maxConnections: opts.maxConnections }),
    ...(opts.maxConnectionsPerAddress === undefined ? {} : { maxConnectionsPerAddress: opts.maxConnectionsPerAddress }),
  });
  const stopReloadingKeys = reloadKeysOnSighup(opts.keys, app.log);
  ledger.logLossTo(app.log);

  // At start: rows a previous process left in RECEIVED or SENT. Then at least once per timeout.
  const sweeper = await startSweeper(store, { graceMs: opts.graceMs, everyMs: Math.max(250, Math.min(opts.timeoutMs, opts.graceMs)) }, app.log);
  const settleEveryMs = opts.settleEveryMs ?? DEFAULTS.settleEveryMs;
  const settler = settleEveryMs > 0
    ? startSettler(
        { store, account, metrics, tracing, clock: Date.now, log: (summary) => app.log.info({ ...summary }, 'settled in the background') },
        { everyMs: settleEveryMs, minAgeMs, graceMs: opts.graceMs, concurrency: DEFAULTS.concurrency },
      )
    : null;

  const url = await listen(app, opts);
  out(`listening on ${url}`);
  const close = shutdown(app, opts.timeoutMs, {
    async stopWork() {
      sweeper.stop();
      stopReloadingKeys();
      await settler?.stop();
    },
    async release() {
      await account.close();
      await store.close();
      await simulator?.close();
      await tracing.shutdown();
    },
  });
  return { url, app, simulator, close };
}

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
  // Inline: commits on this thread (no copy of each unit to another thread and back), their fsync off the event loop.
  // A claim either commits within the send window, and is called, or fails E503 with nothing written (sendWindow.ts).
  const store = await openStore(opts.db, {
    synchronous: opts.synchronous, busyTimeoutMs: opts.busyTimeoutMs, claimDeadlineMs: sendWindowMs(opts.graceMs), writer: opts.writer ?? DEFAULTS.writer,
    watchFile: { onLost: (reason) => ledgerLost(reason) }, actor: processActor('serve'),
  });
  const loose = ledgerWarning(opts.db);
  if (loose !== null) out(`warning: ${loose}`);
  return {
    store,
    logLossTo(log) {
      ledgerLost = (reason) => log.error({ reason }, 'ledger file lost: every new transfer gets E503 until serve is restarted on the right file');
    },
  };
}

/** `--account-url`, or the bundled simulator started on loopback when none is given (it is said on `out`). */
async function accountSystemUrl(opts: ServeOptions, out: (line: string) => void): Promise<{ url: string; simulator: Simulator | null }> {
  if (opts.accountUrl !== undefined && opts.accountUrl !== '') return { url: opts.accountUrl, simulator: null };
  const simulator = await startSimulator({ port: 0, host: '127.0.0.1' });
  out(`no --account-url given: started the bundled account simulator at ${simulator.url} (it is not idempotent; see /stats)`);
  return { url: simulator.url, simulator };
}

/** `kill -HUP`: the keys file read again; a file that does not parse leaves the old keys in force. Returns the undo. */
function reloadKeysOnSighup(keys: KeyRing | undefined, log: FastifyBaseLogger): () => void {
  if (keys === undefined) return () => undefined;
  const reload = (): void => {
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
  app.server.on('request', (_req, res) => {
    if (shuttingDown) res.setHeader('connection', 'close');
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
