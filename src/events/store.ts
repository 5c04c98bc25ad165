import type { EventAudit, Status, NewEvent, StoredEvent } from './codecs.js';
import type { Command, Refusal } from './decide.js';
import type { InquiryScheduled } from './inquirySchedule.js';
import type { LedgerState } from './state.js';
import type { ReconcileResult, RecordedBreak, RecordedReconciliation, RecordedRun } from './reconciliation.js';
import type { StoreResult } from './storeResult.js';
import type { DeliveryOutcome, NotificationAttempt, NotificationCounts, NotificationState, StoredNotification } from './notifications.js';

export type { StoreResult };

/**
 * The store contract, split by who uses it: the relay and the row commands write through `EventLog` and read
 * through `LedgerReadModel`; `purge` and `rebuild` use `LedgerMaintenance`; settling uses `InquirySchedule`,
 * `RowLeases` and `LedgerClock`; the relay's request recorder `RequestLog`; whoever opened the store owns its
 * `StoreLifecycle`. A store value (SQLite or PostgreSQL, as `--db` says: src/store/openStore.ts) implements them
 * all (`EventStore`); a caller asks for the narrowest one it needs. test/conformance/storeContract.ts states the
 * contract as tests, run against every store.
 *
 * Every method is async so that an async driver (PostgreSQL) can stand behind it; writes may be grouped into
 * shared transactions. Every method returns a `StoreResult` (storeResult.ts) and never rejects: failures to
 * reach, read or write the ledger are a Left holding a `StoreError` (errors.ts: a stable `code` and the
 * `cause`); everything the domain can say (lost a race, refused a transition) is in the Right.
 */

export type AppendResult =
  | { readonly won: true; readonly state: LedgerState; readonly events: readonly StoredEvent[] }
  /** Someone else moved first: `state` is the stream's state now; answer from it. */
  | { readonly won: false; readonly state: LedgerState | null };

export type ExecuteResult =
  | { readonly kind: 'applied'; readonly state: LedgerState; readonly events: readonly StoredEvent[] }
  | { readonly kind: 'refused'; readonly refusal: Refusal };

export interface LedgerQuery {
  /** Only this GUID's row (the operator API's resolve or reprocess of one GUID). */
  readonly guid?: string;
  /** Only the rows of these GUIDs (the relay's waiting requests, read together; at most a few hundred a query). */
  readonly guids?: readonly string[];
  readonly statuses?: readonly Status[];
  /** Only rows whose last event is strictly older than this time (ms since epoch). */
  readonly updatedBefore?: number;
  /** Only rows whose last Sent is at or before this time. */
  readonly sentAtOrBefore?: number;
  /** Only rows with fewer attempts than this. */
  readonly attemptsBelow?: number;
  /** Only rows with at least this many attempts (the dead-letter queue: FAILED at the cap). */
  readonly attemptsAtLeast?: number;
  /**
   * Only rows not scheduled for a later inquiry: no inquiry about their current attempt (same last Sent) was
   * recorded by `recordUnclearInquiry`, or its next inquiry is due at or before this time.
   */
  readonly inquiryDueBy?: number;
  /** Only rows created (claimed: `Claimed` and the first `Sent` are one step) at or after this time (reconciliation's window). */
  readonly createdFrom?: number;
  /** Only rows created strictly before this time. */
  readonly createdBefore?: number;
  /** Keyset paging: only guids sorting after this one. */
  readonly afterGuid?: string;
  /** The rows' order: `guid` (the default) or `updated`, the last change newest first, ties by GUID descending. */
  readonly order?: 'guid' | 'updated';
  /** Keyset paging in `updated` order: only rows after this one in it (changed before it, or at the same ms with a smaller GUID). */
  readonly beforeRow?: { readonly updatedAt: number; readonly guid: string };
  readonly limit?: number;
}

export interface StatusSummary {
  readonly count: number;
  readonly oldestUpdatedAt: number | null;
}

export interface ProjectionDifference {
  readonly guid: string;
  /** `missing`: the log has it, the ledger not; `extra`: the reverse; `differs`: columns disagree. */
  readonly kind: 'missing' | 'extra' | 'differs';
  readonly columns: readonly string[];
  readonly ledger: LedgerState | null;
  readonly rebuilt: LedgerState | null;
}

/** A `ledger` row as a store writes it: column name → value. */
export type ProjectionRow = Readonly<Record<string, string | number | null>>;

