import type pg from 'pg';
import type { LedgerState } from '../../events/state.js';
import type { LedgerProjection } from '../../events/store.js';
import type { LedgerColumns } from './ledgerColumns.js';
import { actorsOf, type BatchPlan } from '../shared/planBatch.js';
import { REDACTED_TYPES, redactData } from '../shared/purgeRedaction.js';
import { eventKey, type WriteOutcome } from '../shared/writeProtocol.js';
import { binaryArray, type ArrayEncoder } from './binaryArrays.js';

/** Reads and locks the batch's existing rows, in GUID order (the order every writer takes them in); a row that does not decode is `unreadable`. */
export async function lockRows(client: pg.ClientBase, guids: readonly string[], rowToState: LedgerProjection['rowToState']): Promise<{ rows: Map<string, LedgerState>; unreadable: Map<string, unknown> }> {
  const { rows } = await client.query<{ guid: string }>({
    name: 'guidgate_lock_rows',
    text: 'SELECT * FROM ledger WHERE guid = ANY($1::text[]) ORDER BY guid FOR UPDATE',
    values: [guids],
  });
  const states = new Map<string, LedgerState>();
  const unreadable = new Map<string, unknown>();
  for (const r of rows) {
    try {
      states.set(r.guid, rowToState(r));
    } catch (err) {
      unreadable.set(r.guid, err);
    }
  }
  return { rows: states, unreadable };
}

/**
 * The GUIDs among `plan`'s events whose (guid, seq) the log already holds: the projection is behind the
 * log there (someone wrote the log without the row), so those appends must lose, as the key says.
 */
export async function takenSeqs(client: pg.ClientBase, plan: BatchPlan): Promise<Set<string>> {
  const { rows } = await client.query<{ guid: string }>({
    name: 'guidgate_taken_seqs',
    text: 'SELECT DISTINCT e.guid FROM events e JOIN unnest($1::text[], $2::integer[]) AS k(guid, seq) ON e.guid = k.guid AND e.seq = k.seq',
    values: [plan.events.map((e) => e.guid), plan.events.map((e) => e.seq)],
  });
  return new Set(rows.map((r) => r.guid));
}

export interface Redaction {
  readonly guid: string;
  readonly seq: number;
  readonly data: string;
}

/** The already stored events of purged GUIDs, with what purge redacts taken out (shared/purgeRedaction.ts). */
export async function redactionsFor(client: pg.ClientBase, guids: ReadonlySet<string>): Promise<Redaction[]> {
  if (guids.size === 0) return [];
  const { rows } = await client.query<{ guid: string; seq: number; type: string; data: string }>({
    name: 'guidgate_purge_targets',
    text: 'SELECT guid, seq, type, data FROM events WHERE guid = ANY($1::text[]) AND type = ANY($2::text[])',
    values: [[...guids], REDACTED_TYPES],
  });
  return rows.map((r) => ({ guid: r.guid, seq: r.seq, data: redactData(r.type, r.data) }));
}

/**
 * Every write of one round of a batch in ONE statement (one round trip): the ledger rows move from their
 * `last_seq` to the new one (the compare-and-set: an UPDATE that matches no row, or an INSERT that meets a
 * row another transaction claimed first, leaves the GUID out of `won`); only the won GUIDs' events go into
 * the log, whose (guid, seq) key is the backstop (a violation fails the statement, never passes silently);
 * purged GUIDs' earlier events are redacted.
 */
