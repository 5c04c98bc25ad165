import { realpathSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { actorsOf, type EventAudit, type NewEvent, type ProcessActor } from '../../events/codecs.js';
import type { Command } from '../../events/decide.js';
import { LedgerClosedError, LedgerUnavailableError } from '../../events/errors.js';
import type { AppendResult, EventStore, ExecuteResult, LeaseRequest, LedgerProjection, KeyUse, RequestRecord, SeenRow } from '../../events/store.js';
import { storeResult, toStoreError, type StoreResult } from '../../events/storeResult.js';
import { recordsSent, submitWithDeadline, writeDeadlineMs, type Caller } from '../shared/writeDeadline.js';
import { writeHealth } from '../shared/writeHealth.js';
import { encodeRun, recordedOf } from '../shared/reconciliationRows.js';
import type { ReconcileResult } from '../../events/reconciliation.js';
import { continuityDir, fileStanding, missingFileEvents, readFileMark, writeFileMark, type MarkPlace } from './continuityMark.js';
import { fileBytes, reclaimSpace } from './fileSpace.js';
import { watchOpenedFile, type FileWatch } from './fileWatch.js';
import { startCheckpointer, type Checkpointer } from './checkpointer.js';
import { inlineWriter } from './inlineWriter.js';
import { openDatabase, openedFile, type Synchronous } from './openDatabase.js';
import { readMethods, type OnConnection, type ReadMethods } from './readMethods.js';
import { threadWriter } from './threadWriter.js';
import { notificationsTable } from './notificationsTable.js';
import { walSync, type WalSync } from './walSync.js';
import type { WriteOp, WriteResult } from './writeEngine.js';
import type { Writer } from './writer.js';

export type { Synchronous };

export interface SqliteStoreOptions {
  readonly path: string;
  /** The inline projection written in every append's transaction (the opener's: src/store/openStore.ts). */
  readonly projection: LedgerProjection;
  /**
   * FULL by default: a claim that a power cut can undo after the account system was called becomes a
   * double debit. NORMAL is faster and survives process crashes, not power loss; only by explicit choice.
   */
  readonly synchronous?: Synchronous;
  /** How long a writer waits for another process's write lock before the ledger counts as unavailable. */
  readonly busyTimeoutMs?: number;
  /**
   * The longest the caller of a claim (an execute that records a Sent) or of the probe waits before it is told the
   * ledger is unavailable, and the unit, if not yet written, is dropped: at most the busy timeout plus a margin
   * (src/store/shared/writeDeadline.ts), which is what the other writes a caller acts on get. `serve` gives its send
   * window, half of --grace.
   */
  readonly claimDeadlineMs?: number;
  readonly clock?: () => number;
  /** Most units of work one shared transaction carries (group commit). */
  readonly maxBatch?: number;
  /**
   * `inline`: writes run on this thread, batched per turn of the event loop. `thread`: writes run on a
   * worker thread, so a commit's fsync never stops this thread's event loop (what `serve` uses).
   */
  readonly writer?: 'inline' | 'thread';
  /**
   * For `serve`: notice when the file at `path` is no longer the one opened (deleted, replaced, moved),
   * checked before every write and ping and every `intervalMs` (default 1000); from then on writes and
   * ping refuse with LedgerUnavailableError, and `onLost` is called once with the reason.
   */
  readonly watchFile?: { readonly intervalMs?: number; readonly onLost?: (reason: string) => void };
  /**
   * For `serve` with the inline writer: WAL checkpoints on a thread of their own (checkpointer.ts), not inside this
   * thread's COMMITs; `onStopped` is told if that thread fails. A short-lived command, and the writer thread (whose
   * checkpoints never stop this thread), leave them to SQLite.
   */
  readonly backgroundCheckpoints?: { readonly onStopped?: (reason: string) => void };
  /** Who this process is (`processActor`), stored with every event it writes; absent: events get no actor. */
  readonly actor?: ProcessActor;
  /** How the inline writer puts the WAL on disk at FULL (walSync.ts); tests hand in one they control. */
  readonly walSync?: (dbPath: string) => WalSync;
  /** The folder of the continuity marks (`--continuity-dir`; continuityMark.ts `continuityDir` when absent). */
  readonly continuityDir?: string | undefined;
}

export interface SqliteEventStore extends EventStore {
  readonly path: string;
  /** This thread's connection, for reads, tests and maintenance that need raw SQL (integrity_check, vacuum). */
  readonly db: Database.Database;
}

/** The options with their defaults in place. */
type Settings = Required<Pick<SqliteStoreOptions, 'path' | 'projection' | 'synchronous' | 'busyTimeoutMs' | 'maxBatch' | 'writer'>> &
  Pick<SqliteStoreOptions, 'watchFile' | 'walSync' | 'backgroundCheckpoints'>;

/** What opening the file gives the store: this thread's connection, its watch, its writer and its reads. */
interface OpenedLedger {
  readonly db: Database.Database;
  readonly watch: FileWatch | null;
  readonly w: Writer;
  readonly reads: ReadMethods;
  readonly checkpoints: Checkpointer | null;
}

/**
 * Opens the file (this connection creates and migrates it first, so that a writer thread finds it ready), watches
 * it when asked, and starts the writer chosen; if any of it fails, what was opened is closed again.
 */
function openLedger(s: Settings, onConnection: OnConnection): OpenedLedger {
  // FULL on this thread: the commit at NORMAL, then the WAL synced off the event loop before anything is answered.
  const syncsWal = s.writer === 'inline' && s.synchronous === 'FULL' && s.path !== ':memory:';
  const db = openDatabase({ path: s.path, synchronous: syncsWal ? 'NORMAL' : s.synchronous, busyTimeoutMs: s.busyTimeoutMs });
  let watch: FileWatch | null = null;
  let wal: WalSync | null = null;
  let checkpoints: Checkpointer | null = null;
  try {
    if (s.watchFile !== undefined && s.path !== ':memory:') watch = watchOpenedFile(s.path, s.watchFile);
    // The WAL is named after the file SQLite opened, a symbolic link at `path` resolved.
    if (syncsWal) wal = (s.walSync ?? walSync)(openedFile(db));
    if (s.backgroundCheckpoints !== undefined && s.writer === 'inline' && s.path !== ':memory:') checkpoints = startCheckpointer(db, openedFile(db), s.backgroundCheckpoints.onStopped);
    const fileLost = (): string | null => watch?.check() ?? null;
    const reads = readMethods(db, s.projection, onConnection);
    return { db, watch, reads, checkpoints, w: chooseWriter(db, s, wal, fileLost) };
  } catch (err) {
    watch?.stop();
    wal?.close();
    void checkpoints?.close();
    db.close();
    throw toStoreError(err, `open of ${s.path}`);
  }
}

/** The writer: on this thread, syncing the WAL itself at FULL (the default), or on a thread of its own (what serve uses). */
function chooseWriter(db: Database.Database, s: Settings, wal: WalSync | null, fileLost: () => string | null): Writer {
  const { path, synchronous, busyTimeoutMs, maxBatch, projection } = s;
  return s.writer === 'thread'
    ? threadWriter({ path, synchronous, busyTimeoutMs, maxBatch, projection })
    : inlineWriter(db, { maxBatch, projection, busyTimeoutMs, wal, fileLost });
}

export function openSqliteStore(options: SqliteStoreOptions): SqliteEventStore {
  const { path, synchronous = 'FULL', busyTimeoutMs = 5000, clock = Date.now, maxBatch = 512, writer = 'inline' } = options;
  let closed = false;
  /** Reads, and the few maintenance steps that cannot run in a batch, on this thread's connection. */
  const onConnection: OnConnection = (what, fn) =>
    storeResult(what, () => {
      if (closed) throw new LedgerClosedError();
      return fn();
    });
  const { db, watch, w, reads, checkpoints } = openLedger({ ...options, synchronous, busyTimeoutMs, maxBatch, writer }, onConnection);
  const fileLost = (): string | null => watch?.check() ?? null;
  const deadlineMs = writeDeadlineMs(busyTimeoutMs);
  const claimDeadlineMs = writeDeadlineMs(busyTimeoutMs, options.claimDeadlineMs);
  const actorFor = actorsOf(options.actor);
  const outbox = notificationsTable(db);

  function write<O extends WriteOp>(op: O): Promise<WriteResult<O>> {
    if (closed) return Promise.reject(new LedgerClosedError());
    // The inline writer checks the file once per batch, as it writes; the thread's batches are checked here.
    const lost = writer === 'thread' ? fileLost() : null;
    if (lost !== null) return Promise.reject(new LedgerUnavailableError(lost));
    // The writes a request waits on get a deadline, a claim (and the probe, which asks whether one would go through)
    // the claim's; maintenance (rebuild, tombstones) may take long.
    const hasDeadline = op.op === 'execute' || op.op === 'append' || op.op === 'probe';
    const deadline = op.op === 'probe' || (op.op === 'execute' && recordsSent(op.command)) ? claimDeadlineMs : deadlineMs;
    const submit = (caller: Caller) => w.submit(op, caller) as Promise<WriteResult<O>>;
    return health.watch(hasDeadline ? submitWithDeadline(submit, deadline, w.started) : submit({ gaveUp: false }));
  }
  // What ping asks once no write has settled for a while: a probe that writes a page, so it meets a full disk as a claim would.
  const health = writeHealth(() => write({ op: 'probe' }));
  const written = <T>(step: () => Promise<T>): StoreResult<T> => storeResult('write', step);
  /** The continuity mark (continuityMark.ts): keyed by the ledger's real path, as opened. */
  let place: MarkPlace | undefined;
  const marked = <T>(none: T, step: (p: MarkPlace) => Promise<T>): StoreResult<T> =>
    storeResult('continuity mark', () => {
      if (closed) throw new LedgerClosedError();
      if (path === ':memory:') return Promise.resolve(none);
      place ??= { ledger: realpathSync(path), dir: continuityDir(options.continuityDir) };
      return step(place);
    });

  return {
    path,
    db,
    ...reads,
    appendEvents(guid: string, expectedSeq: number, events: readonly NewEvent[], audit?: EventAudit): StoreResult<AppendResult> {
      return written(() => write({ op: 'append', guid, expectedSeq, events, actor: actorFor(audit), ...repliedOf(audit) }));
    },
    execute(guid: string, command: Command, audit?: EventAudit, seen?: SeenRow): StoreResult<ExecuteResult> {
      return written(() => write({ op: 'execute', guid, command, now: clock(), actor: actorFor(audit), ...repliedOf(audit), ...(seen === undefined ? {} : { seen: seen.state }) }));
    },
    recordRequests: (records: readonly RequestRecord[]) =>
      written(async () => {
        if (records.length > 0) await write({ op: 'recordRequests', records });
      }),
    recordUnclearInquiry: (guid: string, sentAt: number, at: number, minAgeMs: number) => written(() => write({ op: 'recordUnclearInquiry', guid, sentAt, at, minAgeMs })),
    recordKeyUses: (uses: readonly KeyUse[]) =>
      written(async () => {
        if (uses.length > 0) await write({ op: 'recordKeyUses', uses: uses.map(({ key, at }) => ({ key, at })) });
      }),
    leaseRows: (holder: string, rows: readonly LeaseRequest[], forMs: number) =>
      written(async () => {
        if (rows.length === 0) return new Set<string>();
        const plain = rows.map(({ guid, lastSeq }) => ({ guid, lastSeq }));
        return new Set(await write({ op: 'leaseRows', holder, rows: plain, now: clock(), forMs }));
      }),
    releaseLeases: (holder: string) =>
      written(async () => {
        await write({ op: 'releaseLeases', holder, now: clock() });
      }),
    recordReconciliation: (run: ReconcileResult) =>
      written(async () => {
        if (closed) throw new LedgerClosedError();
        const { run: row, breaks } = encodeRun(run);
        const at = clock();
        const { id, firstSeen } = await write({ op: 'recordReconciliation', run: row, breaks, at });
        return recordedOf(run, id, at, firstSeen);
      }),
    leaseNotifications: (holder: string, limit: number, forMs: number) => written(() => write({ op: 'leaseNotifications', holder, limit, now: clock(), forMs })),
    recordDeliveries: (outcomes) =>
      written(async () => {
        if (outcomes.length > 0) await write({ op: 'recordDeliveries', outcomes: outcomes.map((o) => ({ ...o })) });
      }),
    redeliverNotifications: (guids) => written(() => write({ op: 'redeliverNotifications', guids: [...guids], now: clock() })),
    listNotifications: (query) => onConnection('read', () => outbox.list(query)),
    notificationAttempts: (guid) => onConnection('read', () => outbox.attempts(guid)),
    notificationCounts: () => onConnection('read', () => outbox.counts()),
    now: () => onConnection('clock', () => clock()),
    removeTombstones: (before: number) => written(() => write({ op: 'removeTombstones', before })),
    rebuildProjection: () => written(() => write({ op: 'rebuild' })),
    spaceOnDisk: () => onConnection('size', () => fileBytes(path)),
    ledgerStanding: () => onConnection('standing', () => fileStanding(db, path, w.durablePosition())),
    missingEvents: (keys) => onConnection('read', () => missingFileEvents(db, keys)),
    connectionEvents: () => 0,
    readMark: () => marked(null, (p) => readFileMark(db, p)),
    writeMark: (mark) => marked(undefined, (p) => writeFileMark(db, p, mark)),
    reclaimSpace: () => storeResult('vacuum', () => reclaimSpace(db, path, onConnection)),
    ping() {
      return storeResult('ping', async () => {
        if (closed) throw new LedgerClosedError();
        const problem = w.problem() ?? fileLost();
        if (problem !== null) throw new LedgerUnavailableError(problem);
        db.prepare('SELECT 1').get();
        // A write goes through now (the last one that settled, or a probe): no full disk, no lock or stuck writer
        // holding it past the deadline.
        await health.check();
      });
    },
    close() {
      return storeResult('close', async () => {
        watch?.stop();
        if (closed) return;
        await w.close();
        closed = true;
        // Before this connection: the last one to close checkpoints the WAL into the file and removes it.
        await checkpoints?.close();
        db.close();
      });
    },
  };
}

/** The `replied` mark of an append (src/events/notifications.ts), plain data for the writer. */
const repliedOf = (audit: EventAudit | undefined): { replied?: true; cap?: number } => ({
  ...(audit?.replied === true ? { replied: true as const } : {}),
  ...(audit?.cap === undefined ? {} : { cap: audit.cap }),
});