/**
 * The inline projection a store is opened with (as emmett's inline projections): the `ledger` table's columns,
 * how a state becomes a row and a row read back becomes a state, and what verify reports. The store writes it in
 * the append's transaction and never imports it: `src/store/openStore.ts` hands it over (src/projections has it).
 */
export interface LedgerProjection {
  /** The table's columns, in order. */
  readonly columns: readonly string[];
  /** A row read as its values in `columns` order (a store's raw read) as the row `rowToState` decodes. */
  rowFromValues(values: readonly unknown[]): unknown;
  stateToRow(state: LedgerState): ProjectionRow;
  /** A row read back, decoded, never cast: one that does not decode throws `LedgerCorruptError`. */
  rowToState(raw: unknown): LedgerState;
  /** The projection's rows against a fold of the log: what `rebuild --verify` reports. */
  compare(rebuilt: ReadonlyMap<string, LedgerState>, rows: readonly LedgerState[]): ProjectionDifference[];
  /**
   * The URL of the module exporting this value as `ledgerProjection`: a store that writes on another thread
   * (SQLite's writer) imports it there, since functions cannot be posted to a thread.
   */
  readonly module: string;
}

/** A GUID's row as a caller last saw it (null: there was none), handed to `execute` to spare it a read. */
export interface SeenRow {
  readonly state: LedgerState | null;
}

/** The event log: every write goes through here, each append a compare-and-set on the stream's last seq. */
export interface EventLog {
  /** Compare-and-set append: wins only if the stream's last seq is still `expectedSeq` (-1: no stream yet). */
  appendEvents(guid: string, expectedSeq: number, events: readonly NewEvent[], audit?: EventAudit): StoreResult<AppendResult>;
  /**
   * Read the state, `decide`, append: one unit of work, the state read inside the write transaction (a claim
   * is `execute(guid, Submit | Claim)`). When it appends `Purged`, the raw request and response also leave
   * the GUID's earlier events. `audit` (both here and in `appendEvents`): the key and the parameters that decided
   * the events, stored in their actor with the process part the store was opened with.
   * `seen`: the row as the caller has just read or written it (`state: null`: no row), when it has one at hand. A
   * store may decide on it instead of reading the row again inside the transaction; the compare-and-set is the
   * same (a `seen` that is out of date loses on the (guid, seq) key, and the store decides again on the row as it
   * is), so the result is the one `execute` without `seen` would give.
   */
  execute(guid: string, command: Command, audit?: EventAudit, seen?: SeenRow): StoreResult<ExecuteResult>;
  readStream(guid: string): StoreResult<StoredEvent[]>;
  /** The whole log in global order, from after `afterPosition`. */
  readAll(afterPosition: number, limit: number): StoreResult<StoredEvent[]>;
}

/** The ledger read model: the inline projection, one row per GUID, updated in the append's transaction. */
export interface LedgerReadModel {
  getLedger(guid: string): StoreResult<LedgerState | null>;
  /** Rows matching `query`, in GUID order (or as `query.order` says). */
  queryLedger(query: LedgerQuery): StoreResult<LedgerState[]>;
  countLedger(query: LedgerQuery): StoreResult<number>;
  /** Rows per status and the oldest `updated_at` among them (null when none). */
  countByStatus(): StoreResult<Record<Status, StatusSummary>>;
}

/** Maintenance: tombstones, space, and the projection checked against (or rebuilt from) the log. */
export interface LedgerMaintenance {
  /** Deletes tombstones (PURGED rows) whose last change is before `before`, with their events and request records. */
  removeTombstones(before: number): StoreResult<number>;
  /** The ledger's size on disk in bytes (0 when the store cannot tell). */
  spaceOnDisk(): StoreResult<number>;
  /** Gives the space freed by purges back to the file system; returns the ledger's size on disk before and after. */
  reclaimSpace(): StoreResult<{ bytesBefore: number; bytesAfter: number }>;
  /** Replaces the projection with a fold of the log. */
  rebuildProjection(): StoreResult<{ rows: number }>;
  /** Compares the projection with a fold of the log; changes nothing. */
  verifyProjection(): StoreResult<ProjectionDifference[]>;
}

/**
 * Inquiries that could not tell, kept beside the log (they change no state, so they are no event): they space
 * out the next inquiry about the same attempt, across restarts and across processes sharing the ledger.
 */
export interface InquirySchedule {
  /**
   * Records one more inquiry about the attempt sent at `sentAt` that could not tell, made at `at`; the count
   * starts again when the GUID's last Sent changed. Returns the count and when the GUID is due again
   * (`nextInquiryAt` in src/events/inquirySchedule.ts).
   */
  recordUnclearInquiry(guid: string, sentAt: number, at: number, minAgeMs: number): StoreResult<InquiryScheduled>;
}

