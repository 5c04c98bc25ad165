import type pg from 'pg';
import type { LedgerState } from '../../events/state.js';
import type { AppendResult, ExecuteResult, LedgerProjection } from '../../events/store.js';
import { LedgerCorruptError, LedgerUnavailableError } from '../../events/errors.js';
import { isConnectionLost, isReadOnly, isRetryable, isUniqueViolation } from './errors.js';
import { ledgerColumns } from './ledgerColumns.js';
import { CALLER_GAVE_UP, type Caller } from '../shared/writeDeadline.js';
import { readsNothingFirst, runProtocol, type AsyncWriteIo, type UnitOutcome, type WriteUnit } from '../shared/writeProtocol.js';
import { batcher } from '../shared/batcher.js';
import { BEGIN_WRITE, beginAtServerTime, serverNow } from './serverClock.js';
import { lockRows, redactionsFor, takenSeqs, writeBatch, writeStatement, type BatchSql } from './writeBatch.js';

/** The outcome of a unit left unwritten because its caller gave up; nobody reads it. */
const callerGaveUp = (): { ok: false; error: Error } => ({ ok: false, error: new LedgerUnavailableError(CALLER_GAVE_UP) });

/** Rounds inside one transaction: a GUID claimed by another process meanwhile is decided again, locked. */
const MAX_ROUNDS = 3;
/** Whole-batch attempts after a deadlock, a serialization failure or a stale projection (nothing was durable). */
const MAX_ATTEMPTS = 8;

/** How one transaction of a batch ended. */
type Attempt =
  | { readonly kind: 'committed'; readonly outcomes: UnitOutcome[] }
  /** Found before COMMIT: some of the batch's callers stopped waiting; nothing was committed. */
  | { readonly kind: 'callersGaveUp' }
  /** `at`: where it failed: BEGIN (nothing sent), inside the transaction (not committed), or COMMIT (unknown). */
  | { readonly kind: 'failed'; readonly cause: unknown; readonly at: 'begin' | 'transaction' | 'commit' };

/** How a batch ended: `again` when nothing of it was committed and a new connection may run it (to the primary as it is now). */
export type BatchResult = { readonly kind: 'committed'; readonly outcomes: UnitOutcome[] } | { readonly kind: 'failed'; readonly cause: unknown; readonly again: boolean };

/** The store's side of the write protocol (src/store/shared/writeProtocol.ts) on one connection, inside its transaction. */
function writeIo(client: pg.ClientBase, projection: LedgerProjection, sql: BatchSql, begunAt: number | undefined): AsyncWriteIo {
  let firstClock = begunAt;
  return {
    async read(guids, clock) {
      const read = guids.length === 0 ? { rows: new Map<string, LedgerState>(), unreadable: new Map<string, unknown>() } : await lockRows(client, guids, projection.rowToState);
      // Read after the round's rows are locked: an event is stamped no earlier than the event of any transaction
      // it waited for, so a stream's times never go backwards (as long as the server's clock does not).
      const now = firstClock ?? (clock ? await serverNow(client) : undefined);
      firstClock = undefined;
      return now === undefined ? read : { ...read, now };
    },
    taken: (plan) => takenSeqs(client, plan),
    write: async (plan) => writeBatch(client, sql, plan, await redactionsFor(client, plan.purged)),
  };
}

/**
 * One transaction for the whole batch (the database's isolation level, READ COMMITTED by default;
 * synchronous_commit on), the write protocol's rounds inside it: lock the rows, decide in JS, write everything in one
 * statement; then commit. A batch decided on the rows its callers saw is three round trips: BEGIN with the server's
 * clock, the write, COMMIT. Ends only after COMMIT, so no caller calls the account system before its claim is
 * durable. Under SERIALIZABLE an INSERT meeting another transaction's row fails with 40001, and `runBatch` runs the
 * batch again.
 */
async function runOnce(client: pg.ClientBase, units: readonly WriteUnit[], checkTaken: boolean, projection: LedgerProjection, sql: BatchSql, gaveUp: (index: number) => boolean): Promise<Attempt> {
  const clockAtBegin = readsNothingFirst(units) && units.some((u) => u.op === 'execute' && u.now === undefined);
  let begunAt: number | undefined;
  try {
    if (clockAtBegin) begunAt = await beginAtServerTime(client);
    else await client.query(BEGIN_WRITE);
  } catch (cause) {
    return { kind: 'failed', cause, at: 'begin' };
  }
  let outcomes: UnitOutcome[];
  try {
    outcomes = await runProtocol(units, { stateToRow: projection.stateToRow, maxRounds: MAX_ROUNDS, checkTaken }, writeIo(client, projection, sql, begunAt));
  } catch (cause) {
    return { kind: 'failed', cause, at: 'transaction' };
  }
  // The last moment to leave out a unit whose caller has answered without it (as SQLite's writer does): a claim
  // committed after its caller gave up would be an orphan no one calls for, and E503 promised "nothing written".
  if (units.some((_, i) => gaveUp(i))) return { kind: 'callersGaveUp' };
  try {
    await client.query('COMMIT');
  } catch (cause) {
    return { kind: 'failed', cause, at: 'commit' };
  }
  return { kind: 'committed', outcomes };
}

const rollback = (client: pg.ClientBase) => client.query('ROLLBACK').then(() => undefined, () => undefined);

/**
 * Runs the batch (`runOnce`), again after a deadlock, a serialization failure or a stale projection, and without
 * the units whose callers gave up (`gaveUp(i)`, asked before COMMIT) when there were any: their outcome is an error
 * nobody reads, and nothing of them is written. A connection that failed (or stopped answering: query_timeout)
 * takes no ROLLBACK: it is closed, and with it the transaction.
 */
