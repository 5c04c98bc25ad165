import { existsSync, statSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { actorsOf, type EventAudit, type NewEvent, type ProcessActor, type StoredEvent } from '../../events/codecs.js';
import type { Command } from '../../events/decide.js';
import { LedgerClosedError, LedgerCorruptError, LedgerUnavailableError } from '../../events/errors.js';
import type { AppendResult, EventStore, ExecuteResult, LeaseRequest, LedgerProjection, LedgerQuery, ProjectionDifference, RequestRecord, SeenRow, StoredRequestRecord } from '../../events/store.js';
import { orThrow, storeResult, type StoreResult } from '../../events/storeResult.js';
import { ledgerTable, type LedgerTable } from './ledgerTable.js';
import { requestsTable, type RequestsTable } from './requestsTable.js';
import { eventsTable, type EventsTable } from './eventsTable.js';
import { watchFileIdentity, type FileWatch } from './fileWatch.js';
import { fileIdentity } from './ledgerFile.js';
import { recordsSent, submitWithDeadline, writeDeadlineMs, type Caller } from '../shared/writeDeadline.js';
import { rowToEvent, statusSummary } from '../shared/rowCodecs.js';
import { openDatabase, unavailable, type Synchronous } from './openDatabase.js';
import { walSync, type WalSync } from './walSync.js';
import { writeHealth } from '../shared/writeHealth.js';
import { createWriteEngine, reviveError, type OpOutcome, type WriteOp, type WriteResult } from './writeEngine.js';
import { gaveUpSlots, markGaveUp } from './gaveUpSlots.js';
import type { FromWriter, ToWriter } from './writerWorker.js';

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
  /** Who this process is (`processActor`), stored with every event it writes; absent: events get no actor. */
  readonly actor?: ProcessActor;
  /** How the inline writer puts the WAL on disk at FULL (walSync.ts); tests hand in one they control. */
  readonly walSync?: (dbPath: string) => WalSync;
}

export interface SqliteEventStore extends EventStore {
  readonly path: string;
  /** This thread's connection, for reads, tests and maintenance that need raw SQL (integrity_check, vacuum). */
  readonly db: Database.Database;
}

/** The ledger's bytes on disk: the database file and its WAL. */
function fileBytes(path: string): number {
  if (path === ':memory:') return 0;
  let total = 0;
  for (const p of [path, `${path}-wal`]) {
    try {
      total += statSync(p).size;
    } catch {
      /* no WAL yet */
    }
  }
  return total;
}

/**
 * A module as a worker thread can load it: the file itself when running compiled; under a TypeScript test runner
 * (a .ts source) its compiled twin in dist.
 */
function compiledModule(url: string, what: string): string {
  const file = fileURLToPath(url).replace(/\.ts$/, '.js');
  if (url.endsWith('.js') && existsSync(file)) return file;
  const dist = file.replace(/^(.*[\\/])src([\\/])/, '$1dist$2src$2');
  if (!existsSync(dist)) throw new LedgerUnavailableError(`${what} ${dist} is missing: run npm run build`);
  return dist;
}

/** The compiled worker script. */
const writerScript = (): string => compiledModule(new URL('./writerWorker.js', import.meta.url.replace(/\.ts$/, '.js')).href, 'writer thread script');

