/**
 * What a store writes, encoded and checked before anything of its unit is written: what the database would refuse
 * mid-write (a time that is no integer, data that is no JSON) is refused here, where it fails its own unit alone,
 * with the same message on every store.
 */
import { createHash } from 'node:crypto';
import type { Actor, NewEvent } from '../../events/codecs.js';
import type { RequestRecord } from '../../events/store.js';

/** Events as `events.data` holds them (one JSON text per event), and their actor, shared by all. */
export interface EncodedEvents {
  readonly data: readonly string[];
  readonly actor: EncodedActor | null;
}

/**
 * An actor as the `actors` table keeps it, once: its JSON text and an id made from that text (the first 63 bits of
 * its SHA-256), which `events.actor_id` holds. An id made from the content needs no lookup and no counter: every
 * process, every store and every transaction (committed or rolled back) gives one actor the same id, so a writer
 * adds its actor with an insert that ignores an id already there. Two actors meeting on one id would take
 * billions of actors (the birthday bound of 2^63); a process writes a handful.
 */
export interface EncodedActor {
  readonly json: string;
  readonly id: bigint;
  /** The id in decimal, as a bigint parameter is sent to PostgreSQL (made once: a 63-bit id is no JavaScript number). */
  readonly idText: string;
}

export function encodeEvents(events: readonly NewEvent[], actor: Actor | null): EncodedEvents {
  const data = events.map((e) => {
    if (!Number.isSafeInteger(e.at)) throw new TypeError(`event ${e.type} has no valid time`);
    const json: unknown = JSON.stringify(e.data);
    if (typeof json !== 'string') throw new TypeError(`event ${e.type} has no data`);
    return json;
  });
  return { data, actor: encodeActor(actor) };
}

const encoded = new WeakMap<Actor, EncodedActor>();
/** An actor as the `actors` table holds it (null: none); an actor value is encoded once (actors are never changed). */
function encodeActor(actor: Actor | null): EncodedActor | null {
  if (actor === null) return null;
  let made = encoded.get(actor);
  if (made === undefined) encoded.set(actor, (made = encodedActor(JSON.stringify(actor))));
  return made;
}

export function encodedActor(json: string): EncodedActor {
  const id = createHash('sha256').update(json).digest().readBigInt64BE(0) & 0x7fffffffffffffffn;
  return { json, id, idText: id.toString() };
}

export function checkRequestRecord(r: RequestRecord): void {
  if (typeof r.guid !== 'string' || !Number.isSafeInteger(r.at) || typeof r.code !== 'string' || typeof r.fingerprintMatch !== 'boolean') {
    throw new TypeError('request record is malformed');
  }
}
