import fc from 'fast-check';
import { describe, it, expect } from 'vitest';
import { topLevelFieldProblem } from '../../src/contract/transferRequest.js';

const fieldOf = (text: string) => {
  JSON.parse(text); // the scan only ever sees JSON that parsed
  return topLevelFieldProblem(text)?.field ?? null;
};

describe('topLevelFieldProblem: what JSON.parse hides at the top level of a transfer body', () => {
  it.each([
    ['{"guid":"a","from":"A1","to":"B1","amount":1}', null],
    ['{"guid":"a","guid":"b"}', 'guid'],
    ['{"from":"A1","x":{"from":"B1"},"to":"B1"}', null], // nested: not ours to judge, forwarded untouched
    ['{"memo":1,"memo":2}', null], // not a contract field: forwarded untouched
    ['{"s":"\\"amount\\":1,","amount":1}', null], // a key-like text inside a string value
    ['{"amount":1,"\\u0061mount":2}', 'amount'],
    ['{"a":[{"guid":1},{"guid":2}],"guid":"x"}', null],
    ['{ "to" : "B1" , "to" : "B2" }', 'to'],
  ])('duplicates: %s -> %s', (text, expected) => {
    expect(fieldOf(text)).toBe(expected);
  });

  it.each([
    ['{"GUID":"a"}', 'GUID'],
    ['{"guid":"a","Amount":1,"amount":1}', 'Amount'],
    ['{"FROM":"A1"}', 'FROM'],
    ['{"Currency":"USD"}', 'Currency'],
    ['{"tO":"B1"}', 'tO'],
    ['{"\\u0041mount":1}', 'Amount'], // escapes decoded before comparing
    ['{"x":{"GUID":1}}', null], // nested keys are the body's own business
    ['{"guids":1,"amounts":2}', null],
  ])('case-variant keys: %s -> %s', (text, expected) => {
    expect(fieldOf(text)).toBe(expected);
  });

  it.each(['1.0', '1e2', '-0', '0.99999999999999999', '1500.0000000000001', '1E3', '-5', '100.00', '1e+2', '"100"'])(
    'amount %s is not digits only -> amount',
    (amount) => {
      expect(fieldOf(`{"guid":"g","from":"A1","to":"B1","amount":${amount}}`)).toBe('amount');
    },
  );

  it.each(['1', '1500', ' 42 ', '9007199254740991'])('amount %s is digits only -> no problem here', (amount) => {
    expect(fieldOf(`{"guid":"g","from":"A1","to":"B1","amount":${amount}}`)).toBeNull();
  });

  it('property: never a false alarm on JSON.stringify output, and always finds an appended duplicate', () => {
    const field = fc.constantFrom('guid', 'from', 'to', 'amount', 'currency');
    // Bodies without contract keys in any casing, so that only the appended field can be at fault.
    const free = fc.dictionary(fc.string().filter((k) => !['guid', 'from', 'to', 'amount', 'currency'].includes(k.toLowerCase())), fc.jsonValue());
    fc.assert(
      fc.property(free, field, fc.jsonValue(), (obj, dup, value) => {
        expect(topLevelFieldProblem(JSON.stringify(obj))).toBeNull();
        const withField = JSON.stringify({ ...obj, [dup]: 1 });
        expect(topLevelFieldProblem(withField)).toBeNull();
        const twice = `${withField.slice(0, -1)},${JSON.stringify(dup)}:${JSON.stringify(value)}}`;
        expect(topLevelFieldProblem(twice)?.field).toBe(dup);
      }),
      { interruptAfterTimeLimit: 3000, numRuns: 2000 },
    );
  });
});
