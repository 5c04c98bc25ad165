import type { FastifyInstance } from 'fastify';
import { openStore } from '../store/openStore.js';
import type { Synchronous } from '../store/openStore.js';
import { DEFAULT_MIN_AGE_MS } from '../events/decide.js';
import { createAccountClient } from '../relay/accountClient.js';
import { buildApp } from '../relay/app.js';
import { createBreaker } from '../relay/breaker.js';
import { createMetrics } from '../relay/metrics.js';
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
  readonly logLevel: string;
  /** Where ledger commits run: `thread` (default) keeps their fsync off the request loop. */
  readonly writer?: 'inline' | 'thread';
  readonly out?: (line: string) => void;
}

export interface RunningRelay {
  readonly url: string;
  readonly app: FastifyInstance;
  readonly simulator: Simulator | null;
  /** Stop accepting, let in-flight calls finish or time out and record them, then close the ledger. */
  close(): Promise<void>;
}

export async function serve(opts: ServeOptions): Promise<RunningRelay> {
  const out = opts.out ?? ((line: string) => process.stdout.write(`${line}\n`));
  // The writer thread keeps commits (fsync) off the event loop that parses and answers requests.
  const store = await openStore(opts.db, { synchronous: opts.synchronous, busyTimeoutMs: opts.busyTimeoutMs, writer: opts.writer ?? 'thread' });

  let simulator: Simulator | null = null;
  let accountUrl = opts.accountUrl;
  if (accountUrl === undefined || accountUrl === '') {
    simulator = await startSimulator({ port: 0, host: '127.0.0.1' });
    accountUrl = simulator.url;
    out(`no --account-url given: started the bundled account simulator at ${simulator.url} (it is not idempotent; see /stats)`);
  }

  const account = createAccountClient({ baseUrl: accountUrl, timeoutMs: opts.timeoutMs });
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
    breaker,
    logger: { level: opts.logLevel },
  });

  const sweep = async (): Promise<void> => {
    try {
      const s = await sweepOrphans(store, opts.graceMs, Date.now());
      if (s.neverSent + s.orphaned > 0) app.log.warn({ ...s }, 'swept orphaned rows');
    } catch (err) {
      app.log.error({ err }, 'orphan sweep failed');
    }
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
  const url = `http://${hostForUrl}:${port}`;
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
        shuttingDown = true;
        await settler?.stop();
        // Connections busy now become idle once their call is recorded and answered; close them then,
        // so keep-alive channels cannot hold the shutdown open.
        const idleCloser = setInterval(() => app.server.closeIdleConnections(), 100);
        try {
          await app.close();
        } finally {
          clearInterval(idleCloser);
        }
        await account.close();
        await store.close();
        await simulator?.close();
      })();
      return closing;
    },
  };
}
