import { topLevelMembers } from '../json/topLevelMembers.js';
import { JournalLineError } from './errors.js';
import { integerAmount, MAX_LINE_BYTES, optionalText, requiredText } from './journalFields.js';
import type { JournalEntry } from './types.js';
import { asBuffer } from './utf8Lines.js';

/** Each key of an entry with its bit, to see a key given twice without a Set per line. */
const KEY_BITS = new Map(['guid', 'ref', 'from', 'to', 'amount', 'currency', 'appliedAt'].map((k, i) => [k, 1 << i]));

/**
 * One NDJSON line → its entry. JSON.parse rounds a number past 2^53 and keeps the last of two equal keys, so the
 * amount is read from its written digits and a key given twice is refused. A missing `currency` counts as null
 * (writers that omit null members are common); every other key is required.
 */
export function entryFromJsonLine(text: string, line: number): JournalEntry {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new JournalLineError(line, null, 'is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new JournalLineError(line, null, 'is not a JSON object');
  const o = value as Record<string, unknown>;
  let amountWritten: string | undefined;
  let seen = 0;
  for (const { key, raw } of topLevelMembers(text)) {
    const bit = KEY_BITS.get(key);
    if (bit === undefined) continue;
    if ((seen & bit) !== 0) throw new JournalLineError(line, key, 'appears more than once');
    seen |= bit;
    if (key === 'amount') amountWritten = raw;
  }
  const guid = requiredText(o['guid'], 'guid', line);
  const ref = requiredText(o['ref'], 'ref', line);
  const from = requiredText(o['from'], 'from', line);
  const to = requiredText(o['to'], 'to', line);
  if (amountWritten === undefined) throw new JournalLineError(line, 'amount', 'is missing');
  if (typeof o['amount'] !== 'number') throw new JournalLineError(line, 'amount', 'must be an integer in minor units (a JSON number)');
  const amount = integerAmount(amountWritten, 'amount', line);
  const currency = optionalText(o['currency'] ?? null, 'currency', line);
  const appliedAt = o['appliedAt'];
  if (appliedAt === undefined) throw new JournalLineError(line, 'appliedAt', 'is missing');
  if (typeof appliedAt !== 'number' || !Number.isSafeInteger(appliedAt) || appliedAt < 0) {
    throw new JournalLineError(line, 'appliedAt', 'must be ms since the epoch (a non-negative integer)');
  }
  return { guid, ref, from, to, amount, currency, appliedAt, line };
}

function entryOrBlank(bytes: Buffer, line: number): JournalEntry | null {
  let end = bytes.length;
  if (end > 0 && bytes[end - 1] === 0x0d) end--; // CRLF
  let text = bytes.toString('utf8', 0, end);
  if (line === 1 && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.trim() === '') return null; // a blank line holds no posting
  return entryFromJsonLine(text, line);
}

/**
 * The entries of an NDJSON journal (bytes already known to be UTF-8), a batch per chunk read: the whole file is
 * never in memory. The first bad line throws a JournalLineError naming it.
 */
export async function* ndjsonEntries(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<JournalEntry[]> {
  let line = 0;
  let partial: Buffer[] = [];
  let partialLength = 0;
  const tooLong = (): never => {
    throw new JournalLineError(line + 1, null, `is longer than ${MAX_LINE_BYTES} bytes`);
  };
  for await (const raw of bytes) {
    const chunk = asBuffer(raw);
    const batch: JournalEntry[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      if (partialLength + nl - start > MAX_LINE_BYTES) tooLong();
      let lineBytes = chunk.subarray(start, nl);
      if (partialLength > 0) {
        partial.push(lineBytes);
        lineBytes = Buffer.concat(partial);
        partial = [];
        partialLength = 0;
      }
      line++;
      const entry = entryOrBlank(lineBytes, line);
      if (entry !== null) batch.push(entry);
      start = nl + 1;
    }
    if (start < chunk.length) {
      partialLength += chunk.length - start;
      if (partialLength > MAX_LINE_BYTES) tooLong();
      partial.push(Buffer.from(chunk.subarray(start)));
    }
    if (batch.length > 0) yield batch;
  }
  if (partialLength > 0) {
    line++;
    const entry = entryOrBlank(Buffer.concat(partial), line);
    if (entry !== null) yield [entry];
  }
}