export async function runBatch(client: pg.ClientBase, units: readonly WriteUnit[], projection: LedgerProjection, sql: BatchSql, gaveUp: (index: number) => boolean = () => false): Promise<BatchResult> {
  const outcomes: UnitOutcome[] = new Array(units.length);
  let live = units.map((_, i) => i);
  let checkTaken = false;
  for (let attempt = 1; live.length > 0; ) {
    const tried = await runOnce(client, live.map((i) => units[i]!), checkTaken, projection, sql, (k) => gaveUp(live[k]!));
    if (tried.kind === 'committed') {
      tried.outcomes.forEach((o, k) => (outcomes[live[k]!] = o));
      return { kind: 'committed', outcomes };
    }
    if (tried.kind === 'callersGaveUp') {
      await rollback(client);
      for (const i of live) if (gaveUp(i)) outcomes[i] = callerGaveUp();
      live = live.filter((i) => !gaveUp(i));
      continue;
    }
    const { cause, at } = tried;
    if (at === 'begin') return { kind: 'failed', cause, again: true };
    const lost = isConnectionLost(cause);
    if (!lost) await rollback(client);
    // Lost before COMMIT was sent, or the server turned read-only (25006, a demoted primary): the server never
    // committed it. (A row that did not decode is the ledger's problem, not the connection's.) Lost once COMMIT
    // was sent, it may have committed: never run again.
    if (at === 'transaction' && !(cause instanceof LedgerCorruptError) && (lost || isReadOnly(cause))) return { kind: 'failed', cause, again: true };
    // A deadlock or serialization failure (at COMMIT too, under SERIALIZABLE) committed nothing; a unique violation in
    // the log means a projection row behind its log: run again, checking the keys first.
    if (!lost && attempt < MAX_ATTEMPTS && (isRetryable(cause) || isUniqueViolation(cause))) {
      checkTaken ||= isUniqueViolation(cause);
      // A random pause, so that two processes whose batches collided do not collide again at once.
      if (isRetryable(cause)) await new Promise((resolve) => setTimeout(resolve, Math.random() * 10 * attempt));
      attempt++;
      continue;
    }
    return { kind: 'failed', cause, again: false };
  }
  return { kind: 'committed', outcomes };
}

export interface GroupCommit {
  /** `caller.gaveUp`, once set, leaves the unit unwritten if it is not yet committed (checked before each batch's COMMIT). */
  submit(unit: WriteUnit, caller?: Caller): Promise<AppendResult | ExecuteResult>;
  /** Waits for every submitted unit to be settled. */
  drain(): Promise<void>;
}

/**
 * Group commit: units submitted while batches are being written (or in the same turn of the event loop)
 * go together in the next batch, one transaction and a handful of round trips for all of them. Up to
 * `maxInFlight` batches run at once on their own connections, so one batch's work overlaps another's
 * commit (PostgreSQL flushes the WAL of concurrent commits together). `fail` turns a database error into
 * the error every unit of the failed batch rejects with.
 */
export function groupCommit(pool: pg.Pool, options: { maxBatch: number; maxInFlight: number; fail: (err: unknown) => Error; projection: LedgerProjection }): GroupCommit {
  const columns = ledgerColumns(options.projection.columns);
  const sql: BatchSql = { columns, write: writeStatement(columns) };
  const { maxBatch, maxInFlight, fail } = options;
  /** A batch on a connection of its own; a connection whose batch failed may be broken, so it is closed, never reused. */
  async function onConnection(units: readonly WriteUnit[], callers: readonly Caller[]): Promise<BatchResult> {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (cause) {
      return { kind: 'failed', cause, again: false };
    }
    const result = await runBatch(client, units, options.projection, sql, (i) => callers[i]!.gaveUp).catch((cause: unknown): BatchResult => ({ kind: 'failed', cause, again: false }));
    client.release(result.kind === 'failed');
    return result;
  }

  async function write(units: readonly WriteUnit[], callers: readonly Caller[]): Promise<UnitOutcome[]> {
    // A connection that died while idle in the pool (PostgreSQL restarted) fails at BEGIN, before anything was
    // sent; one lost (or whose server turned read-only) before COMMIT was sent took nothing with it: then, once, the
    // batch takes a new connection, to the primary as it is now. A failure once COMMIT was sent may have
    // committed, so it is never run again here.
    let result = await onConnection(units, callers);
    if (result.kind === 'failed' && result.again) result = await onConnection(units, callers);
    if (result.kind === 'committed') return result.outcomes;
    const error = fail(result.cause);
    return units.map(() => ({ ok: false, error }));
  }

  type Queued = { readonly unit: WriteUnit; readonly caller: Caller; readonly resolve: (v: AppendResult | ExecuteResult) => void; readonly reject: (e: unknown) => void };
  const queue = batcher<Queued>({
    maxBatch,
    maxInFlight,
    async run(taken) {
      // Units whose callers stopped waiting while queued are not written (their callers answered E503).
      for (const b of taken) if (b.caller.gaveUp) b.reject(callerGaveUp().error);
      const batch = taken.filter((b) => !b.caller.gaveUp);
      if (batch.length === 0) return;
      const outcomes = await write(batch.map((b) => b.unit), batch.map((b) => b.caller));
      batch.forEach((b, i) => {
        const o = outcomes[i]!;
        if (o.ok) b.resolve(o.value);
        else b.reject(o.error);
      });
    },
  });

  return {
    submit: (unit, caller = { gaveUp: false }) => new Promise((resolve, reject) => queue.push({ unit, caller, resolve, reject })),
    drain: () => queue.drain(),
  };
}
