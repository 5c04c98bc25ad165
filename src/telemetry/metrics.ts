import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type Metric } from 'prom-client';
import { STATUSES } from '../events/codecs.js';
import { deadLetterRows } from '../events/policy.js';
import type { LedgerClock, LedgerReadModel, NotificationOutbox, ReconciliationLog } from '../events/store.js';
import { CATEGORIES } from '../events/reconciliation.js';
import { orThrow } from '../events/storeResult.js';
import { createReplyWindow, type RecentReplies } from './replyWindow.js';

/** Why the relay closed a connection to keep its connection limits (the label of guidgate_connections_closed_total). */
export type ConnectionClosedReason = 'max-connections' | 'max-connections-per-address' | 'idle-for-new';
const CONNECTION_CLOSED_REASONS: readonly ConnectionClosedReason[] = ['max-connections', 'max-connections-per-address', 'idle-for-new'];

export type CallOutcome = 'definite' | 'unknown' | 'failed';
const CALL_OUTCOMES: readonly CallOutcome[] = ['definite', 'unknown', 'failed'];

export type InquiryMetricOutcome = 'processed' | 'absent' | 'unknown' | 'unreachable';
const INQUIRY_OUTCOMES: readonly InquiryMetricOutcome[] = ['processed', 'absent', 'unknown', 'unreachable'];

/**
 * Who a reply went to (the `route` label of guidgate_replies_total): `channel`, the channel API (POST /v1/transfers,
 * GET /v1/transfers/{guid}); `operator`, every other route (the operator API, /metrics, /healthz, the console's files);
 * `unmatched`, no route (an unknown path, a request Node's HTTP parser refused). An operator's or a console's E401 is
 * then no channel's.
 */
export type ReplyRoute = 'channel' | 'operator' | 'unmatched';
const REPLY_ROUTES: readonly ReplyRoute[] = ['channel', 'operator', 'unmatched'];

/** What `guidgate_build_info` says of the process: the package's version and the kind of ledger it serves. */
export interface BuildInfo {
  readonly version: string;
  readonly store: 'sqlite' | 'postgres';
}

let processRegistry: Registry | undefined;

/**
 * prom-client's process and Node.js metrics, collected once per process (each collection starts its own GC
 * observer and event-loop monitor), shared by every relay's registry in it (tests run several).
 */
