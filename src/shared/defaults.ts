const DAY_MS = 86_400_000;

/**
 * Every default of guidgate's flags and options, written once. The command line's flags (src/cli), serve's wiring
 * (src/wiring/serve.ts), buildApp (src/relay/app.ts), the commands (src/commands) and the send path (src/send) and the domain's resend
 * rule read them here; docs/operating.md's flag tables show them (test/unit/defaults.unit.spec.ts compares the two).
 * Why each value: docs/operating.md, at its flag.
 */
export const DEFAULTS = {
  // ---- serve: where it listens, where its ledger and its keys are ----
  port: 8080,
  host: '127.0.0.1',
  db: './data/guidgate.db',
  keysFile: './data/keys',
  logLevel: 'info',
  // ---- calling the account system (serve, resolve, reprocess) ----
  /** One call's overall deadline (an inquiry's too). */
  timeoutMs: 3000,
  /** How long past its timeout a SENT row waits before the sweep takes it over; half of it is the send window. */
  graceMs: 5000,
  maxAttempts: 5,
  /** How old a row's last Sent must be before an inquiry is believed (and a row FAILED by one is sent again). */
  minAgeMs: 60_000,
  /** How long after the ledger went back every GUID it does not know is inquired about before its first send (0: off). */
  continuityWindowMs: 3_600_000,
  /** What the account system's journal may say about the ledger at start (`off`, `exclusive`, `shared`). */
  journalWitness: 'off' as 'off' | 'exclusive' | 'shared',
  /** Inquiries one process makes at most, every source together (`0`: no cap). */
  inquiryRate: '50/s',
  breakerFailures: 20,
  breakerCooldownMs: 5000,
  // ---- settling ----
  settleEveryMs: 10_000,
  /** Inquiries or sends in flight at once (resolve, reprocess, serve's settler). */
  concurrency: 8,
  // ---- notifications (serve --notify-url) ----
  /** One delivery attempt's deadline. */
  notifyTimeoutMs: 5000,
  /** How long a notification is tried before it is given up. */
  notifyForMs: 3 * DAY_MS,
  // ---- the ledger ----
  synchronous: 'FULL',
  writer: 'inline',
  busyTimeoutMs: 5000,
  retentionMs: 7 * DAY_MS,
  tombstoneRetentionMs: 90 * DAY_MS,
  // ---- the HTTP server ----
  bodyTimeoutMs: 10_000,
  maxConnections: 1024,
  maxConnectionsPerAddress: 256,
  /** Channel requests waiting for an outcome (`Prefer: wait`) at once, in one process; any more get E903 at once. */
  maxWaiters: 1000,
  /** Rows per page of the operator API's GET /v1/ledger. */
  ledgerPageRows: 50,
  // ---- reconcile ----
  /** A transfer sent this close to `--to` may be posted after it: not yet a break (CONTRACT.md §8's synopsis). */
  reconcilePendingMs: 3_600_000,
  /** The whole journal read over HTTP within this, or the run fails. */
  reconcileJournalTimeoutMs: 15 * 60_000,
  /** Breaks one run keeps (in memory, then in the ledger) at most; past it the run stops, nothing recorded. */
  reconcileMaxBreaks: 100_000,
  // ---- the other commands ----
  naivePort: 8081,
  simulatorPort: 8090,
  simulatorLatencyMs: 0,
  demoTransfers: 200,
  demoConcurrency: 20,
} as const;
