import type { StoredEvent } from '../../events/codecs.js';
import type { LedgerState } from '../../events/state.js';
import type { AppendResult, ExecuteResult, LedgerProjection } from '../../events/store.js';
import { executeResultOf } from './executeResult.js';
import { planBatch, type BatchPlan, type PlannedEvent, type Unit, type UnitPlan } from './planBatch.js';

/**
 * The write rule both stores follow, written once: decide every unit of a batch on the rows its callers saw or on
 * rows read (locked) in the write transaction, write the plan with a compare-and-set per row, and decide again,
 * on rows read now, every GUID whose write lost; a GUID still losing when the rounds run out has lost its race,
 * and its units answer with the row as it is (`exists` for an execute). The stores supply only the reads, the
 * write and the commit (`WriteIo`); the protocol is a generator, so SQLite drives it synchronously inside its
 * transaction and PostgreSQL with a round trip per step.
 */

/**
 * A unit as submitted: an `execute` without `now` is decided at the clock the store reads with the rows (the
 * database's clock on PostgreSQL, so that every host stamps events by one clock: CONTRACT.md §4).
 */
export type WriteUnit = Exclude<Unit, { op: 'execute' }> | (Omit<Extract<Unit, { op: 'execute' }>, 'now'> & { readonly now?: number });

export type UnitOutcome = { readonly ok: true; readonly value: AppendResult | ExecuteResult } | { readonly ok: false; readonly error: unknown };

/** What a store's write of a plan did. */
export interface WriteOutcome {
  /** GUIDs whose row moved (or was created) as planned, with their events; nothing of any other GUID was written. */
  readonly won: ReadonlySet<string>;
  /** The global position of each written event, by `eventKey`. */
  readonly positions: ReadonlyMap<string, number>;
}

export const eventKey = (guid: string, seq: number) => `${guid}#${seq}`;

/** The rows a store read for a round; a row that does not decode fails its GUID's units alone (`unreadable`). */
export interface RowsRead {
  readonly rows: ReadonlyMap<string, LedgerState>;
  readonly unreadable?: ReadonlyMap<string, unknown>;
  /** The time to decide at, for units submitted without one. */
  readonly now?: number;
}

/** One thing the protocol asks of the store, answered by the matching `StepAnswer`. */
export type WriteStep =
  /** Read (lock) these GUIDs' rows; `clock`: also the time to decide at, for units submitted without one. */
  | { readonly kind: 'read'; readonly guids: readonly string[]; readonly clock: boolean }
  /** Which of the plan's GUIDs' next seqs the log already holds (asked only with `checkTaken`). */
  | { readonly kind: 'taken'; readonly plan: BatchPlan }
  | { readonly kind: 'write'; readonly plan: BatchPlan };

export type StepAnswer =
  | ({ readonly kind: 'read' } & RowsRead)
  | { readonly kind: 'taken'; readonly guids: ReadonlySet<string> }
  | { readonly kind: 'write'; readonly written: WriteOutcome };

export interface ProtocolOptions {
  readonly stateToRow: LedgerProjection['stateToRow'];
  /** Rounds for GUIDs read (locked); one more is added when the first round decides on rows callers saw. */
  readonly maxRounds: number;
  /** Ask which seqs the log already holds before each write (a projection found behind its log). */
  readonly checkTaken: boolean;
}

/**
 * The GUIDs the first round decides on the rows their callers saw (`execute`'s `seen`), neither read nor locked:
 * those whose every unit brings the same one (a GUID with an `append`, a unit without `seen` or two different rows
 * is read as usual). The write's compare-and-set tells whether the row still is what was seen. A GUID that loses
 * there, or that the round wrote nothing for (only refusals or errors, decided on a row that may be out of date),
 * is read and decided again in the next round, so the result is the one without `seen`.
 */
export function trustedRows(units: readonly WriteUnit[]): Map<string, LedgerState | null> {
  const trusted = new Map<string, LedgerState | null>();
  const distrusted = new Set<string>();
  for (const u of units) {
    if (u.op !== 'execute' || u.seen === undefined || (trusted.has(u.guid) && trusted.get(u.guid) !== u.seen)) distrusted.add(u.guid);
    else trusted.set(u.guid, u.seen);
  }
  for (const guid of distrusted) trusted.delete(guid);
  return trusted;
}

/** Whether the first round reads nothing: then a store may read its clock as it begins the transaction. */
export function readsNothingFirst(units: readonly WriteUnit[]): boolean {
  return trustedRows(units).size === new Set(units.map((u) => u.guid)).size;
}

/**
 * The stored event a plan's event became, as one literal of one shape: spreading the event (`{ ...p.event, … }`)
 * cost about 7 µs a unit in `serve` (its copies of events of several types went through V8's slow path), 3% of
 * a new transfer's busy time.
 */
function storedEvent(p: PlannedEvent, position: number): StoredEvent {
  return { type: p.event.type, at: p.event.at, data: p.event.data, guid: p.guid, seq: p.seq, position, actor: p.actor } as StoredEvent;
}

