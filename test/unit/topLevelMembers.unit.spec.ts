import fc from 'fast-check';
import { describe, it, expect } from 'vitest';
import { topLevelMembers } from '../../src/json/topLevelMembers.js';

describe('topLevelMembers: the top-level keys of a JSON object and their values as written', () => {
  it.each([
    ['{"amount":1.0,"guid":"g"}', [['amount', '1.0'], ['guid', '"g"']]],
    ['{ "amount" :\t1e2 ,\n"x" : { "amount" : 3 } }', [['amount', '1e2'], ['x', '{ "amount" : 3 }']]],
    ['{"\\u0061mount":-0,"a":[1,{"b":"}"}],"c":"\\","}', [['amount', '-0'], ['a', '[1,{"b":"}"}]'], ['c', '"\\","']]],
    ['{"k":1,"k":2}', [['k', '1'], ['k', '2']]],
    // a key with an escape is decoded; one without is taken as written
    ['{"a\\"b":1,"gu\\u0069d":"x","plain":2}', [['a"b', '1'], ['guid', '"x"'], ['plain', '2']]],
    ['{}', []],
    ['[{"a":1}]', []],
    ['"{"', []],
    ['7', []],
  ])('%s', (text, expected) => {
    JSON.parse(text);
    expect(topLevelMembers(text).map((m) => [m.key, m.raw])).toEqual(expected);
  });

  it('property: on any object, the keys are its keys and each raw value parses back to its value', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.constantFrom(0, 2), (obj, indent) => {
        const text = JSON.stringify(obj, null, indent);
        const parsed = JSON.parse(text) as Record<string, unknown>;
        const members = topLevelMembers(text);
        expect(members.map((m) => m.key)).toEqual(Object.keys(parsed));
        for (const m of members) expect(JSON.parse(m.raw)).toEqual(parsed[m.key]);
      }),
      { interruptAfterTimeLimit: 3000, numRuns: 1000 },
    );
  });
});