/** A row a maintenance run wants to work on, as it read it. */
export interface LeaseRequest {
  readonly guid: string;
  readonly lastSeq: number;
}

/**
 * Leases on rows, kept beside the log, for maintenance that several processes run at once (`resolve`, the
 * background settler, `reprocess`): a row one of them is inquiring about or sending is left alone by the others,
 * so an inquiry is not repeated. A lease guards the outside call only; every write is still a compare-and-set,
 * so a lease that ran out (its holder slow or dead) may repeat an inquiry, never a send.
 */
export interface RowLeases {
  /**
   * Leases, until `forMs` from now by the ledger's clock, those of `rows` whose ledger row is still at the given
   * `lastSeq` and that no other holder has a running lease on; returns the GUIDs leased (to `holder`).
   */
  leaseRows(holder: string, rows: readonly LeaseRequest[], forMs: number): StoreResult<Set<string>>;
  /** Ends every lease `holder` holds, and forgets every lease that has run out. */
  releaseLeases(holder: string): StoreResult<void>;
}

/**
 * The ledger's clock: what every age (min-age, grace, retention) is judged by against the times events carry.
 * SQLite (one host) reads the host's clock; PostgreSQL the database server's, so that processes on several
 * hosts judge one row alike whatever their own clocks say. Read afresh on each call (never cached).
 */
export interface LedgerClock {
  /** The time now, in ms since the epoch, by the clock that stamps the ledger's events. */
  now(): StoreResult<number>;
}

/** One channel request for a GUID the ledger has, as the relay answered it (no payload: metadata only). */
export interface RequestRecord {
  readonly guid: string;
  /** When the request arrived (ms since the epoch). */
  readonly at: number;
  /** The key the request came with (keys on); null in open mode. */
  readonly key: string | null;
  /** The reply code the channel got. */
  readonly code: string;
  /** Whether the request's fingerprint was the one the GUID was claimed with (false: E904). */
  readonly fingerprintMatch: boolean;
}
export interface StoredRequestRecord extends RequestRecord {
  /** Global order of the records (the `requests` table's own, not the log's). */
  readonly position: number;
}

/**
 * The channel's requests, kept beside the log in `requests` (they change no state, so they are no event). The
 * relay writes them in batches off the hot path (src/relay/requestRecorder.ts); tombstone removal deletes them.
 */
export interface RequestLog {
  /** Stores the records in one transaction. */
  recordRequests(records: readonly RequestRecord[]): StoreResult<void>;
  /** One GUID's records in the order they were stored. */
  readRequests(guid: string): StoreResult<StoredRequestRecord[]>;
}

/** When a key (`serve --keys`) was last used to authenticate a request (ms since the epoch). */
export interface KeyUse {
  readonly key: string;
  readonly at: number;
}

/**
 * The last use of each key, kept beside the log: `serve` notes uses in memory and writes them at most once a minute
 * (never a write per request); `guidgate keys list --db` shows them.
 */
export interface KeyUseLog {
  /** Keeps, per key, the latest of the time recorded and the one given. */
  recordKeyUses(uses: readonly KeyUse[]): StoreResult<void>;
  /** Every key with a recorded use, by name. */
  keyUses(): StoreResult<KeyUse[]>;
}

/** A page of one run's breaks, in GUID order: keyset paging on (run, GUID). */
export interface BreakPage {
  readonly after?: string;
  readonly limit: number;
}

export interface ReconciliationQuery {
  /** Most runs returned (newest first). */
  readonly limit: number;
  /** Keyset paging: only runs recorded before this one. */
  readonly beforeId?: string;
}

/**
 * Reconciliation runs (CONTRACT.md §8), kept beside the log (a run changes no transfer's state, so it is no event):
 * each run's window, source, SHA-256 of the journal, counts, and each break with the run that first saw it. Never
 * removed by purge: they are what an auditor reads.
 */