interface Pending {
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

interface Writer {
  /** Settles once the writer can write (or never will): a write's deadline counts from then, not from a thread's start. */
  readonly started: Promise<void>;
  /**
   * `caller.gaveUp` turns true when the caller stops waiting (the write deadline); a unit not yet written then is not
   * written at all, since its caller has answered E503 and will never call for it.
   */
  submit(op: WriteOp, caller: Caller): Promise<unknown>;
  /** Why this writer writes nothing any more, or null while it works. */
  problem(): string | null;
  close(): Promise<void>;
}

function settle(p: Pending, outcome: OpOutcome): void {
  if (outcome.ok) p.resolve(outcome.value);
  else p.reject(reviveError(outcome.error));
}

/** The longest pause between two tries for a write lock that another connection holds. */
const LOCK_RETRY_MAX_MS = 16;
/** Free pages given back per step of `reclaimSpace` (8 MB at 4 KB), and the pause after each, for other writers. */
const VACUUM_STEP_PAGES = 2000;
const VACUUM_PAUSE_MS = 2 * LOCK_RETRY_MAX_MS;

interface Queued {
  readonly op: WriteOp;
  readonly pending: Pending;
  /** When it was queued (performance.now()). */
  readonly at: number;
  readonly caller: Caller;
}

/**
 * Writes on this thread: the units queued while the previous batch committed (and synced) share the next
 * transaction (group commit). With `wal` (synchronous=FULL, see walSync.ts) a committed batch's units are
 * settled only once fdatasync has put the WAL on disk, off the event loop; the next batch waits for that sync,
 * so one sync serves everyone who queued meanwhile. A write lock another connection holds is waited for by a
 * timer, never in SQLite's busy handler, which would stop this thread (the one that answers requests); a unit
 * that has waited the busy timeout fails as SQLite's own wait would, and one whose caller gave up (its deadline)
 * is dropped unwritten.
 */
function inlineWriter(
  db: Database.Database,
  o: { maxBatch: number; projection: LedgerProjection; busyTimeoutMs: number; wal: WalSync | null; fileLost: () => string | null },
): Writer {
  const engine = createWriteEngine(db, o.projection, o.busyTimeoutMs);
  let queue: Queued[] = [];
  let scheduled = false;
  /** The batch whose WAL is being synced: nothing else is written until it is on disk. */
  let syncing: Promise<void> | null = null;
  /** Set once a sync failed: what was committed since the last good one may not be on disk, so nothing more is written. */
  let broken: string | null = null;
  let lockPauseMs = 0;
  let idle: (() => void) | null = null;
  let closing: Promise<void> | null = null;

  const schedule = (): void => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(flush);
  };
  const failAll = (units: readonly Queued[], why: string): void => {
    for (const u of units) u.pending.reject(new LedgerUnavailableError(why));
  };
  /** Takes out of the queue the units `drop` says go (failing them with `why`, if given); returns how many went. */
  const dropWhere = (drop: (u: Queued) => boolean, why?: string): number => {
    const gone = queue.filter(drop);
    if (gone.length === 0) return 0;
    queue = queue.filter((u) => !drop(u));
    if (why !== undefined) failAll(gone, why);
    return gone.length;
  };

  /**
   * A failed fdatasync leaves this batch committed (visible to every reader, other processes included) but maybe
   * not on disk, and Linux may have dropped the pages it could not write, so that a later sync, by anyone,
   * succeeds over a hole. A checkpoint copies the frames from memory into the database file and syncs that
   * instead; whether it works or not, this writer writes nothing more: only a restart is safe.
   */
  function breakOnFailedSync(err: unknown): string {
    const why = err instanceof Error ? err.message : String(err);
    let sealed: string;
    try {
      db.pragma('wal_checkpoint(TRUNCATE)');
      sealed = 'the WAL was checkpointed into the ledger file';
    } catch (ckptErr) {
      sealed = `checkpointing the WAL failed too (${ckptErr instanceof Error ? ckptErr.message : String(ckptErr)})`;
    }
    return `ledger sync failed: ${why}; ${sealed}; nothing more is written: restart serve`;
  }

  function flush(): void {
    scheduled = false;
    if (syncing !== null) return;
    // Units whose callers have stopped waiting are not written: a claim nobody will call for would only be an orphan.
    dropWhere((u) => u.caller.gaveUp);
    if (queue.length === 0) {
      idle?.();
      return;
    }
    const batch = queue.slice(0, o.maxBatch);
    // Once per batch, right before it is written: is the file at the path still the one this connection writes to?
    const lost = o.fileLost();
    if (lost !== null) {
      queue = queue.slice(batch.length);
      failAll(batch, lost);
      schedule();
      return;
    }
    const now = performance.now();
    const outcomes = engine.tryRun(batch.map((b) => b.op));
    if (outcomes === 'locked') {
      // Each unit waits for the lock as long as SQLite's busy timeout would have let it, counted from its own arrival.
      dropWhere((u) => now - u.at >= o.busyTimeoutMs, `ledger write failed: database is locked (by another process, for more than the busy timeout of ${o.busyTimeoutMs} ms)`);
      lockPauseMs = Math.min(LOCK_RETRY_MAX_MS, Math.max(1, lockPauseMs * 2));
      scheduled = true;
      setTimeout(flush, lockPauseMs);
      return;
    }
    queue = queue.slice(batch.length);
    lockPauseMs = 0;
    const settleAll = () => batch.forEach((b, i) => settle(b.pending, outcomes[i]!));
    if (o.wal === null || !outcomes.some((x) => x.ok)) {
      settleAll();
      schedule();
      return;
    }
    syncing = o.wal.sync().then(
      () => {
        // The file may have been replaced while the WAL was synced: then these commits went to a file nobody reads.
        const lostMeanwhile = o.fileLost();
        if (lostMeanwhile !== null) failAll(batch, lostMeanwhile);
        else settleAll();
      },
      (err: unknown) => {
        broken = breakOnFailedSync(err);
        failAll(batch, broken);
        failAll(queue, broken);
        queue = [];
      },
    ).finally(() => {
      syncing = null;
      schedule();
    });
  }

