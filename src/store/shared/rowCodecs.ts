/**
 * Rows read back, as both stores return them, decoded and never cast: a row that does not decode (changed by
 * something other than guidgate) is a `LedgerCorruptError`, never a value.
 */
import * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either.js';
import { Actor, eventDataCodecs, STATUSES, Status, type StoredEvent } from '../../events/codecs.js';
import { LedgerCorruptError } from '../../events/errors.js';
import type { StatusSummary, StoredRequestRecord } from '../../events/store.js';

const Int = t.refinement(t.number, Number.isSafeInteger, 'Int');
const EventRowCodec = t.type({
  position: Int,
  guid: t.string,
  seq: Int,
  type: t.keyof(eventDataCodecs),
  at: Int,
  data: t.string,
  actor: t.union([t.string, t.null]),
});

/**
 * The log's columns as `rowToEvent` reads them, on both stores: the actor from the `actors` table, or, for an event
 * written before that table, the JSON text the event holds itself. Callers add the WHERE and ORDER BY (on `e`).
 */
export const SELECT_EVENTS = 'SELECT e.position, e.guid, e.seq, e.type, e.at, e.data, coalesce(a.actor, e.actor) AS actor FROM events e LEFT JOIN actors a ON a.id = e.actor_id';

/** An `events` row, decoded down to its typed data. */
export function rowToEvent(raw: unknown): StoredEvent {
  const row = EventRowCodec.decode(raw);
  if (isLeft(row)) throw new LedgerCorruptError('event row does not decode');
  const { position, guid, seq, type, at, data } = row.right;
  const actor = row.right.actor === null ? null : decodeActor(row.right.actor, `${guid}#${seq}`);
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    throw new LedgerCorruptError(`event ${guid}#${seq}: data is not JSON`);
  }
  const decoded = (eventDataCodecs[type] as t.Decoder<unknown, unknown>).decode(json);
  if (isLeft(decoded)) throw new LedgerCorruptError(`event ${guid}#${seq}: ${type} data does not decode`);
  return { position, guid, seq, type, at, data: decoded.right, actor } as StoredEvent;
}

function decodeActor(text: string, where: string): Actor {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new LedgerCorruptError(`event ${where}: actor is not JSON`);
  }
  const decoded = Actor.decode(json);
  if (isLeft(decoded)) throw new LedgerCorruptError(`event ${where}: actor does not decode`);
  return decoded.right;
}

const RequestRow = t.type({ position: Int, guid: t.string, at: Int, key: t.union([t.string, t.null]), code: t.string, fingerprint_match: t.union([t.literal(0), t.literal(1)]) });

/** A `requests` row (`fingerprint_match` as 0 or 1: SQLite has no booleans, PostgreSQL's query makes its boolean so). */
export function rowToRequest(raw: unknown): StoredRequestRecord {
  const row = RequestRow.decode(raw);
  if (isLeft(row)) throw new LedgerCorruptError('request record does not decode');
  const { position, guid, at, key, code, fingerprint_match } = row.right;
  return { position, guid, at, key, code, fingerprintMatch: fingerprint_match === 1 };
}

const StatusCount = t.type({ status: Status, n: t.number, oldest: t.number });

/** The rows of `SELECT status, count(*) AS n, min(updated_at) AS oldest … GROUP BY status` as every status's summary. */
export function statusSummary(rows: readonly unknown[]): Record<Status, StatusSummary> {
  const summary = Object.fromEntries(STATUSES.map((s) => [s, { count: 0, oldestUpdatedAt: null }])) as Record<Status, StatusSummary>;
  for (const raw of rows) {
    const row = StatusCount.decode(raw);
    if (isLeft(row)) throw new LedgerCorruptError('ledger status count does not decode');
    summary[row.right.status] = { count: row.right.n, oldestUpdatedAt: row.right.oldest };
  }
  return summary;
}
