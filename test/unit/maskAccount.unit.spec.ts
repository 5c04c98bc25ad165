import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { maskAccount, maskAccountsIn, maskAccountsInJson } from '../../src/shared/maskAccount.js';

/** The rule as the README states it, on a parsed value: under `from`/`to` every string and number is masked. */
function expected(value: unknown, under = false): unknown {
  if (Array.isArray(value)) return value.map((v) => expected(v, under));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, expected(v, under || k === 'from' || k === 'to')]));
  }
  if (under && typeof value === 'string') return maskAccount(value);
  if (under && typeof value === 'number') return maskAccount(JSON.stringify(value));
  return value;
}

describe('maskAccountsInJson: one masking rule for every view of a stored request or answer', () => {
  it('masks from/to at the top and at any depth, in arrays too; every other byte stays as stored', () => {
    const stored = '{ "code":"0000", "from":"6222021001777" ,"amount": 1.50,"n":12345678901234567890,\n "detail":{"to":"6222021002888","list":[{"from":"ACC-99887766"}]}}';
    expect(maskAccountsInJson(stored)).toBe(
      '{ "code":"0000", "from":"*********1777" ,"amount": 1.50,"n":12345678901234567890,\n "detail":{"to":"*********2888","list":[{"from":"********7766"}]}}',
    );
  });

  it('a key spelled with escapes counts; both of two equal keys are masked (parsers disagree on which one wins)', () => {
    expect(maskAccountsInJson('{"fr\\u006fm":"6222021001777","to":"6222021002888","to":"6222021003999"}')).toBe(
      '{"fr\\u006fm":"*********1777","to":"*********2888","to":"*********3999"}',
    );
  });

  it('an account number written as a number is masked from its digits as written (no rounding); values in an object under from/to are masked', () => {
    expect(maskAccountsInJson('{"from":62220210017771234567,"to":{"iban":"DE89370400440532013000","bank":"ICBC","n":[6222021002888]}}')).toBe(
      '{"from":"****************4567","to":{"iban":"******************3000","bank":"ICBC","n":["*********2888"]}}',
    );
  });

  it('strings holding quotes, escapes and structural characters are scanned as strings', () => {
    const stored = '{"note":"a \\"from\\": \\"6222021001777\\", {[,]}","from":"62220\\"21001777","x":true,"y":null,"z":false}';
    const masked = maskAccountsInJson(stored)!;
    expect(masked).toBe(`{"note":"a \\"from\\": \\"6222021001777\\", {[,]}","from":${JSON.stringify(maskAccount('62220"21001777'))},"x":true,"y":null,"z":false}`);
  });

  it('null for text that is not JSON: nothing of it is shown', () => {
    expect(maskAccountsInJson('{"from":"6222021001777"')).toBeNull();
    expect(maskAccountsInJson('<html>6222021001777</html>')).toBeNull();
  });

  it('for any JSON value: the result is JSON and is the rule applied to the parsed value; maskAccountsIn agrees', () => {
    const key = fc.constantFrom('from', 'to', 'guid', 'code', 'detail', 'From', '');
    const scalar = fc.oneof(fc.string(), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null));
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: 'small' }, scalar, fc.array(tie('value'), { maxLength: 4 }), fc.dictionary(key, tie('value'), { maxKeys: 4 })),
    }));
    fc.assert(
      fc.property(value, fc.constantFrom(0, 2), (v, indent) => {
        const text = JSON.stringify(v, null, indent);
        const masked = maskAccountsInJson(text);
        expect(masked).not.toBeNull();
        expect(JSON.parse(masked!)).toEqual(expected(JSON.parse(text)));
        expect(maskAccountsIn(JSON.parse(text))).toEqual(expected(JSON.parse(text)));
      }),
      { numRuns: 500 },
    );
  });
});
