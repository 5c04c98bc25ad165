import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lookalikeOf } from '../../src/contract/fieldLookalike.js';
import { topLevelFieldProblem } from '../../src/contract/transferRequest.js';

const FIELDS = ['guid', 'from', 'to', 'amount', 'currency'] as const;
const CONTRACT = new Set<string>(FIELDS);

/** The field the body `{key: 1}` is refused for, or null when it is forwarded. */
const refusedKey = (key: string, escaped = false): string | null => {
  const json = escaped ? JSON.stringify(key).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : JSON.stringify(key);
  const text = `{"memo":"x",${json}:1}`;
  JSON.parse(text); // the scan only ever sees JSON that parsed
  return topLevelFieldProblem(text)?.field ?? null;
};

describe('lookalikeOf: keys a case-insensitive or NFKC-normalising parser could take for a contract field', () => {
  it.each<[string, string, string]>([
    ['U+0131 dotless i (upper-cases to I)', 'gu\u0131d', 'guid'],
    ['U+0130 capital I with dot (lower-cases to i + U+0307; Java: i)', 'GU\u0130D', 'guid'],
    ['U+0130 in a lower-case key', 'gu\u0130d', 'guid'],
    ['I + U+0307 written apart (NFKC composes it to U+0130)', 'GUI\u0307D', 'guid'],
    ['fullwidth lower case', '\uff47\uff55\uff49\uff44', 'guid'],
    ['fullwidth upper case', '\uff21\uff2d\uff2f\uff35\uff2e\uff34', 'amount'],
    ['fullwidth and ASCII mixed', 'f\uff52om', 'from'],
    ['mathematical bold', '\u{1d42d}\u{1d428}', 'to'],
    ['circled letters', '\u24d2\u24e4\u24e1\u24e1\u24d4\u24dd\u24d2\u24e8', 'currency'],
    ['superscript-like modifier letter (NFKC: g)', '\u1d4duid', 'guid'],
  ])('%s: %s → %s', (_n, key, field) => {
    expect(lookalikeOf(key, CONTRACT)).toBe(field);
    expect(refusedKey(key)).toBe(key);
    expect(refusedKey(key, true)).toBe(key); // the same key spelled with \u escapes
  });

  it.each<[string, string, string]>([
    ['U+212A Kelvin sign (lower-cases to k)', '\u212aind', 'kind'],
    ['U+017F long s (upper-cases to S)', '\u017ftatus', 'status'],
    ['ß (full case folding: ss)', 'cla\u00df', 'class'],
    ['ligature ﬀ (NFKC: ff)', 'o\ufb00er', 'offer'],
    ['ligature ﬁ in upper case company', 'PRO\ufb01T', 'profit'],
  ])('%s: %s → %s (letters the contract fields lack, with fields that have them)', (_n, key, field) => {
    expect(lookalikeOf(key, new Set([field]))).toBe(field);
  });

  it.each<[string, string]>([
    ['exactly the field', 'guid'],
    ['an accented letter is another letter', 'g\u00fail'],
    ['an accented letter is another letter (u + U+0301, composed by NFKC)', 'gu\u0301id'],
    ['a letter added', 'guids'],
    ['a letter missing', 'gid'],
    ['a combining mark NFKC cannot compose away', 'gu\u0307id'],
    ['a zero-width space inside', 'gu\u200bid'],
    ['Cyrillic а (a homoglyph, not a case or compatibility variant)', '\u0430mount'],
    ['Greek ο', 't\u03bf'],
    ['an empty key', ''],
    ['a long key', 'g'.repeat(10_000)],
  ])('%s: %s → forwarded', (_n, key) => {
    expect(lookalikeOf(key, CONTRACT)).toBeNull();
    expect(refusedKey(key)).toBeNull();
  });

  it('names the key, and says the field it could be read as', () => {
    const text = '{"guid":"g","from":"A1","to":"B1","amount":1,"gu\u0131d":"other"}';
    expect(topLevelFieldProblem(text)).toEqual({ field: 'gu\u0131d', message: 'gu\u0131d differs from the contract field guid only in letter case or Unicode form' });
    expect(topLevelFieldProblem('{"GUID":"x"}')).toEqual({ field: 'GUID', message: 'GUID differs from the contract field guid only in letter case' });
  });
});

/** Ways to write one ASCII lower-case letter that a case-insensitive or NFKC-normalising parser reads as it. */
function variantsOf(letter: string): string[] {
  const i = letter.charCodeAt(0) - 0x61;
  const out = [
    letter,
    letter.toUpperCase(),
    String.fromCodePoint(0xff41 + i), // fullwidth small
    String.fromCodePoint(0xff21 + i), // fullwidth capital
    String.fromCodePoint(0x1d41a + i), // mathematical bold small
    String.fromCodePoint(0x1d400 + i), // mathematical bold capital
    String.fromCodePoint(0x24d0 + i), // circled small
    String.fromCodePoint(0x24b6 + i), // circled capital
  ];
  if (letter === 'i') out.push('\u0131', '\u0130');
  if (letter === 'k') out.push('\u212a');
  if (letter === 's') out.push('\u017f');
  return out;
}

/** A letter that is not `letter` in any case: another ASCII letter, or an accented one. */
const otherLetter = (letter: string): fc.Arbitrary<string> =>
  fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz\u00e0\u00e9\u00fa\u00f1\u00f8\u0142\u011f\u015f\u00e7\u00fc\u00ee'.split('')).filter((c) => c !== letter);

/** `field` with each letter written one of its ways. */
const variantOf = (field: string): fc.Arbitrary<string> =>
  fc.tuple(...[...field].map((c) => fc.constantFrom(...variantsOf(c)))).map((cs) => cs.join(''));

describe('property: case and compatibility variants of a contract field', () => {
  it('are refused naming the key, unless exactly the field; with or without \\u escapes', () => {
    const key = fc.constantFrom(...FIELDS).chain((field) => fc.tuple(fc.constant(field), variantOf(field)));
    fc.assert(
      fc.property(key, fc.boolean(), ([field, variant], escaped) => {
        expect(lookalikeOf(variant, CONTRACT)).toBe(variant === field ? null : field);
        expect(refusedKey(variant, escaped)).toBe(variant === field ? null : variant);
      }),
      { numRuns: 2000 },
    );
  });

  it('a key with one real letter changed is forwarded, however the other letters are written', () => {
    const key = fc
      .constantFrom(...FIELDS)
      .chain((field) => fc.tuple(variantOf(field), fc.nat(field.length - 1)).chain(([variant, at]) =>
        otherLetter(field[at]!).chain((other) => fc.constantFrom(...(/[a-z]/.test(other) ? variantsOf(other) : [other, other.toUpperCase()])).map((o) => {
          const cps = [...variant];
          cps[at] = o;
          return cps.join('');
        })),
      ));
    fc.assert(
      fc.property(key, (k) => {
        expect(lookalikeOf(k, CONTRACT)).toBeNull();
        expect(refusedKey(k)).toBeNull();
      }),
      { numRuns: 2000 },
    );
  });
});