  return {
    started: Promise.resolve(),
    submit: (op, caller) =>
      new Promise((resolve, reject) => {
        if (broken !== null) {
          reject(new LedgerUnavailableError(broken));
          return;
        }
        queue.push({ op, pending: { resolve, reject }, at: performance.now(), caller });
        if (syncing === null) schedule();
      }),
    problem: () => broken,
    close() {
      // Everything queued is written (and synced) first.
      closing ??= new Promise<void>((resolve) => {
        idle = () => {
          idle = null;
          o.wal?.close();
          resolve();
        };
        schedule();
      });
      return closing;
    },
  };
}

/** Writes on a worker thread with its own connection; results come back after the batch committed. */
function threadWriter(options: { path: string; synchronous: Synchronous; busyTimeoutMs: number; maxBatch: number; projection: LedgerProjection }): Writer {
  const projectionModule = pathToFileURL(compiledModule(options.projection.module, 'projection module')).href;
  const gaveUp = gaveUpSlots();
  const slots = new Int32Array(gaveUp);
  const worker = new Worker(writerScript(), {
    // The writer needs no flag of its parent's (and --input-type, for one, would stop it from starting).
    execArgv: process.execArgv.filter((a) => !a.startsWith('--input-type') && a !== '-e' && a !== '--eval'),
    workerData: { connection: { path: options.path, synchronous: options.synchronous, busyTimeoutMs: options.busyTimeoutMs }, maxBatch: options.maxBatch, projectionModule, gaveUp },
  });
  const pending = new Map<number, Pending>();
  let markStarted = (): void => {};
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  let nextId = 1;
  // One message per turn of the event loop, not per unit: each message costs a wake-up and a clone on both
  // sides (measured: the ledger's CPU per request fell from 122 to 102 µs with one message per turn).
  let outbox: Array<{ id: number; op: WriteOp }> = [];
  const send = () => {
    if (outbox.length === 0) return;
    const units = outbox;
    outbox = [];
    try {
      worker.postMessage({ units } satisfies ToWriter);
    } catch (err) {
      // A unit that cannot be copied to the writer (not plain data): none of this message was written.
      const why = `ledger write not submitted: ${err instanceof Error ? err.message : String(err)}`;
      for (const u of units) {
        pending.get(u.id)?.reject(new LedgerUnavailableError(why));
        pending.delete(u.id);
      }
    }
  };
  let broken: string | null = null;
  let closed: (() => void) | null = null;
  let closing: Promise<void> | null = null;

  const failAll = (why: string) => {
    broken ??= why;
    for (const p of pending.values()) p.reject(new LedgerUnavailableError(why));
    pending.clear();
  };
  worker.on('message', (msg: FromWriter) => {
    markStarted();
    if ('results' in msg) {
      for (const [id, outcome] of msg.results) {
        const p = pending.get(id);
        pending.delete(id);
        if (p) settle(p, outcome);
      }
    } else if ('openError' in msg) {
      failAll(`ledger writer could not open the file: ${msg.openError}`);
    } else if ('closed' in msg) {
      closed?.();
    }
  });
  worker.on('error', (err) => failAll(`ledger writer thread failed: ${err.message}`));
  worker.on('exit', () => {
    markStarted();
    failAll('ledger writer thread exited');
    closed?.();
  });

  return {
    started,
    submit(op, caller) {
      if (broken !== null) return Promise.reject(new LedgerUnavailableError(broken));
      return new Promise((resolve, reject) => {
        const id = nextId++;
        // The writer looks at the slot right before it writes the unit, its lock held (writerWorker.ts).
        caller.onGiveUp = () => markGaveUp(slots, id);
        pending.set(id, { resolve, reject });
        if (outbox.push({ id, op }) === 1) setImmediate(send);
      });
    },
    problem: () => broken,
    close() {
      if (closing !== null) return closing;
      if (broken !== null) return worker.terminate().then(() => undefined);
      closing = new Promise<void>((resolve) => {
        closed = resolve;
        send(); // units submitted in this turn go first
        worker.postMessage({ close: true } satisfies ToWriter);
      }).then(() => {
        broken = 'ledger is closed';
      });
      return closing;
    },
  };
}