export function writeStatement(columns: LedgerColumns): string {
  const COLS = columns.list;
  const PREV = columns.names.length + 1;
  const E = PREV + 1;
  const R = E + 6;
  const N = R + 3;
  const A = N + 6;
  const SET = columns.names.filter((c) => c !== 'guid').map((c) => `${c} = r.${c}`).join(', ');
  return `
WITH r AS (
  SELECT * FROM unnest(${columns.arrayParams}, $${PREV}::integer[]) AS r(${COLS}, prev_seq)
),
updated AS (
  UPDATE ledger l SET ${SET} FROM r WHERE r.prev_seq >= 0 AND l.guid = r.guid AND l.last_seq = r.prev_seq RETURNING l.guid
),
inserted AS (
  INSERT INTO ledger (${COLS}) SELECT ${COLS} FROM r WHERE r.prev_seq < 0 ON CONFLICT (guid) DO NOTHING RETURNING guid
),
won AS (SELECT guid FROM updated UNION ALL SELECT guid FROM inserted),
actors_added AS (
  INSERT INTO actors (id, actor) SELECT a.id, a.actor FROM unnest($${A}::bigint[], $${A + 1}::text[]) AS a(id, actor)
  ON CONFLICT (id) DO NOTHING
),
appended AS (
  INSERT INTO events (guid, seq, type, at, data, actor_id)
  SELECT e.guid, e.seq, e.type, e.at, e.data, e.actor_id
  FROM unnest($${E}::text[], $${E + 1}::integer[], $${E + 2}::text[], $${E + 3}::bigint[], $${E + 4}::text[], $${E + 5}::bigint[]) WITH ORDINALITY AS e(guid, seq, type, at, data, actor_id, n)
  WHERE e.guid IN (SELECT guid FROM won)
  ORDER BY e.n
  RETURNING guid, seq, position
),
redacted AS (
  UPDATE events SET data = x.data
  FROM unnest($${R}::text[], $${R + 1}::integer[], $${R + 2}::text[]) AS x(guid, seq, data)
  WHERE events.guid = x.guid AND events.seq = x.seq AND x.guid IN (SELECT guid FROM won)
),
notified AS (
  INSERT INTO notifications (guid, seq, type, at, body, created_at, next_at)
  SELECT n.guid, n.seq, n.type, n.at, n.body, n.at, n.at
  FROM unnest($${N}::text[], $${N + 1}::integer[], $${N + 2}::text[], $${N + 3}::bigint[], $${N + 4}::text[]) AS n(guid, seq, type, at, body)
  WHERE n.guid IN (SELECT guid FROM won)
  ON CONFLICT (guid, seq) DO NOTHING
),
unnotified AS (
  DELETE FROM notifications WHERE guid = ANY($${N + 5}::text[]) AND guid IN (SELECT guid FROM won)
)
SELECT guid, NULL::integer AS seq, NULL::bigint AS position FROM won
UNION ALL
SELECT guid, seq, position FROM appended`;
}

/** What a batch writes with: the projection's columns and the write statement made from them (`writeStatement`). */
export interface BatchSql {
  readonly columns: LedgerColumns;
  readonly write: string;
}

export async function writeBatch(client: pg.ClientBase, sql: BatchSql, plan: BatchPlan, redactions: readonly Redaction[]): Promise<WriteOutcome> {
  const { rows } = await client.query<{ guid: string; seq: number | null; position: number | null }>({
    name: 'guidgate_write_batch',
    text: sql.write,
    values: writeValues(sql.columns, plan, redactions),
  });
  const won = new Set<string>();
  const positions = new Map<string, number>();
  for (const r of rows) {
    if (r.seq === null || r.position === null) won.add(r.guid);
    else positions.set(eventKey(r.guid, r.seq), r.position);
  }
  return { won, positions };
}

/**
 * The write statement's parameters, in the order `writeStatement` numbers them: every array in the binary format
 * (binaryArrays.ts), of the type the statement casts it to, unless `encode` says otherwise (another driver's bench).
 */
export function writeValues(columns: LedgerColumns, plan: BatchPlan, redactions: readonly Redaction[], encode: ArrayEncoder = binaryArray): unknown[] {
  const actors = actorsOf(plan);
  return [
    ...columns.arrays(plan.rows.map((r) => r.row), encode),
    encode('integer', plan.rows.map((r) => r.prevSeq)),
    encode('text', plan.events.map((e) => e.guid)),
    encode('integer', plan.events.map((e) => e.seq)),
    encode('text', plan.events.map((e) => e.event.type)),
    encode('bigint', plan.events.map((e) => e.event.at)),
    encode('text', plan.events.map((e) => e.data)),
    encode('bigint', plan.events.map((e) => e.encodedActor?.idText ?? null)),
    encode('text', redactions.map((x) => x.guid)),
    encode('integer', redactions.map((x) => x.seq)),
    encode('text', redactions.map((x) => x.data)),
    encode('text', plan.notifications.map((n) => n.guid)),
    encode('integer', plan.notifications.map((n) => n.seq)),
    encode('text', plan.notifications.map((n) => n.type)),
    encode('bigint', plan.notifications.map((n) => n.at)),
    encode('text', plan.notifications.map((n) => n.body)),
    encode('text', [...plan.purged]),
    // The batch's actors, each once, for `actors_added`: their ids and their JSON.
    encode('bigint', actors.map((a) => a.idText)),
    encode('text', actors.map((a) => a.json)),
  ];
}
