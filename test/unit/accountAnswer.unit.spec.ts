import { describe, expect, it } from 'vitest';
import { decodeDefinite, namesGuid } from '../../src/account/accountAnswer.js';

const ASKED = 'TX-1';
const decode = (body: string, status = 200): ReturnType<typeof decodeDefinite> => decodeDefinite(status, Buffer.from(body, 'utf8'), ASKED);

describe('decodeDefinite: the GUID an answer names', () => {
  it.each<[string, string, string]>([
    ['the GUID asked about', '{"guid":"TX-1","code":"0000","message":"done"}', '0000'],
    ['the GUID asked about, spelled with an escape', '{"guid":"TX\\u002d1","code":"B201"}', 'B201'],
    // CONTRACT.md §3 does not require a 200 to carry `guid` (only a 404 must name it).
    ['no guid at all', '{"code":"E500","message":"core down"}', 'E500'],
    ['a guid only in a nested object (not the answer naming a transfer)', '{"code":"0000","detail":{"guid":"OTHER"}}', '0000'],
    ['a key that is guid but for case (not the member we read)', '{"GUID":"OTHER","code":"0000"}', '0000'],
  ])('names %s → definite', (_n, body, code) => {
    expect(decode(body)).toEqual({ ok: true, code, text: body });
  });

  it.each<[string, string, string]>([
    ['another GUID', '{"guid":"SOMEONE-ELSE","code":"0000"}', 'another GUID (SOMEONE-ELSE)'],
    ['the GUID asked about but for case', '{"guid":"tx-1","code":"0000"}', 'another GUID (tx-1)'],
    ['the GUID asked about with a trailing space', '{"guid":"TX-1 ","code":"0000"}', 'another GUID'],
    ['a prefix of the GUID asked about', '{"guid":"TX-","code":"0000"}', 'another GUID'],
    ['an empty guid', '{"guid":"","code":"0000"}', 'another GUID ()'],
    ['guid twice, both the GUID asked about', '{"guid":"TX-1","code":"0000","guid":"TX-1"}', 'guid given more than once'],
    ['guid twice, the last one the GUID asked about', '{"guid":"OTHER","code":"0000","guid":"TX-1"}', 'guid given more than once'],
    ['guid twice, one spelled with an escape', '{"guid":"TX-1","code":"0000","\\u0067uid":"OTHER"}', 'guid given more than once'],
    ['guid null', '{"guid":null,"code":"0000"}', 'not a string (null)'],
    ['guid a number', '{"guid":1,"code":"0000"}', 'not a string (1)'],
    ['guid an array holding the GUID', '{"guid":["TX-1"],"code":"0000"}', 'not a string'],
    ['guid an object', '{"guid":{"id":"TX-1"},"code":"0000"}', 'not a string'],
  ])('names %s → not definite', (_n, body, detail) => {
    const d = decode(body);
    expect(d.ok).toBe(false);
    if (d.ok) throw new Error('unreachable');
    expect(d.detail).toContain(detail);
  });

  it('bounds what it repeats of a foreign GUID', () => {
    const d = decode(JSON.stringify({ guid: 'X'.repeat(10_000), code: '0000' }));
    expect(d.ok).toBe(false);
    if (d.ok) throw new Error('unreachable');
    expect(d.detail.length).toBeLessThan(100);
  });

  it('judges the code first: a non-definite answer about another GUID says what is wrong with the code', () => {
    expect(decode('{"guid":"OTHER","code":"E400"}')).toEqual({ ok: false, detail: 'code E400' });
    expect(decode('{"guid":"OTHER"}')).toEqual({ ok: false, detail: 'HTTP 200 without a code' });
    expect(decode('{"guid":"TX-1","code":"0000"}', 201)).toEqual({ ok: false, detail: 'HTTP 201' });
  });
});

describe('namesGuid (an inquiry 404)', () => {
  it.each<[string, string, boolean]>([
    ['the GUID', '{"guid":"TX-1","code":"E404"}', true],
    ['another GUID', '{"guid":"TX-2","code":"E404"}', false],
    ['no guid', '{"code":"E404"}', false],
    ['guid twice', '{"guid":"TX-1","guid":"TX-1"}', false],
    ['not JSON', '<html>404</html>', false],
    ['an array', '[{"guid":"TX-1"}]', false],
  ])('%s → %s', (_n, body, absent) => {
    expect(namesGuid(Buffer.from(body), ASKED)).toBe(absent);
  });
});
