import * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either.js';
import { Actor, eventDataCodecs, type EventType, type StoredEvent } from '../../events/codecs.js';
import { LedgerCorruptError } from '../../events/errors.js';

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

/** An `events` row as SQLite returns it, decoded down to its typed data. */
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

const encoded = new WeakMap<Actor, string>();
/** An actor as `events.actor` holds it (null stays NULL); an actor value is encoded once (actors are never changed). */
export function encodeActor(actor: Actor | null): string | null {
  if (actor === null) return null;
  let json = encoded.get(actor);
  if (json === undefined) encoded.set(actor, (json = JSON.stringify(actor)));
  return json;
}

export type { EventType };
