/**
 * Which contract field a body key could be read as by a parser that compares keys ignoring case (Java's
 * `equalsIgnoreCase`, a `toUpperCase()`/`toLowerCase()` before a lookup, full Unicode case folding) or after NFKC
 * normalisation (fullwidth `ｇｕｉｄ`, the Kelvin sign `K`, mathematical letters). Such a key, forwarded as an extra
 * field, could be taken downstream as the field itself and move money under a value guidgate never fingerprinted.
 */

const ASCII = /^[\x00-\x7f]*$/;
const LETTERS = /^[a-z]+$/;
const ONLY_MARKS = /^\p{M}+$/u;

const NONE: ReadonlySet<string> = new Set();

/**
 * The lower-case ASCII letters one code point can be read as (a ligature or `ß` reads as two). Case mappings are
 * tried both ways and in the Turkish locale (`ı` upper-cases to `I`, `İ` lower-cases to `i`), each also after
 * NFKC. Where a full case mapping adds combining marks (`İ` lower-cases to `i` + U+0307), the bare letter is a
 * reading too: Java's per-character mapping gives it.
 */
function computeReadings(cp: string): ReadonlySet<string> {
  const nfkc = cp.normalize('NFKC');
  // Most code points (CJK, emoji, symbols) have no case and no compatibility form: nothing to read as a letter.
  if (nfkc === cp && cp.toUpperCase() === cp && cp.toLowerCase() === cp && cp.toLocaleUpperCase('tr') === cp && cp.toLocaleLowerCase('tr') === cp) {
    return LETTERS.test(cp) ? new Set([cp]) : NONE;
  }
  const out = new Set<string>();
  const add = (from: string, mapped: string): void => {
    for (const m of new Set([mapped, mapped.normalize('NFKC')])) {
      const lower = m.toLowerCase();
      if (LETTERS.test(lower)) out.add(lower);
      const [first, ...rest] = [...lower];
      if (first !== undefined && LETTERS.test(first) && rest.length > 0 && [...lower].length > [...from].length && ONLY_MARKS.test(rest.join(''))) out.add(first);
    }
  };
  for (const base of new Set([cp, nfkc])) {
    for (const once of [base, base.toUpperCase(), base.toLowerCase(), base.toLocaleUpperCase('tr'), base.toLocaleLowerCase('tr')]) {
      add(base, once);
      add(base, once.toUpperCase());
      add(base, once.toLowerCase());
    }
  }
  return out.size === 0 ? NONE : out;
}

/** Readings of the code points seen, so that a body of many keys costs one computation per distinct code point. */
const readingsCache = new Map<string, ReadonlySet<string>>();
const READINGS_CACHE_MAX = 65_536;

function readingsOf(cp: string): ReadonlySet<string> {
  let readings = readingsCache.get(cp);
  if (readings === undefined) {
    readings = computeReadings(cp);
    if (readingsCache.size < READINGS_CACHE_MAX) readingsCache.set(cp, readings);
  }
  return readings;
}

/** Can code points with these readings, each read one of its ways, spell `field`? */
function spells(readings: ReadonlyArray<ReadonlySet<string>>, field: string): boolean {
  let positions = new Set([0]);
  for (const ways of readings) {
    const next = new Set<number>();
    for (const reading of ways) {
      for (const p of positions) if (field.startsWith(reading, p)) next.add(p + reading.length);
    }
    if (next.size === 0) return false;
    positions = next;
  }
  return positions.has(field.length);
}

/**
 * The field of `fields` (lower-case ASCII letters) that `key` could be read as without being exactly it, or
 * null. A key exactly equal to a field is that field, not a look-alike.
 */
export function lookalikeOf(key: string, fields: ReadonlySet<string>): string | null {
  if (fields.has(key)) return null;
  if (ASCII.test(key)) {
    const lower = key.toLowerCase();
    return fields.has(lower) ? lower : null;
  }
  const longest = Math.max(...[...fields].map((f) => f.length));
  for (const form of new Set([key, key.normalize('NFKC')])) {
    if (form.length > 2 * longest) continue; // every reading is at least one letter, every code point 1–2 units
    const cps = [...form];
    if (cps.length > longest) continue;
    const readings = cps.map(readingsOf);
    if (readings.includes(NONE)) continue;
    for (const field of fields) if (field.length >= cps.length && spells(readings, field)) return field;
  }
  return null;
}
