import * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either.js';
import { eventDataCodecs, type EventType, type StoredEvent } from '../../events/codecs.js';
import { LedgerCorruptError } from '../../events/errors.js';

const Int = t.refinement(t.number, Number.isSafeInteger, 'Int');
const EventRowCodec = t.type({
  position: Int,
  guid: t.string,
  seq: Int,
  type: t.keyof(eventDataCodecs),
  at: Int,
  data: t.string,
});

/** An `events` row as SQLite returns it, decoded down to its typed data. */
export function rowToEvent(raw: unknown): StoredEvent {
  const row = EventRowCodec.decode(raw);
  if (isLeft(row)) throw new LedgerCorruptError('event row does not decode');
  const { position, guid, seq, type, at, data } = row.right;
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    throw new LedgerCorruptError(`event ${guid}#${seq}: data is not JSON`);
  }
  const decoded = (eventDataCodecs[type] as t.Decoder<unknown, unknown>).decode(json);
  if (isLeft(decoded)) throw new LedgerCorruptError(`event ${guid}#${seq}: ${type} data does not decode`);
  return { position, guid, seq, type, at, data: decoded.right } as StoredEvent;
}

export type { EventType };
