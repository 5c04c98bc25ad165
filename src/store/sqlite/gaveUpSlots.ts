/**
 * Which units' callers gave up, shared between the request thread and the writer thread without a message (a
 * message would wait behind the batch the writer is busy with): one Int32 slot per unit id modulo the size, holding
 * the id of the unit whose caller gave up last in it. A slot reused by a later id simply no longer matches; two ids
 * that share a slot and its value are 2^32 units apart.
 */
export const GAVE_UP_SLOTS = 1 << 16;

export function gaveUpSlots(): SharedArrayBuffer {
  return new SharedArrayBuffer(GAVE_UP_SLOTS * Int32Array.BYTES_PER_ELEMENT);
}

export function markGaveUp(slots: Int32Array, id: number): void {
  Atomics.store(slots, id % GAVE_UP_SLOTS, id | 0);
}

export function callerGaveUp(slots: Int32Array, id: number): boolean {
  return Atomics.load(slots, id % GAVE_UP_SLOTS) === (id | 0);
}
