import pg from 'pg';
import { actorsOf, type EventAudit, type NewEvent, type ProcessActor, type StoredEvent } from '../../events/codecs.js';
import type { Command } from '../../events/decide.js';
import { LedgerClosedError, LedgerCorruptError, LedgerUnavailableError } from '../../events/errors.js';
import type { AppendResult, BreakPage, EventStore, ExecuteResult, LeaseRequest, LedgerProjection, LedgerQuery, KeyUse, RequestRecord, SeenRow } from '../../events/store.js';
import { orThrow, storeResult, type StoreResult } from '../../events/storeResult.js';
import { writeHealth } from '../shared/writeHealth.js';
import { atBoundary, isConnectionLost, toLedgerError } from './errors.js';
import { groupCommit } from './groupCommit.js';
import type { WriteUnit } from '../shared/writeProtocol.js';
import { recordsSent, submitWithDeadline, writeDeadlineMs } from '../shared/writeDeadline.js';
import { coalescedGetLedger, countByStatus, countLedger, queryLedger } from './ledgerQueries.js';
import { recordUnclearInquiry } from './inquirySchedule.js';
import { rebuildProjection, reclaimSpace, removeTombstones, tablesBytes, verifyProjection } from './maintenance.js';
import { leaseRows, releaseLeases } from './leases.js';
import { readAll } from './readAll.js';
import { readStream } from './readStream.js';
import { readRequests, recordRequests } from './requests.js';
import { readKeyUses, recordKeyUses } from './keyUses.js';
import { migrate } from './schema.js';
import { listReconciliations, readReconciliation, reconciliationBreaksOf, recordReconciliation } from './reconciliations.js';
import { encodeRun, listBefore, recordedOf, runIdOf } from '../shared/reconciliationRows.js';
import type { ReconcileResult } from '../../events/reconciliation.js';
import { serverNow } from './serverClock.js';
import { readDurability } from './durability.js';
import { judgeServerChange, missingServerEvents, readServerMark, serverStanding, writeServerMark } from './continuity.js';
import { boundedWritePool, rowReadPool, sessionSettings, storePool, withClient } from './pools.js';
import { HostRotation, type HostEvent } from './hosts.js';
import { leaseNotifications, listNotifications, notificationAttempts, notificationCounts, recordDeliveries, redeliverNotifications } from './notifications.js';
import { parsePostgresUrl, PostgresUrlError } from './postgresUrl.js';

/** True when `--db` names a PostgreSQL database rather than a SQLite file. */
export const isPostgresUrl = (db: string): boolean => /^postgres(ql)?:\/\//i.test(db);

export interface PostgresStoreOptions {
  /**
   * `postgres://user@host:port/dbname` (or `postgresql://`), or several hosts (`h1:p1,h2:p2`, optionally with
   * `target_session_attrs=read-write` or `primary`): every connection goes to the one that takes writes (hosts.ts).
   */
  readonly url: string;
  /** Told when no listed host takes writes (once per outage) and when writes go to a host (at start, after a change). */
  readonly onHosts?: (event: HostEvent) => void;
  /** The inline projection written in every batch's transaction (the opener's: src/store/openStore.ts). */
  readonly projection: LedgerProjection;
  /**
   * The time `execute` decides at and `now()` answers (event times, ages). Default: the database server's clock,
   * read in each batch transaction once its rows are locked, so relays and commands on several hosts agree
   * whatever their own clocks say.
   */
  readonly clock?: () => number;
  /** Most units of work one shared transaction carries (group commit). */
  readonly maxBatch?: number;
  /** Group-commit batches written at once, each on its own connection (1: strictly one after another). */
  readonly maxInFlight?: number;
  /** Connections in the pool (one carries the writes; the rest serve reads and maintenance). */
  readonly poolSize?: number;
  /** How long to wait for a connection before the ledger counts as unavailable. */
  readonly connectTimeoutMs?: number;
  /**
   * How long a statement waits for a lock another session holds (a row another relay is writing, a
   * rebuild) before the ledger counts as unavailable: the busy timeout of the SQLite store.
   */
  readonly lockTimeoutMs?: number;
  /**
   * The longest the caller of a claim (an `execute` that records a Sent) waits before it is told the ledger is
   * unavailable, and the unit, if not yet committed, is left out: at most the lock timeout plus a margin
   * (src/store/shared/writeDeadline.ts), which is what every other `execute` and `appendEvents` gets. `serve` gives its send
   * window, half of --grace.
   */
  readonly claimDeadlineMs?: number;
  /** Shown in `pg_stat_activity`, so an operator (or a test) can find this process's connections. */
  readonly applicationName?: string;
  /** False: a database without the schema is refused (`no ledger …`), not migrated (default true). */
  readonly create?: boolean;
  /** Who this process is (`processActor`), stored with every event it writes; absent: events get no actor. */
  readonly actor?: ProcessActor;
}

