import type pg from 'pg';
import type { StoredEvent } from '../../events/codecs.js';
import type { LedgerState } from '../../events/state.js';
import type { AppendResult, ExecuteResult } from '../../events/store.js';
import { LedgerCorruptError, LedgerUnavailableError } from '../../events/errors.js';
import { isConnectionLost, isReadOnly, isRetryable, isUniqueViolation } from './errors.js';
import { planBatch, type Unit, type UnitPlan } from './planBatch.js';
import type { LedgerProjection } from '../../events/store.js';
import { ledgerColumns } from './ledgerColumns.js';
import { executeResultOf } from '../shared/executeResult.js';
import { CALLER_GAVE_UP, type Caller } from '../shared/writeDeadline.js';
import { BEGIN_WRITE, beginAtServerTime, serverNow } from './serverClock.js';
import { withClient } from './pools.js';
import { eventKey, lockRows, redactionsFor, takenSeqs, writeBatch, writeStatement, type BatchSql } from './writeBatch.js';

/** BEGIN itself failed (typically a pooled connection the server had closed): nothing was sent yet. */
class NotBegunError extends Error {
  constructor(override readonly cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

/**
 * The transaction failed before COMMIT was sent, on a connection that was lost (the server went away, a failover)
 * or on a server that turned read-only (25006, a demoted primary): the server never committed it, so the batch may
 * run again, on a new connection, which goes to the writable primary (hosts.ts). A failure once COMMIT was sent
 * is never this: its outcome is unknown, and its units fail (E503; the sweep and inquiries settle what was claimed).
 */
class NotCommittedError extends Error {
  constructor(override readonly cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

/** Found before COMMIT: some of the batch's callers stopped waiting. The batch is rolled back and run without them. */
class CallersGaveUp extends Error {}

/** The outcome of a unit left unwritten because its caller gave up; nobody reads it. */
const callerGaveUp = (): { ok: false; error: Error } => ({ ok: false, error: new LedgerUnavailableError(CALLER_GAVE_UP) });

/**
 * A unit as submitted: an `execute` without `now` is decided at the database's clock, so that every host
 * running against one database stamps events and judges orphans by the same clock (CONTRACT.md §4).
 */
export type SubmittedUnit = Exclude<Unit, { op: 'execute' }> | (Omit<Extract<Unit, { op: 'execute' }>, 'now'> & { readonly now?: number });

/**
 * The units with every missing `now` set to the server's clock: `begunAt` when the transaction read it as it began
 * (a round that locks nothing), else read now, after the round's rows are locked: an event is stamped no earlier than
 * the event of any transaction it waited for, so a stream's times never go backwards (as long as the server's clock
 * does not), whichever host wrote them.
 */
async function atServerTime(client: pg.ClientBase, units: readonly SubmittedUnit[], begunAt?: number): Promise<Unit[]> {
  if (units.every((u) => u.op !== 'execute' || u.now !== undefined)) return units as Unit[];
  const now = begunAt ?? (await serverNow(client));
  return units.map((u) => (u.op === 'execute' && u.now === undefined ? { ...u, now } : u) as Unit);
}

/**
 * The GUIDs a batch's first round decides on the rows their callers saw (`execute`'s `seen`), neither read nor locked:
 * those whose every unit brings the same one (a GUID with an `appendEvents`, a unit without `seen` or two different
 * rows is read and locked as usual). The write's compare-and-set tells whether the row still is what was seen: the
 * UPDATE moves it only from the seen `last_seq`, the INSERT of a new row does nothing over a row that exists. A GUID
 * that loses there, or that the round wrote nothing for (only refusals or errors, decided on a row that may be out of
 * date), is locked and decided again in the next round, so the result is the one without `seen`. (A GUID written and
 * won had the row seen, so the refusals beside it in the batch stand.)
 */
function trustedRows(units: readonly SubmittedUnit[]): Map<string, LedgerState | null> {
  const trusted = new Map<string, LedgerState | null>();
  const distrusted = new Set<string>();
  for (const u of units) {
    if (u.op !== 'execute' || u.seen === undefined || (trusted.has(u.guid) && trusted.get(u.guid) !== u.seen)) distrusted.add(u.guid);
    else trusted.set(u.guid, u.seen);
  }
  for (const guid of distrusted) trusted.delete(guid);
  return trusted;
}

export type UnitOutcome = { readonly ok: true; readonly value: AppendResult | ExecuteResult } | { readonly ok: false; readonly error: unknown };

/** Rounds inside one transaction: a GUID claimed by another process meanwhile is decided again, locked. */
const MAX_ROUNDS = 3;
/** Whole-batch attempts after a deadlock, a serialization failure or a stale projection (nothing was durable). */
const MAX_ATTEMPTS = 8;

function finish(unit: Pick<SubmittedUnit, 'op'>, plan: UnitPlan, positions: ReadonlyMap<string, number>): UnitOutcome {
  if (plan.kind === 'error') return { ok: false, error: plan.error };
  if (plan.kind === 'refused') return { ok: true, value: { kind: 'refused', refusal: plan.refusal } };
  const append: AppendResult =
    plan.kind === 'won'
      ? { won: true, state: plan.state, events: plan.events.map((p) => ({ ...p.event, guid: p.guid, seq: p.seq, position: positions.get(eventKey(p.guid, p.seq)) ?? -1, actor: p.actor }) as StoredEvent) }
      : { won: false, state: plan.state };
  return { ok: true, value: unit.op === 'execute' ? executeResultOf(append) : append };
}

/**
 * One transaction for the whole batch (the database's isolation level, READ COMMITTED by default;
 * synchronous_commit on): lock the batch's rows (none in the first round for GUIDs decided on the rows their
 * callers saw: `trustedRows`), decide in JS, write everything in one statement, commit. A batch of claims and
 * outcomes is three round trips: BEGIN with the server's clock, the write, COMMIT. Returns only after COMMIT, so no caller calls the
 * account system before its claim is durable. A GUID whose row another transaction created first (its
 * INSERT waited for that transaction and then found the row) is locked and decided again in the next round.
 * Under SERIALIZABLE that INSERT fails with 40001 instead, and `runBatch` runs the batch again.
 * Any database error rejects: the caller fails every unit of the batch.
 */
async function runOnce(client: pg.ClientBase, submitted: readonly SubmittedUnit[], guarded: boolean, projection: LedgerProjection, sql: BatchSql, gaveUp: (index: number) => boolean): Promise<UnitOutcome[]> {
  const outcomes: Array<UnitOutcome | undefined> = new Array(submitted.length);
  let pending = submitted.map((_, i) => i);
  let lastRead = new Map<string, LedgerState>();
  let trusted = trustedRows(submitted);
  // Nothing to lock before the first decision: BEGIN reads the server's clock in the same round trip.
  const begin = trusted.size === new Set(submitted.map((u) => u.guid)).size && submitted.some((u) => u.op === 'execute' && u.now === undefined);
  let begunAt: number | undefined;
  try {
    if (begin) begunAt = await beginAtServerTime(client);
    else await client.query(BEGIN_WRITE);
  } catch (err) {
    throw new NotBegunError(err);
  }
  try {
    // One round more when the first decided on seen rows: a stale one costs that round, not a conflict's.
    const rounds = trusted.size > 0 ? MAX_ROUNDS + 1 : MAX_ROUNDS;
    for (let round = 0; round < rounds && pending.length > 0; round++) {
      const toLock = [...new Set(pending.map((i) => submitted[i]!.guid))].filter((guid) => !trusted.has(guid));
      lastRead = toLock.length === 0 ? new Map() : await lockRows(client, toLock, projection.rowToState);
      const roundUnits = await atServerTime(client, pending.map((i) => submitted[i]!), round === 0 ? begunAt : undefined);
      const stored = new Map(lastRead);
      for (const [guid, state] of trusted) if (state !== null) stored.set(guid, state);
      let plan = planBatch(roundUnits, stored, projection.stateToRow);
      if (guarded && plan.events.length > 0) {
        const blocked = await takenSeqs(client, plan);
        if (blocked.size > 0) plan = planBatch(roundUnits, stored, projection.stateToRow, blocked);
      }
      const written = plan.rows.length === 0 ? { won: new Set<string>(), positions: new Map<string, number>() } : await writeBatch(client, sql, plan, await redactionsFor(client, plan.purged));
      const writtenGuids = new Set(plan.rows.map((r) => r.row.guid));
      const next: number[] = [];
      roundUnits.forEach((u, k) => {
        const again = writtenGuids.has(u.guid) ? !written.won.has(u.guid) : trusted.has(u.guid);
        if (again) next.push(pending[k]!);
        else outcomes[pending[k]!] = finish(u, plan.units[k]!, written.positions);
      });
      pending = next;
      trusted = new Map();
    }
    for (const i of pending) {
      const u = submitted[i]!;
      outcomes[i] = finish(u, { kind: 'lost', state: lastRead.get(u.guid) ?? null }, new Map());
    }
    // The last moment to leave out a unit whose caller has answered without it (as SQLite's writer does): a claim
    // committed after its caller gave up would be an orphan no one calls for, and E503 promised "nothing written".
    if (submitted.some((_, i) => gaveUp(i))) throw new CallersGaveUp();
  } catch (err) {
    // (A unit's caller giving up, a row that did not decode: the caller's to handle, not the connection's.)
    if (!(err instanceof CallersGaveUp) && !(err instanceof LedgerCorruptError) && (isConnectionLost(err) || isReadOnly(err))) throw new NotCommittedError(err);
    throw err;
  }
  await client.query('COMMIT');
  return outcomes as UnitOutcome[];
}

/**
 * Runs the batch (`runOnce`), again after a deadlock, a serialization failure or a stale projection, and without
 * the units whose callers gave up (`gaveUp(i)`, asked before COMMIT) when there were any: their outcome is an error
 * nobody reads, and nothing of them is written.
 */
export async function runBatch(client: pg.ClientBase, units: readonly SubmittedUnit[], projection: LedgerProjection, sql: BatchSql, gaveUp: (index: number) => boolean = () => false): Promise<UnitOutcome[]> {
  const outcomes: UnitOutcome[] = new Array(units.length);
  let live = units.map((_, i) => i);
  let guarded = false;
  for (let attempt = 1; ; attempt++) {
    if (live.length === 0) return outcomes;
    try {
      const done = await runOnce(client, live.map((i) => units[i]!), guarded, projection, sql, (k) => gaveUp(live[k]!));
      done.forEach((o, k) => (outcomes[live[k]!] = o));
      return outcomes;
    } catch (err) {
      if (err instanceof NotBegunError) throw err;
      if (err instanceof NotCommittedError) {
        if (!isConnectionLost(err.cause)) await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
      // A connection that failed (or stopped answering: query_timeout) takes no ROLLBACK; it is closed, and with it the transaction.
      if (!isConnectionLost(err) || err instanceof CallersGaveUp) await client.query('ROLLBACK').catch(() => undefined);
      if (err instanceof CallersGaveUp) {
        for (const i of live) if (gaveUp(i)) outcomes[i] = callerGaveUp();
        live = live.filter((i) => !gaveUp(i));
        attempt--;
        continue;
      }
      // A unique violation in the log means a projection row behind its log: run again, checking the keys first.
      if (attempt < MAX_ATTEMPTS && (isRetryable(err) || isUniqueViolation(err))) {
        guarded ||= isUniqueViolation(err);
        // A random pause, so that two processes whose batches collided do not collide again at once.
        if (isRetryable(err)) await new Promise((resolve) => setTimeout(resolve, Math.random() * 10 * attempt));
        continue;
      }
      throw err;
    }
  }
}

export interface GroupCommit {
  /** `caller.gaveUp`, once set, leaves the unit unwritten if it is not yet committed (checked before each batch's COMMIT). */
  submit(unit: SubmittedUnit, caller?: Caller): Promise<AppendResult | ExecuteResult>;
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
  const queue: Array<{ unit: SubmittedUnit; caller: Caller; resolve: (v: AppendResult | ExecuteResult) => void; reject: (e: unknown) => void }> = [];
  let inFlight = 0;
  let scheduled = false;
  const idle: Array<() => void> = [];

  async function write(units: readonly SubmittedUnit[], callers: readonly Caller[]): Promise<UnitOutcome[]> {
    // A connection that died while idle in the pool (PostgreSQL restarted) fails at BEGIN, before anything was
    // sent; one lost (or whose server turned read-only) before COMMIT was sent took nothing with it: then, once, the
    // batch takes a new connection, to the primary as it is now. A failure once COMMIT was sent may have
    // committed, so it is never retried here.
    for (let attempt = 1; ; attempt++) {
      try {
        // A connection that failed may be broken: it is closed, never handed out again.
        return await withClient(pool, (client) => runBatch(client, units, options.projection, sql, (i) => callers[i]!.gaveUp));
      } catch (err) {
        const notWritten = err instanceof NotBegunError || err instanceof NotCommittedError;
        if (notWritten && attempt < 2) continue;
        const error = fail(notWritten ? err.cause : err);
        return units.map(() => ({ ok: false, error }));
      }
    }
  }

  function pump(): void {
    scheduled = false;
    while (inFlight < maxInFlight && queue.length > 0) {
      // Units whose callers stopped waiting while queued are not written (their callers answered E503).
      const taken = queue.splice(0, maxBatch);
      for (const b of taken) if (b.caller.gaveUp) b.reject(callerGaveUp().error);
      const batch = taken.filter((b) => !b.caller.gaveUp);
      if (batch.length === 0) continue;
      inFlight++;
      void write(batch.map((b) => b.unit), batch.map((b) => b.caller)).then((outcomes) => {
        batch.forEach((b, i) => {
          const o = outcomes[i]!;
          if (o.ok) b.resolve(o.value);
          else b.reject(o.error);
        });
        inFlight--;
        schedule();
        if (inFlight === 0 && queue.length === 0) for (const wake of idle.splice(0)) wake();
      });
    }
  }

  function schedule(): void {
    if (scheduled || queue.length === 0) return;
    scheduled = true;
    setImmediate(pump);
  }

  return {
    submit(unit, caller = { gaveUp: false }) {
      return new Promise((resolve, reject) => {
        queue.push({ unit, caller, resolve, reject });
        schedule();
      });
    },
    drain() {
      if (inFlight === 0 && queue.length === 0) return Promise.resolve();
      return new Promise((resolve) => idle.push(resolve));
    },
  };
}