function processMetrics(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/**
 * Prometheus metrics of one relay. prom-client: the standard exposition format without hand-written text. The ledger
 * gauges read `store` at scrape time, ages by the ledger's clock (`store.now()`, as every age); `clock` stamps the
 * replies' window only.
 */
/** The break categories of CONTRACT.md §8 (every category but `matched` and `pending`). */
const BREAK_CATEGORIES = CATEGORIES.filter((c) => c !== 'matched' && c !== 'pending');

export function createMetrics(store: LedgerReadModel & LedgerClock & Partial<Pick<ReconciliationLog, 'reconciliations'>> & Partial<Pick<NotificationOutbox, 'notificationCounts'>>, clock: () => number, opts: {
  readonly maxAttempts?: number;
  /** prom-client's process and Node.js metrics (a relay's /metrics; not a command's throwaway registry). */
  readonly processMetrics?: boolean;
  /**
   * The dead letters sent every time into silence (a black hole), at most 20 GUIDs, read at scrape time (serve
   * hands in commands/stats.ts's rule; rejects when the ledger cannot be read): `guidgate_dead_letter_black_hole{guid}`.
   */
  readonly blackHoleDeadLetters?: () => Promise<readonly string[]>;
  /** `guidgate_build_info{version, node, store} 1` (a relay's /metrics). */
  readonly build?: BuildInfo;
} = {}) {
  const registry = new Registry();
  // Every labelled series a rule or a dashboard may take a rate() of is there from the start, at 0: a series that
  // appears only at its first increment hides that increment from rate() and increase().
  if (opts.build !== undefined) {
    new Gauge({
      name: 'guidgate_build_info',
      help: 'Always 1: the version of guidgate, the Node.js it runs on, and the kind of ledger (sqlite, postgres)',
      labelNames: ['version', 'node', 'store'],
      registers: [registry],
    }).set({ version: opts.build.version, node: process.version, store: opts.build.store }, 1);
  }
  if (opts.processMetrics === true) for (const metric of processMetrics().getMetricsAsArray()) registry.registerMetric(metric as unknown as Metric); // the metric objects themselves (prom-client 15)
  const replies = new Counter({
    name: 'guidgate_replies_total',
    help: 'Replies, by code and route (channel: the channel API; operator: every other route; unmatched: no route)',
    labelNames: ['code', 'route'],
    registers: [registry],
  });
  const recentReplies = createReplyWindow(clock);
  const calls = new Counter({
    name: 'guidgate_account_calls_total',
    help: 'POST /transfer calls to the account system, by outcome (definite, unknown, failed)',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'guidgate_account_call_duration_seconds',
    help: 'Latency of POST /transfer calls to the account system',
    labelNames: ['outcome'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  for (const outcome of CALL_OUTCOMES) {
    calls.inc({ outcome }, 0);
    latency.zero({ outcome });
  }
  // Read from the ledger at scrape time, so they are true across processes (resolve, reprocess).
  new Gauge({
    name: 'guidgate_ledger_rows',
    help: 'Ledger rows by status',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      const summary = await orThrow(store.countByStatus());
      for (const s of STATUSES) this.set({ status: s }, summary[s].count);
    },
  });
  new Gauge({
    name: 'guidgate_oldest_row_age_seconds',
    help: 'Age of the oldest UNKNOWN and FAILED rows (since their last event); 0 when there is none',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      const summary = await orThrow(store.countByStatus());
      const now = await orThrow(store.now());
      for (const s of ['UNKNOWN', 'FAILED'] as const) {
        const oldest = summary[s].oldestUpdatedAt;
        this.set({ status: s }, oldest === null ? 0 : Math.max(0, (now - oldest) / 1000));
      }
    },
  });
  const reconciliations = store.reconciliations;
  if (reconciliations !== undefined) reconciliationGauges(registry, () => reconciliations.call(store, { limit: 1 }));
  const inquiries = new Counter({
    name: 'guidgate_inquiries_total',
    help: 'GET /transfer/{guid} inquiries, by outcome (processed, absent, unknown: answered but unusable, unreachable: no answer)',
    labelNames: ['outcome'],
    registers: [registry],
  });
  // Every outcome from the start, at 0: a rate() or an alert sees the series before the first inquiry.
  for (const outcome of INQUIRY_OUTCOMES) inquiries.inc({ outcome }, 0);
  const inquiriesDeferred = new Counter({
    name: 'guidgate_inquiries_deferred_total',
    help: 'Inquiries that could not go at once under --inquiry-rate: background work that waited its turn, and channel requests answered E901 with Retry-After, nothing sent',
    registers: [registry],
  });
  const settlementLag = new Histogram({
    name: 'guidgate_settlement_lag_seconds',
    help: 'How long a row had been UNKNOWN when an inquiry settled it (DONE or FAILED)',
    buckets: [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 14400],
    registers: [registry],
  });
  const breakerOpen = new Gauge({ name: 'guidgate_breaker_open', help: '1 while the breaker stops calls to POST /transfer, else 0', registers: [registry] });
  breakerOpen.set(0);
  const breakerTrips = new Counter({ name: 'guidgate_breaker_trips_total', help: 'Times the breaker opened (after the failures in a row, or a failed trial call)', registers: [registry] });
  const lastSettle = new Gauge({
    name: 'guidgate_settle_last_run_timestamp_seconds',
    help: 'When the background settler last finished a run (seconds since the epoch; 0 before the first or when settling is off)',
    registers: [registry],
  });
  lastSettle.set(0);
  const sendsWithheld = new Counter({
    name: 'guidgate_sends_withheld_total',
    help: 'Calls not made although their row was SENT, by reason (claim-too-slow: the claim was acknowledged after the send window, half of --grace); the sweep settles those rows',
    labelNames: ['reason'],
    registers: [registry],
  });
  sendsWithheld.inc({ reason: 'claim-too-slow' }, 0);
  const staleAnswers = new Counter({
    name: 'guidgate_stale_answers_total',
    help: 'Definite answers the row had moved past, kept as StaleAnswer events; attempt="older": an earlier attempt answered after a later one was sent (possible double application)',
    labelNames: ['attempt'],
    registers: [registry],
  });
  // Both series from the start: an alert on increase() must see the first one.
  for (const attempt of ['older', 'current']) staleAnswers.inc({ attempt }, 0);
  const recordsLost = new Counter({
    name: 'guidgate_request_records_lost_total',
    help: 'Channel request records (the audit trail) not written: the buffer bound reached, or the ledger refused the write',
    registers: [registry],
  });
  const connectionsClosed = new Counter({
    name: 'guidgate_connections_closed_total',
    help: 'Connections closed to keep --max-connections and --max-connections-per-address: a new one refused (all busy), or an idle one closed for a new one',
    labelNames: ['reason'],
    registers: [registry],
  });
  for (const reason of CONNECTION_CLOSED_REASONS) connectionsClosed.inc({ reason }, 0);
  // Only on PostgreSQL (created at the first report), so that a SQLite relay never shows "no synchronous standby".
  let syncStandbys: Gauge | null = null;
  let waiting: Gauge | null = null;
  let waitingCount = (): number => 0;
  const continuityBreaks = new Counter({
    name: 'guidgate_ledger_continuity_breaks_total',
    help: 'Times this relay saw the ledger go back (another server or timeline, its recently acknowledged events missing, a SQLite file behind its last recorded position): CONTRACT.md §9',
    registers: [registry],
  });
  continuityBreaks.inc(0);
  const witnessFailures = new Counter({
    name: 'guidgate_journal_witness_failures_total',
    help: 'Times serve could not read the account system journal at start to judge the ledger (--journal-witness): the ledger was judged without it; CONTRACT.md §9',
    registers: [registry],
  });
  witnessFailures.inc(0);
  const spansDropped = new Counter({
    name: 'guidgate_trace_spans_dropped_total',
    help: 'Spans not exported (tracing on): queue-full, the batch queue was full (a collector slower than the relay, or down); export-failed, an export to the collector failed or timed out',
    labelNames: ['reason'],
    registers: [registry],
  });
  for (const reason of ['queue-full', 'export-failed']) spansDropped.inc({ reason }, 0);
  const notifications = new Counter({
    name: 'guidgate_notifications_total',
    help: 'Notification delivery attempts by this process (serve --notify-url), by result: delivered (a 2xx), failed (tried again later), given_up (past --notify-for)',
    labelNames: ['result'],
    registers: [registry],
  });
  for (const result of ['delivered', 'failed', 'given_up']) notifications.inc({ result }, 0);
  const notificationCounts = store.notificationCounts;
  if (notificationCounts !== undefined) {
    // From the ledger's outbox at scrape time: true whichever relay delivers.
    new Gauge({
      name: 'guidgate_notifications_pending',
      help: 'Notifications recorded in the ledger and not yet delivered nor given up',
      registers: [registry],
      async collect() {
        this.set((await orThrow(notificationCounts.call(store))).pending);
      },
    });
    new Gauge({
      name: 'guidgate_notifications_oldest_pending_age_seconds',
      help: 'Age of the oldest pending notification (since it was recorded or queued again); 0 when there is none',
      registers: [registry],
      async collect() {
        const { oldestPendingAt } = await orThrow(notificationCounts.call(store));
        const now = await orThrow(store.now());
        this.set(oldestPendingAt === null ? 0 : Math.max(0, (now - oldestPendingAt) / 1000));
      },
    });
  }
  const maxAttempts = opts.maxAttempts;
  if (maxAttempts !== undefined) {
    new Gauge({
      name: 'guidgate_dead_letters',
      help: 'FAILED rows at the attempt cap: never sent again on their own, a person decides',
      registers: [registry],
      async collect() {
        this.set(await orThrow(store.countLedger(deadLetterRows(maxAttempts))));
      },
    });
  }
  const blackHoleDeadLetters = opts.blackHoleDeadLetters;
  if (blackHoleDeadLetters !== undefined) {
    new Gauge({
      name: 'guidgate_dead_letter_black_hole',
      help: 'Dead letters sent every time into silence (each send unanswered, every inquiry absent), one series per GUID with value 1; at most 20',
      labelNames: ['guid'],
      registers: [registry],
      async collect() {
        const guids = await blackHoleDeadLetters();
        this.reset();
        for (const guid of guids) this.set({ guid }, 1);
      },
    });
  }
  return {
    registry,
    inquiry(outcome: InquiryMetricOutcome): void {
      inquiries.inc({ outcome });
    },
    /** An inquiry that did not go at once under the inquiry budget. */
    inquiryDeferred(): void {
      inquiriesDeferred.inc();
    },
    /** A row that had been UNKNOWN for `ageMs` was settled by an inquiry. */
    settled(ageMs: number): void {
      settlementLag.observe(Math.max(0, ageMs) / 1000);
    },
    breaker(open: boolean): void {
      breakerOpen.set(open ? 1 : 0);
    },
    breakerTripped(): void {
      breakerTrips.inc();
    },
    settleRunFinished(at: number): void {
      lastSettle.set(at / 1000);
    },
    connectionClosed(reason: ConnectionClosedReason): void {
      connectionsClosed.inc({ reason });
    },
    /** A call not made for a row this process had moved to SENT (sendWindow.ts). */
    sendWithheld(reason: 'claim-too-slow'): void {
      sendsWithheld.inc({ reason });
    },
    /** A definite answer kept as a StaleAnswer: for an `older` attempt than the row's, or for its `current` one once settled. */
    staleAnswer(attempt: 'older' | 'current'): void {
      staleAnswers.inc({ attempt });
    },
    /** The durability report's count of synchronous standbys (CONTRACT.md §9); null: not visible, or not read (-1). */
    pgSynchronousStandbys(n: number | null): void {
      syncStandbys ??= new Gauge({
        name: 'guidgate_pg_synchronous_standbys',
        help: 'Synchronous standbys of the PostgreSQL primary (pg_stat_replication, read every minute); 0: a failover could lose acknowledged claims; -1: could not be read',
        registers: [registry],
      });
      syncStandbys.set(n ?? -1);
    },
    /** `guidgate_waiting_requests`, read at scrape time: the channel requests waiting now for an outcome (Prefer: wait). */
    waitingRequests(count: () => number): void {
      waiting ??= new Gauge({
        name: 'guidgate_waiting_requests',
        help: 'Channel requests waiting now for the outcome of a GUID in progress (Prefer: wait); at --max-waiters, any more get E903 at once',
        registers: [registry],
        collect() {
          this.set(waitingCount());
        },
      });
      waitingCount = count;
    },
    /** The continuity guard saw the ledger go back (src/send/continuityGuard.ts). */
    journalWitnessFailure(): void {
      witnessFailures.inc();
    },
    continuityBreak(): void {
      continuityBreaks.inc();
    },
    /** Spans the exporter lost (src/telemetry/tracing.ts). */
    spansDropped(reason: 'queue-full' | 'export-failed', n: number): void {
      spansDropped.inc({ reason }, n);
    },
    /** A notification delivery attempt's result (src/send/notifier.ts). */
    notificationAttempt(result: 'delivered' | 'failed' | 'given_up'): void {
      notifications.inc({ result });
    },
    requestRecordsLost(n: number): void {
      recordsLost.inc(n);
    },
    reply(code: string, route: ReplyRoute): void {
      replies.inc({ code, route });
      if (route === 'channel') recentReplies.record(code);
    },
    /** The codes replies may carry, each on every route at 0 from now on (the relay's own codes and the fixed definite ones). */
    knownReplyCodes(codes: readonly string[]): void {
      for (const code of codes) for (const route of REPLY_ROUTES) replies.inc({ code, route }, 0);
    },
    /** Replies to channels per code over the last minutes (the same replies as `guidgate_replies_total{route="channel"}`). */
    recentReplies(): RecentReplies {
      return recentReplies.recent();
    },
    call(outcome: CallOutcome, latencyMs: number): void {
      calls.inc({ outcome });
      latency.observe({ outcome }, latencyMs / 1000);
    },
  };
}
export type Metrics = ReturnType<typeof createMetrics>;

/**
 * The last recorded reconciliation run (CONTRACT.md §8), whoever recorded it, read from the ledger at scrape time.
 * Before the first run every series is 0, so the alert on the run's age stays quiet until reconciliation is set up.
 */
function reconciliationGauges(registry: Registry, lastRuns: () => ReturnType<ReconciliationLog['reconciliations']>): void {
  const lastReconciliation = async () => (await orThrow(lastRuns()))[0] ?? null;
  new Gauge({
    name: 'guidgate_reconciliation_breaks',
    help: 'Breaks found by the last recorded reconciliation run, by category (0 before the first run)',
    labelNames: ['category'],
    registers: [registry],
    async collect() {
      const run = await lastReconciliation();
      for (const category of BREAK_CATEGORIES) this.set({ category }, run?.summary.counts[category] ?? 0);
    },
  });
  new Gauge({
    name: 'guidgate_reconciliation_breaks_by_severity',
    help: 'Breaks found by the last recorded reconciliation run, by severity (P1: money moved wrongly, or a resend would move it twice)',
    labelNames: ['severity'],
    registers: [registry],
    async collect() {
      const run = await lastReconciliation();
      for (const severity of ['P1', 'P2'] as const) this.set({ severity }, run?.summary.severities[severity] ?? 0);
    },
  });
  new Gauge({
    name: 'guidgate_reconciliation_last_run_timestamp_seconds',
    help: 'When the last reconciliation run was recorded (seconds since the epoch; 0 before the first)',
    registers: [registry],
    async collect() {
      const run = await lastReconciliation();
      this.set(run === null ? 0 : run.recordedAt / 1000);
    },
  });
  new Gauge({
    name: 'guidgate_reconciliation_last_window_end_timestamp_seconds',
    help: 'The end (exclusive) of the last recorded reconciliation run\'s window (seconds since the epoch; 0 before the first)',
    registers: [registry],
    async collect() {
      const run = await lastReconciliation();
      this.set(run === null ? 0 : run.summary.window.to / 1000);
    },
  });
}

