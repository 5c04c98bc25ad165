import { existsSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { checkLedger, ledgerWarning, openStore, processActor } from '../store/openStore.js';
import type { Synchronous } from '../store/openStore.js';
import * as E from 'fp-ts/lib/Either.js';
import { DEFAULT_MIN_AGE_MS } from '../events/decide.js';
import { createAccountClient } from '../relay/accountClient.js';
import { buildApp } from '../relay/app.js';
import type { KeyRing } from '../relay/auth/keyRing.js';
import { createBreaker } from '../relay/breaker.js';
import { createMetrics } from '../relay/metrics.js';
import { sendWindowMs } from '../relay/sendWindow.js';
import { sweepOrphans } from '../relay/sweepOrphans.js';
import { startSimulator, type Simulator } from '../simulator/index.js';
import { startSettler } from './settler.js';

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

export async function serve(opts: ServeOptions): Promise<RunningRelay> {
  const out = opts.out ?? ((line: string) => process.stdout.write(`${line}\n`));
  // ---- the ledger file (CONTRACT.md §4): checked if asked, private, watched for replacement ----
  if (opts.check === true && existsSync(opts.db)) {
    const checked = checkLedger(opts.db);
    if (!checked.ok) throw new Error(`ledger check failed: ${checked.problems.join('; ')}`);
    out(`ledger check: ${opts.db} is sound (quick_check ${checked.quickCheckMs} ms)`);
  }
  let ledgerLost = (reason: string): void => out(reason);
  // Inline: commits on this thread (no copy of each unit to another thread and back), their fsync off the event loop.
  // A claim either commits within the send window, and is called, or fails E503 with nothing written (sendWindow.ts).
  const store = await openStore(opts.db, {
    synchronous: opts.synchronous, busyTimeoutMs: opts.busyTimeoutMs, claimDeadlineMs: sendWindowMs(opts.graceMs), writer: opts.writer ?? 'inline',
    watchFile: { onLost: (reason) => ledgerLost(reason) }, actor: processActor('serve'),
  });
  const loose = ledgerWarning(opts.db);
  if (loose !== null) out(`warning: ${loose}`);

  let simulator: Simulator | null = null;
  let accountUrl = opts.accountUrl;
  if (accountUrl === undefined || accountUrl === '') {
    simulator = await startSimulator({ port: 0, host: '127.0.0.1' });
    accountUrl = simulator.url;
    out(`no --account-url given: started the bundled account simulator at ${simulator.url} (it is not idempotent; see /stats)`);
  }

  const account = createAccountClient({ baseUrl: accountUrl, timeoutMs: opts.timeoutMs, ...(opts.accountCa === undefined ? {} : { ca: opts.accountCa }) });
  const metrics = createMetrics(store, Date.now, { maxAttempts: opts.maxAttempts });
  const minAgeMs = opts.minAgeMs ?? DEFAULT_MIN_AGE_MS;
  const breaker = createBreaker({ failures: opts.breakerFailures ?? 20, cooldownMs: opts.breakerCooldownMs ?? 5000, clock: Date.now, metrics });
  const app = buildApp({
    store,
    account,
    metrics,
    timeoutMs: opts.timeoutMs,
    maxAttempts: opts.maxAttempts,
    minAgeMs,
    graceMs: opts.graceMs,
    breaker,
    logger: { level: opts.logLevel },
    ...(opts.keys === undefined ? {} : { keys: opts.keys.keys }),
    ...(opts.tls === undefined ? {} : { https: httpsOptions(opts.tls) }),
    ...(opts.bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs: opts.bodyTimeoutMs }),
    ...(opts.maxConnections === undefined ? {} : { maxConnections: opts.maxConnections }),
    ...(opts.maxConnectionsPerAddress === undefined ? {} : { maxConnectionsPerAddress: opts.maxConnectionsPerAddress }),
  });
  const reloadKeys = (): void => {
    if (opts.keys === undefined) return;
    const reloaded = opts.keys.reload();
    if (E.isLeft(reloaded)) app.log.error({ keys: opts.keys.path, reason: reloaded.left.message }, 'SIGHUP: keys file refused; the old keys stay in force');
    else app.log.warn({ keys: opts.keys.path, count: reloaded.right }, 'SIGHUP: keys reloaded');
  };
  if (opts.keys !== undefined) process.on('SIGHUP', reloadKeys);

  ledgerLost = (reason) => app.log.error({ reason }, 'ledger file lost: every new transfer gets E503 until serve is restarted on the right file');

  const sweep = async (): Promise<void> => {
    const now = await store.now();
    const swept = E.isLeft(now) ? now : await sweepOrphans(store, opts.graceMs, now.right);
    if (E.isLeft(swept)) app.log.error({ error: swept.left.code, cause: swept.left.message }, 'orphan sweep failed');
    else if (swept.right.neverSent + swept.right.orphaned > 0) app.log.warn({ ...swept.right }, 'swept orphaned rows');
  };
  // At start: rows a previous process left in RECEIVED or SENT. Then at least once per timeout.
  await sweep();
  let sweeping = false;
  const timer = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    void sweep().finally(() => (sweeping = false));
  }, Math.max(250, Math.min(opts.timeoutMs, opts.graceMs)));
  timer.unref();
  const settleEveryMs = opts.settleEveryMs ?? 10_000;
  const settler = settleEveryMs > 0
    ? startSettler(
        { store, account, metrics, clock: Date.now, log: (summary) => app.log.info({ ...summary }, 'settled in the background') },
        { everyMs: settleEveryMs, minAgeMs, graceMs: opts.graceMs, concurrency: 8 },
      )
    : null;

  await app.listen({ port: opts.port, host: opts.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : opts.port;
  const hostForUrl = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  const url = `${opts.tls === undefined ? 'http' : 'https'}://${hostForUrl}:${port}`;
  out(`listening on ${url}`);

  let closing: Promise<void> | null = null;
  let shuttingDown = false;
  app.server.on('request', (_req, res) => {
    if (shuttingDown) res.setHeader('connection', 'close');
  });
  return {
    url,
    app,
    simulator,
    close() {
      closing ??= (async () => {
        clearInterval(timer);
        process.off('SIGHUP', reloadKeys);
        shuttingDown = true;
        await settler?.stop();
        // Connections busy now become idle once their call is recorded and answered; close them then,
        // so keep-alive channels cannot hold the shutdown open.
        const idleCloser = setInterval(() => app.server.closeIdleConnections(), 100);
        // Every call in flight has answered or timed out by the call timeout; whoever still holds a connection
        // then (a body that never ends, a client that never reads) cannot keep the process alive past it.
        const cutoff = setTimeout(() => app.server.closeAllConnections(), opts.timeoutMs + SHUTDOWN_SLACK_MS);
        try {
          await app.close();
        } finally {
          clearInterval(idleCloser);
          clearTimeout(cutoff);
        }
        await account.close();
        await store.close();
        await simulator?.close();
      })();
      return closing;
    },
  };
}

function httpsOptions(tls: NonNullable<ServeOptions['tls']>): import('node:https').ServerOptions {
  const { cert, key, clientCa } = tls;
  return clientCa === undefined ? { cert, key } : { cert, key, ca: clientCa, requestCert: true, rejectUnauthorized: true };
}