export interface ReconciliationLog {
  /**
   * Records a finished run and its breaks in one transaction, the ledger's clock its time; each break's `firstSeen`
   * is the first-seen run of the same break in the latest earlier run that covered the GUID, else this run
   * (src/store/shared/reconciliationRows.ts, firstSeenOf). Returns the run as recorded.
   */
  recordReconciliation(run: ReconcileResult): StoreResult<RecordedReconciliation>;
  /** The runs, newest first, without their breaks. */
  reconciliations(query: ReconciliationQuery): StoreResult<RecordedRun[]>;
  /**
   * One run with its breaks in GUID order; null when there is no such run. With `page`, only the breaks after
   * `page.after` (a GUID; from the first without it), at most `page.limit` of them: a run with a million breaks is
   * read a page at a time, never whole into one answer.
   */
  reconciliation(id: string, page?: BreakPage): StoreResult<RecordedReconciliation | null>;
  /** The breaks recorded for one GUID, oldest run first (its history). */
  reconciliationBreaks(guid: string): StoreResult<RecordedBreak[]>;
}

export interface StoreLifecycle {
  /**
   * Right when the ledger answers a read and a write would go through now, judged by what writes meet: the outcome
   * of the last write that settled while it is fresh, else a probe (src/store/shared/writeHealth.ts); the Left's message
   * says why not.
   */
  ping(): StoreResult<void>;
  /** Ends the store; every later call is a Left with LEDGER_CLOSED. */
  close(): StoreResult<void>;
  /**
   * What would keep an acknowledged write through a failover to a standby (CONTRACT.md §9), read from the server now.
   * Absent where there is no standby to fail over to (SQLite).
   */
  readonly durability?: () => StoreResult<DurabilityReport>;
}

/** The database server's replication settings as they bear on a failover (PostgreSQL; CONTRACT.md §9). */
export interface DurabilityReport {
  /** `synchronous_commit`: on, remote_apply and remote_write wait for the synchronous standbys; local and off do not. */
  readonly synchronousCommit: string;
  /** `synchronous_standby_names`; '' when none is named (every commit asynchronous). */
  readonly synchronousStandbyNames: string;
  /** Standbys in `pg_stat_replication` that are synchronous now (sync_state sync or quorum); null when not visible to this user. */
  readonly synchronousStandbys: number | null;
  /** Standbys streaming from the server, synchronous or not; null when not visible. */
  readonly standbys: number | null;
  /** Hosts in `--db`: more than one means a failover is expected. */
  readonly hosts: number;
}

/** One event of the log by its key. */
export interface EventKey {
  readonly guid: string;
  readonly seq: number;
}

/**
 * Where the ledger stands, for the continuity guard (CONTRACT.md §9, src/send/continuityGuard.ts). `server` names
 * what holds the log: when it changes under a running relay (another PostgreSQL cluster, or a new timeline: a
 * promoted standby), the ledger may have gone back. `instance` names one run of it (the host and the postmaster's
 * start): a change of it alone is a restart or another host, judged by whether recent writes are still there.
 * `position`: how far the log reaches (the highest global position ever handed out). `seen`: what was read, for
 * the log line.
 */
export interface LedgerStanding {
  readonly server: string;
  readonly instance: string;
  readonly position: number;
  /**
   * Whether another server can answer under the same connection settings while the process runs (a server behind
   * an address or a list of hosts: true; a file, which the file watch guards: false).
   */
  readonly canChange: boolean;
  readonly seen: Readonly<Record<string, string | number | null>>;
}

/**
 * The last position `serve` (or a command that wrote) recorded for the ledger, and an open continuity window, so a
 * restart inside the window keeps it. SQLite keeps it in a folder of its own (`--continuity-dir`), with the event at
 * that position: a copy of the ledger put back carries no memory of what came after it, and a mark that the same
 * restore brings back would agree with it.
 */
export interface ContinuityMark {
  readonly position: number;
  readonly at: number;
  /** The window the guard was in when the mark was written, if any (ms since the epoch, by the ledger's clock). */
  readonly window?: ContinuityWindow | undefined;
  /**
   * Recorded by `guidgate restore`: the ledger was put back from a copy on purpose; the next `serve` opens the window.
   * Kept by the commands that rewrite the mark, dropped by `serve`'s (it has opened the window by then).
   */
  readonly restored?: { readonly at: number } | undefined;
  /** Never stored: the store's judgment of the ledger against the mark, made when it read it; absent: the ledger stands where the mark says or beyond. */
  readonly judged?: MarkJudgment | undefined;
  /**
   * The server (`LedgerStanding.server`) the writer had judged when it wrote the mark, where another server can
   * answer (PostgreSQL): a relay starting on another one knows the ledger changed server while it was not watching.
   */
  readonly server?: string | undefined;
  /** Who wrote it (one run of one relay), and whether it is that run's last (a clean stop: it acknowledges nothing more). */
  readonly relay?: string | undefined;
  readonly stopped?: boolean | undefined;
}

