import { existsSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { openSqliteStore, type Synchronous } from '../events/sqlite/sqliteStore.js';
import { looseModeWarning } from '../events/sqlite/ledgerFile.js';
import { checkLedger } from './check.js';
import { createAccountClient } from '../relay/accountClient.js';
import { buildApp } from '../relay/app.js';
import { createMetrics } from '../relay/metrics.js';
import { sweepOrphans } from '../relay/sweepOrphans.js';
import { startSimulator, type Simulator } from '../simulator/index.js';

export interface ServeOptions {
  readonly port: number;
  readonly host: string;
  readonly db: string;
  readonly accountUrl?: string | undefined;
  readonly timeoutMs: number;
  readonly graceMs: number;
  readonly maxAttempts: number;
  readonly synchronous: Synchronous;
  readonly busyTimeoutMs: number;
  readonly logLevel: string;
  /** Where ledger commits run: `thread` (default) keeps their fsync off the request loop. */
  readonly writer?: 'inline' | 'thread';
  readonly out?: (line: string) => void;
  /** Run `guidgate check` (quick_check over every page) before opening the ledger; refuse to start if it fails. */
  readonly check?: boolean;
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
  // ---- the ledger file (CONTRACT.md §4): checked if asked, private, watched for replacement ----
  if (opts.check === true && existsSync(opts.db)) {
    const checked = checkLedger(opts.db);
    if (!checked.ok) throw new Error(`ledger check failed: ${checked.problems.join('; ')}`);
    out(`ledger check: ${opts.db} is sound (quick_check ${checked.quickCheckMs} ms)`);
  }
  let ledgerLost = (reason: string): void => out(reason);
  // The writer thread keeps commits (fsync) off the event loop that parses and answers requests.
  const store = openSqliteStore({
    path: opts.db, synchronous: opts.synchronous, busyTimeoutMs: opts.busyTimeoutMs, writer: opts.writer ?? 'thread',
    watchFile: { onLost: (reason) => ledgerLost(reason) },
  });
  const loose = looseModeWarning(opts.db);
  if (loose !== null) out(`warning: ${loose}`);
  // ----

  let simulator: Simulator | null = null;
  let accountUrl = opts.accountUrl;
  if (accountUrl === undefined || accountUrl === '') {
    simulator = await startSimulator({ port: 0, host: '127.0.0.1' });
    accountUrl = simulator.url;
    out(`no --account-url given: started the bundled account simulator at ${simulator.url} (it is not idempotent; see /stats)`);
  }

  const account = createAccountClient({ baseUrl: accountUrl, timeoutMs: opts.timeoutMs });
  const metrics = createMetrics(store, Date.now);
  const app = buildApp({
    store,
    account,
    metrics,
    timeoutMs: opts.timeoutMs,
    maxAttempts: opts.maxAttempts,
    logger: { level: opts.logLevel },
  });

  ledgerLost = (reason) => app.log.error({ reason }, 'ledger file lost: every new transfer gets E503 until serve is restarted on the right file');

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
