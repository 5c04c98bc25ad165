/**
 * Which contract field a body key could be read as by a parser that compares keys ignoring case (Java's
 * `equalsIgnoreCase`, a `toUpperCase()`/`toLowerCase()` before a lookup, full Unicode case folding) or after NFKC
 * normalisation (fullwidth `ｇｕｉｄ`, the Kelvin sign `K`, mathematical letters). Such a key, forwarded as an extra
 * field, could be taken downstream as the field itself and move money under a value guidgate never fingerprinted.
 */

const ASCII = /^[\x00-\x7f]*$/;
const ONLY_MARKS = /^\p{M}+$/u;

/**
 * The lower-case texts one code point can be read as. Case mappings are tried both ways and in the Turkish locale
 * (`ı` upper-cases to `I`, `İ` lower-cases to `i`), each also after NFKC. Where a full case mapping adds combining
 * marks (`İ` lower-cases to `i` + U+0307), the bare letter is a reading too: Java's per-character mapping gives it.
 */
function readingsOf(cp: string): ReadonlySet<string> {
  const out = new Set<string>();
  const add = (from: string, mapped: string): void => {
    for (const m of new Set([mapped, mapped.normalize('NFKC')])) {
      const lower = m.toLowerCase();
      out.add(lower);
      const [first, ...rest] = [...lower];
      if (first !== undefined && rest.length > 0 && [...lower].length > [...from].length && ONLY_MARKS.test(rest.join(''))) out.add(first);
    }
  };
  for (const base of new Set([cp, cp.normalize('NFKC')])) {
    for (const once of [base, base.toUpperCase(), base.toLowerCase(), base.toLocaleUpperCase('tr'), base.toLocaleLowerCase('tr')]) {
      add(base, once);
      add(base, once.toUpperCase());
      add(base, once.toLowerCase());
    }
  }
  return out;
}

/** Can the code points `cps`, each read one of its ways, spell `field` (lower-case ASCII)? */
function spells(cps: readonly string[], field: string): boolean {
  if (cps.length > field.length) return false; // every reading is at least one character long
  let positions = new Set([0]);
  for (const cp of cps) {
    const next = new Set<number>();
    for (const reading of readingsOf(cp)) {
      for (const p of positions) if (field.startsWith(reading, p)) next.add(p + reading.length);
    }
    if (next.size === 0) return false;
    positions = next;
  }
  return positions.has(field.length);
}

/**
 * The field of `fields` (lower-case ASCII) that `key` could be read as without being exactly it, or null. A key
 * exactly equal to a field is that field, not a look-alike.
 */
export function lookalikeOf(key: string, fields: ReadonlySet<string>): string | null {
  if (fields.has(key)) return null;
  if (ASCII.test(key)) {
    const lower = key.toLowerCase();
    return fields.has(lower) ? lower : null;
  }
  for (const form of new Set([key, key.normalize('NFKC')])) {
    const cps = [...form];
    for (const field of fields) if (spells(cps, field)) return field;
  }
  return null;
}