function outcomeOf(unit: WriteUnit, plan: UnitPlan, positions: ReadonlyMap<string, number>): UnitOutcome {
  if (plan.kind === 'error') return { ok: false, error: plan.error };
  if (plan.kind === 'refused') return { ok: true, value: { kind: 'refused', refusal: plan.refusal } };
  const append: AppendResult =
    plan.kind === 'won'
      ? { won: true, state: plan.state, events: plan.events.map((p) => storedEvent(p, positions.get(eventKey(p.guid, p.seq)) ?? -1)) }
      : { won: false, state: plan.state };
  return { ok: true, value: unit.op === 'execute' ? executeResultOf(append) : append };
}

function answer<K extends StepAnswer['kind']>(a: StepAnswer, kind: K): Extract<StepAnswer, { kind: K }> {
  if (a.kind !== kind) throw new Error(`write protocol: a ${kind} step was answered with ${a.kind}`);
  return a as Extract<StepAnswer, { kind: K }>;
}

/** The protocol for one batch inside one transaction; returns every unit's outcome, in submission order. */
export function* writeProtocol(units: readonly WriteUnit[], o: ProtocolOptions): Generator<WriteStep, UnitOutcome[], StepAnswer> {
  const outcomes: UnitOutcome[] = new Array(units.length);
  let pending = units.map((_, i) => i);
  let trusted = trustedRows(units);
  let lastRead: ReadonlyMap<string, LedgerState> = new Map();
  const rounds = trusted.size > 0 ? o.maxRounds + 1 : o.maxRounds;
  for (let round = 0; round < rounds && pending.length > 0; round++) {
    const clock = pending.some((i) => units[i]!.op === 'execute' && units[i]!.now === undefined);
    const toRead = [...new Set(pending.map((i) => units[i]!.guid))].filter((guid) => !trusted.has(guid));
    const read = answer(yield { kind: 'read', guids: toRead, clock }, 'read');
    lastRead = read.rows;
    for (const i of pending) if (read.unreadable?.has(units[i]!.guid) === true) outcomes[i] = { ok: false, error: read.unreadable.get(units[i]!.guid) };
    if (read.unreadable !== undefined && read.unreadable.size > 0) pending = pending.filter((i) => outcomes[i] === undefined);
    const roundUnits = pending.map((i) => units[i]!);
    const now = read.now;
    if (clock && now === undefined) throw new Error('write protocol: the store read no clock for units submitted without one');
    const decided = roundUnits.map((u) => (u.op === 'execute' && u.now === undefined ? { ...u, now } : u) as Unit);
    const stored = new Map(read.rows);
    for (const [guid, state] of trusted) if (state !== null) stored.set(guid, state);
    let plan = planBatch(decided, stored, o.stateToRow);
    if (o.checkTaken && plan.events.length > 0) {
      const taken = answer(yield { kind: 'taken', plan }, 'taken').guids;
      if (taken.size > 0) plan = planBatch(decided, stored, o.stateToRow, taken);
    }
    const written: WriteOutcome = plan.rows.length === 0 ? { won: new Set(), positions: new Map() } : answer(yield { kind: 'write', plan }, 'write').written;
    const writtenGuids = new Set(plan.rows.map((r) => r.row['guid'] as string));
    const next: number[] = [];
    roundUnits.forEach((u, k) => {
      const again = writtenGuids.has(u.guid) ? !written.won.has(u.guid) : trusted.has(u.guid);
      if (again) next.push(pending[k]!);
      else outcomes[pending[k]!] = outcomeOf(u, plan.units[k]!, written.positions);
    });
    pending = next;
    trusted = new Map();
  }
  for (const i of pending) outcomes[i] = outcomeOf(units[i]!, { kind: 'lost', state: lastRead.get(units[i]!.guid) ?? null }, new Map());
  return outcomes;
}

/** What a store does for the protocol, synchronously (SQLite, inside its transaction). */
export interface SyncWriteIo {
  read(guids: readonly string[], clock: boolean): RowsRead;
  taken(plan: BatchPlan): ReadonlySet<string>;
  write(plan: BatchPlan): WriteOutcome;
}

/** What a store does for the protocol with round trips (PostgreSQL, inside its transaction). */
export interface AsyncWriteIo {
  read(guids: readonly string[], clock: boolean): Promise<RowsRead>;
  taken(plan: BatchPlan): Promise<ReadonlySet<string>>;
  write(plan: BatchPlan): Promise<WriteOutcome>;
}

export function runProtocolSync(units: readonly WriteUnit[], o: ProtocolOptions, io: SyncWriteIo): UnitOutcome[] {
  const steps = writeProtocol(units, o);
  for (let step = steps.next(); ; ) {
    if (step.done === true) return step.value;
    const s = step.value;
    step = steps.next(s.kind === 'read' ? { kind: 'read', ...io.read(s.guids, s.clock) } : s.kind === 'taken' ? { kind: 'taken', guids: io.taken(s.plan) } : { kind: 'write', written: io.write(s.plan) });
  }
}

export async function runProtocol(units: readonly WriteUnit[], o: ProtocolOptions, io: AsyncWriteIo): Promise<UnitOutcome[]> {
  const steps = writeProtocol(units, o);
  for (let step = steps.next(); ; ) {
    if (step.done === true) return step.value;
    const s = step.value;
    step = steps.next(s.kind === 'read' ? { kind: 'read', ...(await io.read(s.guids, s.clock)) } : s.kind === 'taken' ? { kind: 'taken', guids: await io.taken(s.plan) } : { kind: 'write', written: await io.write(s.plan) });
  }
}