/**
 * How a store that keeps the mark apart from the ledger (SQLite) judged the ledger against it. `behind`: the ledger
 * went back (behind the mark's position, or the event the mark names is missing or another). `unknown`: no mark for a
 * ledger with history (first start with this mark folder, the ledger moved, the folder lost), so its standing cannot
 * be known. `restored`: `guidgate restore` recorded that it went back.
 */
export interface MarkJudgment {
  readonly verdict: 'behind' | 'unknown' | 'restored';
  readonly why: string;
}

/** A relay's judgement of another server under it, for `judgeServerChange`. */
export interface ServerChange {
  readonly relay: string;
  readonly before: string;
  readonly now: string;
  /**
   * Null when this relay's own acknowledged writes are all there (its recent events present, the log not behind what
   * it saw; at start, when it has none); else why they are not shown to be, for the log line.
   */
  readonly ownLost: string | null;
  /** Whether this relay had acknowledged writes of its own to vouch for (false at start: a new run has none). */
  readonly hasOwn: boolean;
}

export interface ContinuityWindow {
  readonly wentBackAt: number;
  readonly endsAt: number;
  /** Why it opened, and the standing it was judged on (recorded where the store keeps windows in the ledger). */
  readonly why?: string | undefined;
  readonly seen?: Readonly<Record<string, unknown>> | undefined;
}

/** What the continuity guard asks of a store (CONTRACT.md §9). */
export interface LedgerContinuity {
  /** Where the ledger stands now, read on one connection. */
  ledgerStanding(): StoreResult<LedgerStanding>;
  /** Of these events, those the log does not have. */
  missingEvents(keys: readonly EventKey[]): StoreResult<EventKey[]>;
  /**
   * The mark recorded for the ledger (SQLite: in the continuity folder, apart from the data directory), judged against
   * the ledger (`judged`), or null when there is none and nothing to judge. PostgreSQL keeps it in the ledger (the
   * relays' high-water and windows), where a relay restarted or started later finds it.
   */
  readMark(): StoreResult<ContinuityMark | null>;
  /**
   * Records the mark durably (replacing the last one, never with a lower position the ledger still reaches: two
   * processes may write it); a store that keeps none does nothing.
   */
  writeMark(mark: ContinuityMark): StoreResult<void>;
  /**
   * Where the store can show that another server under it lost nothing any relay acknowledged (PostgreSQL: a
   * switchover, a failover to the synchronous standby), its judgement: `trusted` with why, or not with why. A store
   * without it: every server change is a going back.
   */
  judgeServerChange?(change: ServerChange): StoreResult<{ readonly trusted: boolean; readonly why: string }>;
  /**
   * How many connections the store has opened or lost so far (read at once, no call): a new server can only answer
   * on a new connection, so the guard checks the server again when this moved. 0 for a file.
   */
  connectionEvents(): number;
}

/** What opening a ledger gives: every part of the contract. */
export interface NotificationQuery {
  readonly state?: NotificationState;
  readonly guid?: string;
  /** Most rows returned, oldest first. */
  readonly limit: number;
}

/**
 * The notification outbox (CONTRACT.md §11), beside the log: each append records the notifications it makes due
 * (`notificationsDue` in src/events/notifications.ts) in its own transaction; `serve --notify-url` leases the due
 * ones a page at a time, sends them and records each attempt.
 */
export interface NotificationOutbox {
  /**
   * Leases to `holder`, until `forMs` from now by the ledger's clock, up to `limit` pending notifications due now
   * whose lease (if any) has run out, oldest due first; returns them.
   */
  leaseNotifications(holder: string, limit: number, forMs: number): StoreResult<StoredNotification[]>;
  /** Records the attempts (each one in `notification_attempts`) and their outcome on the notifications, in one transaction. */
  recordDeliveries(outcomes: readonly DeliveryOutcome[]): StoreResult<void>;
  /** Queues the GUIDs' delivered or given-up notifications again (pending, due now, same webhook-id); returns how many. */
  redeliverNotifications(guids: readonly string[]): StoreResult<number>;
  listNotifications(query: NotificationQuery): StoreResult<StoredNotification[]>;
  /** One GUID's delivery attempts, oldest first. */
  notificationAttempts(guid: string): StoreResult<NotificationAttempt[]>;
  notificationCounts(): StoreResult<NotificationCounts>;
}

export interface EventStore extends EventLog, LedgerReadModel, LedgerMaintenance, InquirySchedule, RowLeases, LedgerClock, RequestLog, KeyUseLog, ReconciliationLog, StoreLifecycle, LedgerContinuity, NotificationOutbox {}
