/**
 * What a store writes, encoded and checked before anything of its unit is written: what the database would refuse
 * mid-write (a time that is no integer, data that is no JSON) is refused here, where it fails its own unit alone,
 * with the same message on every store.
 */
import type { Actor, NewEvent } from '../../events/codecs.js';
import type { RequestRecord } from '../../events/store.js';

/** Events as `events.data` and `events.actor` hold them: one JSON text per event, the actor's shared by all. */
export interface EncodedEvents {
  readonly data: readonly string[];
  readonly actorJson: string | null;
}

export function encodeEvents(events: readonly NewEvent[], actor: Actor | null): EncodedEvents {
  const data = events.map((e) => {
    if (!Number.isSafeInteger(e.at)) throw new TypeError(`event ${e.type} has no valid time`);
    const json: unknown = JSON.stringify(e.data);
    if (typeof json !== 'string') throw new TypeError(`event ${e.type} has no data`);
    return json;
  });
  return { data, actorJson: encodeActor(actor) };
}

const encoded = new WeakMap<Actor, string>();
/** An actor as `events.actor` holds it (null stays NULL); an actor value is encoded once (actors are never changed). */
function encodeActor(actor: Actor | null): string | null {
  if (actor === null) return null;
  let json = encoded.get(actor);
  if (json === undefined) encoded.set(actor, (json = JSON.stringify(actor)));
  return json;
}

export function checkRequestRecord(r: RequestRecord): void {
  if (typeof r.guid !== 'string' || !Number.isSafeInteger(r.at) || typeof r.code !== 'string' || typeof r.fingerprintMatch !== 'boolean') {
    throw new TypeError('request record is malformed');
  }
}
