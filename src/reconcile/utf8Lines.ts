import { isUtf8 } from 'node:buffer';
import { JournalLineError } from './errors.js';

const EMPTY = Buffer.alloc(0);

export function asBuffer(chunk: Uint8Array): Buffer {
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/** How many bytes the UTF-8 sequence led by `b` has; 0 when `b` cannot lead one. */
function sequenceLength(b: number): number {
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) return 2;
  if (b >= 0xe0 && b <= 0xef) return 3;
  if (b >= 0xf0 && b <= 0xf4) return 4;
  return 0;
}

/**
 * Offset of the first byte that is not part of a valid UTF-8 sequence (overlongs, surrogates and code points past
 * U+10FFFF included), or -1. Only run once `isUtf8` said no, to name the line.
 */
export function firstInvalidUtf8(b: Uint8Array): number {
  for (let i = 0; i < b.length; ) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    const n = sequenceLength(c);
    if (n === 0 || i + n > b.length) return i;
    const lo = c === 0xe0 ? 0xa0 : c === 0xf0 ? 0x90 : 0x80;
    const hi = c === 0xed ? 0x9f : c === 0xf4 ? 0x8f : 0xbf;
    const second = b[i + 1]!;
    if (second < lo || second > hi) return i;
    for (let k = 2; k < n; k++) {
      const next = b[i + k]!;
      if (next < 0x80 || next > 0xbf) return i;
    }
    i += n;
  }
  return -1;
}

/** Where a sequence cut off by the end of `b` starts (b.length when the last one is whole). */
function unfinishedTail(b: Uint8Array): number {
  for (let k = 1; k <= Math.min(3, b.length); k++) {
    const c = b[b.length - k]!;
    if (c >= 0x80 && c <= 0xbf) continue; // a continuation byte: look further back
    const n = sequenceLength(c);
    return n > k ? b.length - k : b.length;
  }
  return b.length;
}

export function countNewlines(b: Buffer, end = b.length): number {
  let n = 0;
  for (let i = b.indexOf(10); i !== -1 && i < end; i = b.indexOf(10, i + 1)) n++;
  return n;
}

/**
 * Passes the journal's bytes on unchanged once each is known to be UTF-8; the first byte that is not stops the
 * read with a JournalLineError naming its line (counted by newlines, as an editor shows it). A character cut by
 * a chunk's end is checked with the next chunk, before that chunk is passed on, so no invalid byte ever reaches
 * a parser as part of a finished line.
 */
export async function* checkedUtf8(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<Buffer> {
  let carry: Buffer = EMPTY;
  let line = 1;
  for await (const raw of bytes) {
    const chunk = asBuffer(raw);
    const whole = carry.length === 0 ? chunk : Buffer.concat([carry, chunk]);
    const cut = unfinishedTail(whole);
    const finished = whole.subarray(0, cut);
    if (!isUtf8(finished)) {
      const at = firstInvalidUtf8(finished);
      throw new JournalLineError(line + countNewlines(finished, at), null, 'is not valid UTF-8');
    }
    line += countNewlines(finished);
    carry = Buffer.from(whole.subarray(cut));
    yield chunk;
  }
  if (carry.length > 0) throw new JournalLineError(line, null, 'is not valid UTF-8 (the journal ends inside a character)');
}
