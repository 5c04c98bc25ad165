import type { Actor, NewEvent } from '../../events/codecs.js';
import { decide, type Command, type Refusal } from '../../events/decide.js';
import { evolve } from '../../events/evolve.js';
import type { LedgerState } from '../../events/state.js';
import type { LedgerProjection, ProjectionRow } from '../../events/store.js';
import { encodeEvents, type EncodedActor } from '../shared/rowEncoding.js';
import { redactData } from '../shared/purgeRedaction.js';
import { notificationsDue, type DueNotification } from '../../events/notifications.js';

/** A unit of work of the group commit: one caller's `execute` or `appendEvents`. */
export type Unit =
  | {
      readonly op: 'execute';
      readonly guid: string;
      readonly command: Command;
      readonly now: number;
      readonly actor?: Actor | null;
      /** The row as its caller saw it (null: none), decided on unread in a batch's first round (groupCommit.ts `trustedRows`). */
      readonly seen?: LedgerState | null;
      /** The outcome recorded is the reply to the channel's own request (src/events/notifications.ts). */
      readonly replied?: boolean;
      readonly cap?: number;
    }
  | { readonly op: 'append'; readonly guid: string; readonly expectedSeq: number; readonly events: readonly NewEvent[]; readonly actor?: Actor | null; readonly replied?: boolean; readonly cap?: number };

/** An event ready for the INSERT: everything that can throw in JS has already run. */
export interface PlannedEvent {
  readonly guid: string;
  readonly seq: number;
  readonly event: NewEvent;
  /** Who wrote it, and as the `actors` table holds it (`events.actor_id` its id). */
  readonly actor: Actor | null;
  readonly encodedActor: EncodedActor | null;
  /** The JSON text stored in `events.data`; a later Purged in the same batch may still redact it. */
  data: string;
}

/** What one unit will have done if its GUID's row is written (decided before any write). */
export type UnitPlan =
  | { readonly kind: 'won'; readonly state: LedgerState; readonly events: readonly PlannedEvent[] }
  | { readonly kind: 'refused'; readonly refusal: Refusal }
  /** Someone else moved first: the state now (an execute's result says `exists`, shared/executeResult.ts). */
  | { readonly kind: 'lost'; readonly state: LedgerState | null }
  | { readonly kind: 'error'; readonly error: unknown };

/** The row a GUID ends the batch with, and the `last_seq` it must still have (-1: no row, insert it). */
export interface PlannedRow {
  readonly prevSeq: number;
  readonly row: ProjectionRow;
}

export interface BatchPlan {
  readonly units: readonly UnitPlan[];
  /** Sorted by GUID, the order in which every writer takes rows, so two batches never wait on each other in a cycle. */
  readonly rows: readonly PlannedRow[];
  /** Sorted by (guid, seq): positions grow with seq inside a GUID, which a replay relies on. */
  readonly events: readonly PlannedEvent[];
  /** GUIDs whose earlier, already stored events lose their raw request and response (a Purged is planned). */
  readonly purged: ReadonlySet<string>;
  /** The notifications the won appends make due (none for a GUID purged in the batch: its notifications leave). */
  readonly notifications: readonly DueNotification[];
}

/** The actors of a plan's events, each once: what a store adds to its `actors` table in the plan's transaction. */
export function actorsOf(plan: Pick<BatchPlan, 'events'>): EncodedActor[] {
  const actors = new Map<string, EncodedActor>();
  for (const e of plan.events) if (e.encodedActor !== null) actors.set(e.encodedActor.idText, e.encodedActor);
  return [...actors.values()];
}

function encode(guid: string, firstSeq: number, events: readonly NewEvent[], actor: Actor | null): PlannedEvent[] {
  const encoded = encodeEvents(events, actor);
  return events.map((event, i) => ({ guid, seq: firstSeq + i, event, actor, encodedActor: encoded.actor, data: encoded.data[i]! }));
}

/**
 * Decides every unit of a batch in submission order against the rows read (and locked) in the write
 * transaction, carrying each GUID's state forward so that duplicates of one GUID in the batch see each
 * other. Pure: a unit that throws (an event `evolve` refuses, data that does not encode) fails alone and
 * changes no state. `blocked` GUIDs are ones whose next seq the log already holds although the projection
 * says otherwise: their units lose without writing.
 */
export function planBatch(units: readonly Unit[], stored: ReadonlyMap<string, LedgerState>, stateToRow: LedgerProjection['stateToRow'], blocked: ReadonlySet<string> = new Set()): BatchPlan {
  const states = new Map<string, LedgerState | null>();
  const stateOf = (guid: string) => (states.has(guid) ? states.get(guid)! : (stored.get(guid) ?? null));
  const planned = new Map<string, PlannedEvent[]>();
  const purged = new Set<string>();
  const due = new Map<string, DueNotification[]>();

  const plans = units.map((u): UnitPlan => {
    const current = stateOf(u.guid);
    let toAppend: readonly NewEvent[];
    let expectedSeq: number;
    if (u.op === 'execute') {
      const decided = decide(current, u.command, u.now);
      if (decided._tag === 'Left') return { kind: 'refused', refusal: decided.left };
      toAppend = decided.right;
      expectedSeq = current?.lastSeq ?? -1;
    } else {
      toAppend = u.events;
      expectedSeq = u.expectedSeq;
    }
    if (blocked.has(u.guid) || (current?.lastSeq ?? -1) !== expectedSeq) {
      return { kind: 'lost', state: current };
    }
    try {
      let state = current;
      for (const e of toAppend) state = evolve(state, e, u.guid);
      if (state === null || toAppend.length === 0) return { kind: 'lost', state: current };
      const events = encode(u.guid, expectedSeq + 1, toAppend, u.actor ?? null);
      const notifications = notificationsDue(u.guid, current, toAppend, { replied: u.replied === true, actor: u.actor ?? null, cap: u.cap });
      const guidEvents = planned.get(u.guid) ?? [];
      if (toAppend.some((e) => e.type === 'Purged')) {
        purged.add(u.guid);
        for (const p of guidEvents) p.data = redactData(p.event.type, p.data);
      }
      planned.set(u.guid, [...guidEvents, ...events]);
      if (notifications.length > 0) due.set(u.guid, [...(due.get(u.guid) ?? []), ...notifications]);
      states.set(u.guid, state);
      return { kind: 'won', state, events };
    } catch (error) {
      return { kind: 'error', error };
    }
  });

  // The row is made per GUID too: a projection that cannot make one fails that GUID's units alone, nothing of it written.
  const unmade = new Map<string, unknown>();
  const rows: PlannedRow[] = [];
  for (const [guid, state] of [...states.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    try {
      rows.push({ prevSeq: stored.get(guid)?.lastSeq ?? -1, row: stateToRow(state!) });
    } catch (error) {
      unmade.set(guid, error);
    }
  }
  const unitPlans = unmade.size === 0 ? plans : plans.map((p, i): UnitPlan => (p.kind === 'won' && unmade.has(units[i]!.guid) ? { kind: 'error', error: unmade.get(units[i]!.guid) } : p));
  const events = rows.flatMap((r) => planned.get(String(r.row['guid'])) ?? []);
  const notifications = rows.flatMap((r) => (purged.has(String(r.row['guid'])) ? [] : (due.get(String(r.row['guid'])) ?? [])));
  return { units: unitPlans, rows, events, purged: new Set([...purged].filter((g) => !unmade.has(g))), notifications };
}
