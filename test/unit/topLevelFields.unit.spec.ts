import fc from 'fast-check';
import { describe, it, expect } from 'vitest';
import { duplicateField } from '../../src/relay/transferRequest.js';

describe('duplicateField: a contract field named twice at the top level of the body', () => {
  it.each([
    ['{"guid":"a","from":"A1","to":"B1","amount":1}', null],
    ['{"guid":"a","guid":"b"}', 'guid'],
    ['{"from":"A1","x":{"from":"B1"},"to":"B1"}', null], // nested: not ours to judge, forwarded untouched
    ['{"memo":1,"memo":2}', null], // not a contract field: forwarded untouched
    ['{"s":"\\"amount\\":1,","amount":1}', null], // a key-like text inside a string value
    ['{"amount":1,"\\u0061mount":2}', 'amount'],
    ['{"a":[{"guid":1},{"guid":2}],"guid":"x"}', null],
    ['{ "to" : "B1" , "to" : "B2" }', 'to'],
  ])('%s -> %s', (text, expected) => {
    JSON.parse(text); // the scanner only ever sees JSON that parsed
    expect(duplicateField(text)).toBe(expected);
  });

  it('property: never a false alarm on JSON.stringify output, and always finds an appended duplicate', () => {
    const field = fc.constantFrom('guid', 'from', 'to', 'amount', 'currency');
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), field, fc.jsonValue(), (obj, dup, value) => {
        const text = JSON.stringify(obj);
        expect(duplicateField(text)).toBeNull();
        const withField = JSON.stringify({ ...obj, [dup]: 1 });
        const twice = `${withField.slice(0, -1)},${JSON.stringify(dup)}:${JSON.stringify(value)}}`;
        expect(duplicateField(twice)).toBe(dup);
      }),
      { interruptAfterTimeLimit: 3000, numRuns: 2000 },
    );
  });
});
