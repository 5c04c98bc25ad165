import { JournalLineError } from './errors.js';

/** A longer line is refused rather than buffered: a file without newlines must not fill the memory. */
export const MAX_LINE_BYTES = 1024 * 1024;
const MAX_TEXT = 1024;
const INTEGER = /^-?[0-9]+$/;
// Control characters would reach a terminal as escape sequences when a break is printed.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * A required text field (guid, ref, from, to): a non-empty string of at most 1024 characters, no control
 * characters, no lone surrogate (it would sort one way here and another in SQLite).
 */
export function requiredText(value: unknown, field: string, line: number): string {
  if (typeof value !== 'string') throw new JournalLineError(line, field, value === undefined ? 'is missing' : 'must be a string');
  if (value === '') throw new JournalLineError(line, field, 'is empty');
  if (value.length > MAX_TEXT) throw new JournalLineError(line, field, `is longer than ${MAX_TEXT} characters`);
  if (CONTROL.test(value) || LONE_SURROGATE.test(value)) throw new JournalLineError(line, field, 'holds control characters or a lone surrogate');
  return value;
}

/** The currency: null or an empty cell means none; otherwise as a required text. */
export function optionalText(value: unknown, field: string, line: number): string | null {
  if (value === null || value === '') return null;
  return requiredText(value, field, line);
}

/** An amount written as an integer (optional minus, digits only) → its exact value, however large. */
export function integerAmount(written: string, field: string, line: number): bigint {
  if (!INTEGER.test(written)) throw new JournalLineError(line, field, `${JSON.stringify(written.slice(0, 40))} is not an integer in minor units`);
  return BigInt(written);
}