function watchOpenedFile(path: string, o: NonNullable<SqliteStoreOptions['watchFile']>): FileWatch {
  const opened = fileIdentity(path);
  if (opened === null) throw new LedgerUnavailableError(`ledger file ${path} vanished while it was being opened`);
  return watchFileIdentity(path, opened, o.intervalMs ?? 1000, o.onLost ?? (() => {}));
}

/** The database file a connection has open, as SQLite names it (symbolic links resolved). */
function openedFile(db: Database.Database): string {
  const main = (db.pragma('database_list') as Array<{ name: string; file: string }>).find((d) => d.name === 'main');
  if (main === undefined || main.file === '') throw new LedgerUnavailableError('the ledger connection has no file');
  return main.file;
}

export function openSqliteStore(options: SqliteStoreOptions): SqliteEventStore {
  const { path, projection, synchronous = 'FULL', busyTimeoutMs = 5000, clock = Date.now, maxBatch = 512, writer = 'inline' } = options;
  // FULL on this thread: the commit at NORMAL, then the WAL synced off the event loop before anything is answered.
  const syncsWal = writer === 'inline' && synchronous === 'FULL' && path !== ':memory:';
  // This connection creates and migrates the file first, so the writer thread finds it ready.
  const db = openDatabase({ path, synchronous: syncsWal ? 'NORMAL' : synchronous, busyTimeoutMs });
  let watch: FileWatch | null = null;
  let wal: WalSync | null = null;
  let parts: { events: EventsTable; ledger: LedgerTable; requests: RequestsTable; w: Writer };
  const fileLost = (): string | null => watch?.check() ?? null;
  try {
    if (options.watchFile !== undefined && path !== ':memory:') watch = watchOpenedFile(path, options.watchFile);
    // The WAL is named after the file SQLite opened, a symbolic link at `path` resolved.
    if (syncsWal) wal = (options.walSync ?? walSync)(openedFile(db));
    parts = {
      events: eventsTable(db),
      ledger: ledgerTable(db, projection),
      requests: requestsTable(db),
      w: writer === 'thread'
        ? threadWriter({ path, synchronous, busyTimeoutMs, maxBatch, projection })
        : inlineWriter(db, { maxBatch, projection, busyTimeoutMs, wal, fileLost }),
    };
  } catch (err) {
    watch?.stop();
    wal?.close();
    db.close();
    throw unavailable(err, `open of ${path}`);
  }
  const { events, ledger, requests, w } = parts;
  let closed = false;
  const deadlineMs = writeDeadlineMs(busyTimeoutMs);
  const claimDeadlineMs = writeDeadlineMs(busyTimeoutMs, options.claimDeadlineMs);
  const actorFor = actorsOf(options.actor);

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

  /** Runs `fn` on this thread's connection: reads, and the few maintenance steps that cannot run in a batch. */
  function onConnection<T>(what: string, fn: () => T): StoreResult<T> {
    return storeResult(what, () => {
      if (closed) throw new LedgerClosedError();
      try {
        return fn();
      } catch (err) {
        throw err instanceof LedgerCorruptError ? err : unavailable(err, what);
      }
    });
  }
  const read = <T>(fn: () => T) => onConnection('read', fn);

  return {
    path,
    db,
    appendEvents(guid: string, expectedSeq: number, newEvents: readonly NewEvent[], audit?: EventAudit): StoreResult<AppendResult> {
      return storeResult('write', () => write({ op: 'append', guid, expectedSeq, events: newEvents, actor: actorFor(audit) }));
    },
    execute(guid: string, command: Command, audit?: EventAudit, seen?: SeenRow): StoreResult<ExecuteResult> {
      return storeResult('write', () => write({ op: 'execute', guid, command, now: clock(), actor: actorFor(audit), ...(seen === undefined ? {} : { seen: seen.state }) }));
    },
    recordRequests(records: readonly RequestRecord[]): StoreResult<void> {
      return storeResult('write', async () => {
        if (records.length > 0) await write({ op: 'recordRequests', records });
      });
    },
    readRequests(guid: string): StoreResult<StoredRequestRecord[]> {
      return read(() => requests.read(guid));
    },
    now(): StoreResult<number> {
      return onConnection('clock', () => clock());
    },
    readStream(guid: string): StoreResult<StoredEvent[]> {
      return read(() => events.stream(guid).map(rowToEvent));
    },
    readAll(afterPosition: number, limit: number): StoreResult<StoredEvent[]> {
      return read(() => events.all(afterPosition, limit).map(rowToEvent));
    },
    getLedger(guid: string) {
      return read(() => ledger.read(guid));
    },
    queryLedger(query: LedgerQuery) {
      return read(() => ledger.query(query));
    },
    countLedger(query: LedgerQuery) {
      return read(() => ledger.count(query));
    },
    removeTombstones(before: number) {
      return storeResult('write', () => write({ op: 'removeTombstones', before }));
    },
    recordUnclearInquiry(guid: string, sentAt: number, at: number, minAgeMs: number) {
      return storeResult('write', () => write({ op: 'recordUnclearInquiry', guid, sentAt, at, minAgeMs }));
    },
    leaseRows(holder: string, rows: readonly LeaseRequest[], forMs: number): StoreResult<Set<string>> {
      return storeResult('write', async () => {
        if (rows.length === 0) return new Set<string>();
        const plain = rows.map(({ guid, lastSeq }) => ({ guid, lastSeq }));
        return new Set(await write({ op: 'leaseRows', holder, rows: plain, now: clock(), forMs }));
      });
    },
    releaseLeases(holder: string): StoreResult<void> {
      return storeResult('write', async () => {
        await write({ op: 'releaseLeases', holder, now: clock() });
      });
    },
    spaceOnDisk() {
      return onConnection('size', () => fileBytes(path));
    },
    reclaimSpace() {
      // Not a batch unit: a WAL checkpoint cannot run inside the writer's transaction.
      return storeResult('vacuum', async () => {
        const bytesBefore = await orThrow(onConnection('vacuum', () => fileBytes(path)));
        // In steps, each its own short transaction, with a pause between them longer than a waiting writer's retry
        // (LOCK_RETRY_MAX_MS): a ledger with many free pages (the first purge after migration 7) would otherwise
        // hold the write lock for as long as moving them all takes, and a serve on the file would answer E503.
        for (let before = Infinity; ; ) {
          const left = await orThrow(onConnection('vacuum', () => {
            db.pragma(`incremental_vacuum(${VACUUM_STEP_PAGES})`);
            return db.pragma('freelist_count', { simple: true }) as number;
          }));
          // Done, or nothing moves (a file made before auto_vacuum was set keeps its free pages for new rows).
          if (left === 0 || left >= before) break;
          before = left;
          await new Promise((r) => setTimeout(r, VACUUM_PAUSE_MS));
        }
        // Fold the WAL back into the file and truncate it, so the freed pages leave the disk too.
        return orThrow(onConnection('vacuum', () => {
          db.pragma('wal_checkpoint(TRUNCATE)');
          return { bytesBefore, bytesAfter: fileBytes(path) };
        }));
      });
    },
    countByStatus() {
      return read(() => statusSummary(ledger.countByStatus()));
    },
    rebuildProjection() {
      return storeResult('write', () => write({ op: 'rebuild' }));
    },
    verifyProjection(): StoreResult<ProjectionDifference[]> {
      // One read transaction: the log and the projection are compared as of the same instant.
      return onConnection('verify', () => db.transaction(() => projection.compare(events.foldAll(), ledger.query({})))());
    },
    ping() {
      return storeResult('ping', async () => {
        if (closed) throw new LedgerClosedError();
        const problem = w.problem();
        if (problem !== null) throw new LedgerUnavailableError(problem);
        const lost = fileLost();
        if (lost !== null) throw new LedgerUnavailableError(lost);
        try {
          db.prepare('SELECT 1').get();
        } catch (err) {
          throw unavailable(err, 'ping');
        }
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
        db.close();
      });
    },
  };
}
