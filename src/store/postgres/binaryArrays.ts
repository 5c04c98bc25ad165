/**
 * One-dimensional arrays in PostgreSQL's binary format (what `array_send` writes and `array_recv` reads), for the
 * store's array parameters. node-postgres sends a Buffer parameter as binary; anything else it writes as an array
 * literal (`{"…","…"}`, every quote and backslash escaped) that the server parses character by character
 * (`array_in`: 12% of the server's samples under the write batch, docs/performance.md). Here each element is its
 * length and its bytes. The element type must be the one the statement casts the parameter to (`$1::text[]`):
 * the server refuses any other.
 */

export type ArrayElement = 'text' | 'integer' | 'bigint';

/** How an array parameter is sent: `binaryArray`, or, for a driver that writes its own literals, the values as they are. */
export type ArrayEncoder = (element: ArrayElement, values: readonly unknown[]) => unknown;
export const plainArray: ArrayEncoder = (_element, values) => values;

const OIDS: Readonly<Record<ArrayElement, number>> = { text: 25, integer: 23, bigint: 20 };
const WIDTH: Readonly<Record<Exclude<ArrayElement, 'text'>, number>> = { integer: 4, bigint: 8 };
const INT4_MIN = -(2 ** 31);
const INT4_MAX = 2 ** 31 - 1;

/**
 * `values` as a binary array of `element`: null and undefined as NULL. A text element is a string; an integer one a
 * safe integer (a `bigint` one may also be a string of digits, as the actors' ids are sent). Anything else throws,
 * naming the element, before anything is sent.
 */
export function binaryArray(element: ArrayElement, values: readonly unknown[]): Buffer {
  const n = values.length;
  let hasNull = 0;
  const texts: Array<Buffer | null> = element === 'text' ? new Array(n) : [];
  let size = n === 0 ? 12 : 20;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v === null || v === undefined) {
      hasNull = 1;
      size += 4;
      if (element === 'text') texts[i] = null;
      continue;
    }
    if (element === 'text') {
      if (typeof v !== 'string') throw new TypeError(`array element ${i} is not text`);
      const bytes = Buffer.from(v, 'utf8');
      texts[i] = bytes;
      size += 4 + bytes.length;
    } else size += 4 + WIDTH[element];
  }
  const out = Buffer.allocUnsafe(size);
  out.writeInt32BE(n === 0 ? 0 : 1, 0);
  out.writeInt32BE(hasNull, 4);
  out.writeUInt32BE(OIDS[element], 8);
  if (n === 0) return out;
  out.writeInt32BE(n, 12);
  out.writeInt32BE(1, 16);
  let at = 20;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v === null || v === undefined) {
      at = out.writeInt32BE(-1, at);
      continue;
    }
    if (element === 'text') {
      const bytes = texts[i]!;
      at = out.writeInt32BE(bytes.length, at);
      at += bytes.copy(out, at);
    } else if (element === 'integer') {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < INT4_MIN || v > INT4_MAX) throw new TypeError(`array element ${i} is not a 32-bit integer`);
      at = out.writeInt32BE(4, at);
      at = out.writeInt32BE(v, at);
    } else {
      at = out.writeInt32BE(8, at);
      at = out.writeBigInt64BE(int8Of(v, i), at);
    }
  }
  return out;
}

function int8Of(v: unknown, i: number): bigint {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^-?[0-9]{1,19}$/.test(v)) {
    const b = BigInt(v);
    if (b >= -(2n ** 63n) && b < 2n ** 63n) return b;
  }
  throw new TypeError(`array element ${i} is not a 64-bit integer`);
}