export interface PostgresEventStore extends EventStore {
  readonly url: string;
  /** The pool, for tests and maintenance that need raw SQL. */
  readonly pool: pg.Pool;
  /** The pool of the route's row reads (pools.ts, rowReadPool), for tests. */
  readonly rowReads: pg.Pool;
}

/** The pool of reads and maintenance, once the schema is up to date (`migrate`); if that fails, the pool is ended. */
async function openMigrated(config: pg.PoolConfig, rotation: HostRotation, create: boolean): Promise<pg.Pool> {
  const pool = storePool(config, rotation);
  await atBoundary('open', () => withClient(pool, (client) => migrate(client, create))).catch(async (err: unknown) => {
    await pool.end().catch(() => undefined);
    throw err;
  });
  return pool;
}

export async function openPostgresStore(options: PostgresStoreOptions): Promise<PostgresEventStore> {
  const { url, projection, clock, maxBatch = 512, maxInFlight = 2, poolSize = 10, connectTimeoutMs = 5000, lockTimeoutMs = 5000, applicationName = 'guidgate', create = true } = options;
  if (!isPostgresUrl(url)) throw new LedgerUnavailableError('not a PostgreSQL URL (postgres://… or postgresql://…)');
  let hosts;
  try {
    hosts = parsePostgresUrl(url).hosts;
  } catch (err) {
    if (err instanceof PostgresUrlError) throw new LedgerUnavailableError(`bad PostgreSQL URL: ${err.message}`);
    throw err;
  }
  // One rotation for every pool: a failover seen by a write moves the reads on too.
  const rotation = new HostRotation(hosts, options.onHosts);
  const actorFor = actorsOf(options.actor);
  const connection = { connectionTimeoutMillis: connectTimeoutMs, application_name: applicationName };
  const pool = await openMigrated({ ...connection, max: poolSize, options: sessionSettings({ lock_timeout: lockTimeoutMs }) }, rotation, create);
  const deadlineMs = writeDeadlineMs(lockTimeoutMs);
  const claimDeadlineMs = writeDeadlineMs(lockTimeoutMs, options.claimDeadlineMs);
  const writePool = boundedWritePool({ ...connection, max: maxInFlight }, rotation, lockTimeoutMs, deadlineMs);
  const rowReads = rowReadPool(connection, rotation, lockTimeoutMs);
  const writes = groupCommit(writePool, { maxBatch, maxInFlight, fail: (err) => toLedgerError(err, 'write'), projection });
  /** A unit for the group commit, given up (and left unwritten if not yet committed) at its deadline: a claim's, or the write deadline. */
  const submit = (unit: WriteUnit): Promise<AppendResult | ExecuteResult> =>
    submitWithDeadline((caller) => writes.submit(unit, caller), unit.op === 'execute' && recordsSent(unit.command) ? claimDeadlineMs : deadlineMs);
  let closed: Promise<void> | null = null;
  // Every connection opened or lost, on any of the pools: what the continuity guard checks the server again after.
  let connectionEvents = 0;
  const connectionEvent = (): void => {
    connectionEvents++;
  };
  // A commit whose wait for the synchronous standby was cancelled (statement_timeout, a cancel) returns success with
  // only a WARNING: committed here, perhaps not on the standby. Counted, so the next continuity mark does not
  // attest synchronous replication.
  const syncWarnings = { count: 0, marked: 0 };
  for (const p of [pool, writePool, rowReads]) {
    p.on('connect', (client) => {
      connectionEvent();
      client.on('error', connectionEvent);
      client.on('notice', (notice) => {
        if (notice.code === '01000' && /synchronous replication/i.test(notice.message ?? '')) syncWarnings.count++;
      });
    });
    p.on('error', connectionEvent);
  }

  const open = () => {
    if (closed !== null) throw new LedgerClosedError();
  };
  /** Maintenance: writes, never run twice by the store. */
  const maintain = <T>(what: string, fn: () => Promise<T>): StoreResult<T> =>
    storeResult(what, () =>
      atBoundary(what, async () => {
        open();
        return fn();
      }),
    );
  /** The row reads of one turn of the event loop, one query (a relay reads the row of every request). */
  const readRow = coalescedGetLedger(rowReads, projection.rowToState);
  /**
   * A read runs once more on a new connection when its connection was found dead (the pool had not yet
   * noticed a restart): reading twice changes nothing.
   */
  const read = <T>(what: string, fn: () => Promise<T>): StoreResult<T> =>
    maintain(what, async () => {
      try {
        return await fn();
      } catch (err) {
        if (err instanceof LedgerCorruptError || !isConnectionLost(err)) throw err;
        return fn();
      }
    });

  /**
   * The ping: a write that changes nothing fails where a claim would for a read-only or recovering server, no
   * privilege, the table locked past lock_timeout or no connection. Not for a full disk: it needs no new space
   * (an UPDATE that matches no row), nor would any small write (an insert fits a page with room left while a
   * claim's needs a new one), so that one is seen only in the outcome of the writes themselves (writeHealth).
   */
  const health = writeHealth(() =>
    orThrow(read('ping', async () => {
      await pool.query({ name: 'guidgate_ping', text: 'UPDATE ledger SET last_seq = last_seq WHERE false' });
    })),
  );
  /** `maintain` for a write whose outcome the ping counts as evidence. */
  const watched = <T>(what: string, fn: () => Promise<T>): StoreResult<T> =>
    storeResult(what, () =>
      health.watch(atBoundary(what, async () => {
        open();
        return fn();
      })),
    );
  /** A unit of the group commit (a claim, an outcome), its outcome counted by the ping. */
  const submitted = <T>(unit: WriteUnit): StoreResult<T> =>
    storeResult('write', () => {
      open();
      return health.watch(submit(unit) as Promise<T>);
    });

  return {
    url,
    pool,
    rowReads,
    appendEvents(guid: string, expectedSeq: number, events: readonly NewEvent[], audit?: EventAudit): StoreResult<AppendResult> {
      return submitted({ op: 'append', guid, expectedSeq, events, actor: actorFor(audit), ...notifyOf(audit) });
    },
    execute(guid: string, command: Command, audit?: EventAudit, seen?: SeenRow): StoreResult<ExecuteResult> {
      return submitted({ op: 'execute', guid, command, actor: actorFor(audit), ...notifyOf(audit), ...(clock === undefined ? {} : { now: clock() }), ...(seen === undefined ? {} : { seen: seen.state }) });
    },
    now: (): StoreResult<number> => read('clock', clock === undefined ? () => serverNow(pool) : async () => clock()),
    recordRequests: (records: readonly RequestRecord[]) => watched('request records', () => recordRequests(pool, records)),
    recordKeyUses: (uses: readonly KeyUse[]) => watched('key uses', () => recordKeyUses(pool, uses)),
    keyUses: () => read('read', () => readKeyUses(pool)),
    readRequests: (guid: string) => read('read', () => readRequests(pool, guid)),
    readStream: (guid: string): StoreResult<StoredEvent[]> => read('read', () => readStream(pool, guid)),
    readAll: (afterPosition: number, limit: number): StoreResult<StoredEvent[]> => read('read', () => readAll(pool, afterPosition, limit)),
    getLedger: (guid: string) => read('read', () => readRow(guid)),
    queryLedger: (query: LedgerQuery) => read('read', () => queryLedger(pool, query, projection.rowToState)),
    countLedger: (query: LedgerQuery) => read('read', () => countLedger(pool, query)),
    countByStatus: () => read('read', () => countByStatus(pool)),
    recordUnclearInquiry: (guid: string, sentAt: number, at: number, minAgeMs: number) =>
      watched('inquiry schedule', () => recordUnclearInquiry(pool, guid, sentAt, at, minAgeMs)),
    leaseRows: (holder: string, rows: readonly LeaseRequest[], forMs: number) =>
      watched('lease', () => leaseRows(pool, holder, rows, forMs, clock === undefined ? null : clock())),
    releaseLeases: (holder: string) => watched('lease', () => releaseLeases(pool, holder, clock === undefined ? null : clock())),
    recordReconciliation: (run: ReconcileResult) =>
      watched('reconciliation', async () => {
        const { run: row, breaks } = encodeRun(run);
        const { id, at, firstSeen } = await withClient(pool, (client) => recordReconciliation(client, row, breaks, clock === undefined ? null : clock()));
        return recordedOf(run, id, at, firstSeen);
      }),
    reconciliations: ({ limit, beforeId }) =>
      read('read', async () => {
        const before = listBefore(beforeId);
        return before === null ? [] : listReconciliations(pool, Math.max(0, Math.floor(limit)), before);
      }),
    reconciliation: (id: string, page?: BreakPage) =>
      read('read', async () => {
        const n = runIdOf(id);
        return n === null ? null : withClient(pool, (client) => readReconciliation(client, n, page));
      }),
    reconciliationBreaks: (guid: string) => read('read', () => reconciliationBreaksOf(pool, guid)),
    leaseNotifications: (holder: string, limit: number, forMs: number) =>
      watched('notifications', () => leaseNotifications(pool, holder, limit, forMs, clock === undefined ? null : clock())),
    recordDeliveries: (outcomes) => watched('notifications', () => recordDeliveries(pool, outcomes)),
    redeliverNotifications: (guids) => watched('notifications', () => redeliverNotifications(pool, guids, clock === undefined ? null : clock())),
    listNotifications: (query) => read('read', () => listNotifications(pool, query)),
    notificationAttempts: (guid: string) => read('read', () => notificationAttempts(pool, guid)),
    notificationCounts: () => read('read', () => notificationCounts(pool)),
    removeTombstones: (before: number) => maintain('remove tombstones', () => removeTombstones(pool, before)),
    reclaimSpace: () => maintain('vacuum', () => reclaimSpace(pool)),
    spaceOnDisk: () => read('size', () => tablesBytes(pool)),
    rebuildProjection: () => maintain('rebuild', () => withClient(pool, (client) => rebuildProjection(client, projection))),
    verifyProjection: () => read('verify', () => withClient(pool, (client) => verifyProjection(client, projection))),
    durability: () => read('durability', () => readDurability(pool, hosts.length)),
    // Continuity (CONTRACT.md §9): read on the pool's connections; the mark is kept in the ledger, where every
    // relay reads it (continuity.ts says what it can and cannot witness).
    ledgerStanding: () => read('standing', () => serverStanding(pool)),
    missingEvents: (keys) => read('read', () => missingServerEvents(pool, keys)),
    connectionEvents: () => connectionEvents,
    readMark: () => read('continuity mark', () => readServerMark(pool)),
    writeMark: (mark) =>
      watched('continuity mark', async () => {
        const warnings = syncWarnings.count;
        await writeServerMark(pool, mark, warnings !== syncWarnings.marked);
        syncWarnings.marked = warnings;
      }),
    judgeServerChange: (change) => read('continuity', async () => judgeServerChange(pool, change, await serverNow(pool))),
    ping: () =>
      storeResult('ping', () => {
        open();
        return health.check();
      }),
    close() {
      const closing = (closed ??= writes.drain().then(() => Promise.all([pool.end(), writePool.end(), rowReads.end()])).then(() => undefined));
      return storeResult('close', () => closing);
    },
  };
}

/** What an append says for the notification rule (src/events/notifications.ts), beside its actor. */
const notifyOf = (audit: EventAudit | undefined): { replied?: true; cap?: number } => ({
  ...(audit?.replied === true ? { replied: true as const } : {}),
  ...(audit?.cap === undefined ? {} : { cap: audit.cap }),
});
