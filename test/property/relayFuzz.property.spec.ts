import Database from 'better-sqlite3';
import fc from 'fast-check';
import { describe, it, expect, beforeAll } from 'vitest';
import { startHarness, type Harness } from '../support/relayHarness.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';
import { calledMoreThanOnce } from '../support/settle.js';
import { join } from 'node:path';
import { checkWithinBudget, expectEnoughRuns, propertyBudget } from '../support/scheduleBudget.js';

const CONTRACT_CODES = /^(0000|B2\d\d|E500|E400|E503|E901|E902|E903|E904|E905)$/;

/** Transfers that are almost right: every field may be dropped, mistyped or pushed past its rule. */
const fieldValue = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(9007199254740993),
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,20}$/),
  fc.array(fc.nat(), { maxLength: 2 }),
);
const mostly = <T>(good: fc.Arbitrary<T>) => fc.oneof({ weight: 6, arbitrary: good as fc.Arbitrary<unknown> }, { weight: 1, arbitrary: fieldValue });
const nearTransfer = fc
  .record(
    {
      guid: mostly(fc.stringMatching(/^FZ[A-Za-z0-9._:-]{1,10}$/)),
      from: mostly(fc.constantFrom('ACC-1', 'ACC-2', 'X-1')),
      to: mostly(fc.constantFrom('ACC-3', 'ACC-4', 'X-2')),
      amount: mostly(fc.integer({ min: 1, max: 1000 })),
      currency: mostly(fc.constantFrom('CNY', 'USD')),
      extra: fc.jsonValue({ maxDepth: 2 }),
    },
    { requiredKeys: [] },
  )
  .map((o) => JSON.stringify(o));

const body = fc.oneof(
  { weight: 4, arbitrary: nearTransfer },
  { weight: 1, arbitrary: fc.json() },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)) },
);
const headers = fc.record(
  {
    'idempotency-key': fc.oneof(fc.string({ maxLength: 30 }).filter((s) => /^[\x21-\x7e]*$/.test(s)), fc.stringMatching(/^FZ[A-Za-z0-9]{1,6}$/)),
    'content-type': fc.constantFrom('application/json', 'text/plain', 'application/octet-stream', 'application/json; charset=utf-8'),
  },
  { requiredKeys: [] },
);

const FIELDS = ['guid', 'from', 'to', 'amount', 'currency'] as const;

/** `word` in random letter case. */
const anyCase = (word: string) =>
  fc.array(fc.boolean(), { minLength: word.length, maxLength: word.length }).map((up) => [...word].map((ch, i) => (up[i] ? ch.toUpperCase() : ch)).join(''));
/** `word` in random letter case, never all lower case. */
const otherCase = (word: string) => anyCase(word).filter((w) => w !== word);

/** JSON number spellings that are not digits only: a sign, a fraction or an exponent. */
const notDigitsOnly = fc
  .record({
    minus: fc.boolean(),
    int: fc.oneof(fc.constant('0'), fc.integer({ min: 1, max: 10 ** 9 }).map(String)),
    frac: fc.option(fc.stringMatching(/^[0-9]{1,20}$/), { nil: undefined }),
    exp: fc.option(fc.tuple(fc.constantFrom('e', 'E'), fc.constantFrom('', '+', '-'), fc.stringMatching(/^[0-9]{1,3}$/)).map((p) => p.join('')), { nil: undefined }),
  })
  .filter((n) => n.minus || n.frac !== undefined || n.exp !== undefined)
  .map((n) => `${n.minus ? '-' : ''}${n.int}${n.frac === undefined ? '' : `.${n.frac}`}${n.exp ?? ''}`);

/** Media types a browser form or a careless client sends, in random letter case. */
const notJson = fc
  .oneof(
    fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=b', 'text/json', 'application/jsonp', 'application/json-seq', 'application/ld+json', 'application/octet-stream', ''),
    fc.stringMatching(/^[a-z]{1,10}\/[a-z+.-]{1,12}$/).filter((t) => t !== 'application/json'),
  )
  .chain(anyCase);

/** application/json as clients really write it: any case, optional parameters and spaces. */
const json = fc.tuple(anyCase('application/json'), fc.constantFrom('', '; charset=utf-8', ';charset=UTF-8', ' ; q=1')).map(([t, p]) => `${t}${p}`);

type Defect = { kind: 'content-type'; value: string } | { kind: 'amount'; value: string } | { kind: 'key'; value: string };
const defect: fc.Arbitrary<Defect> = fc.oneof(
  notJson.map((value) => ({ kind: 'content-type' as const, value })),
  notDigitsOnly.map((value) => ({ kind: 'amount' as const, value })),
  fc.constantFrom(...FIELDS).chain(otherCase).map((value) => ({ kind: 'key' as const, value })),
);

// On a 2-core machine shared with other work: all 2000 bodies in about 3 s, 700 to 1000 defects in 8 s. The minimums
// run whatever the time they take, the rest while the budget lasts.
const bodiesBudget = propertyBudget(10, 500, 2000);
const defectsBudget = propertyBudget(8, 200, 1000);

describe('property: arbitrary bodies and headers at POST /v1/transfers', () => {
  const tmp = useTempDir('file');
  const cleanup = useCleanup('file');
  let h: Harness;
  beforeAll(async () => {
    h = cleanup.use(await startHarness(tmp()));
  });
  it('only contract codes come back, invalid requests store nothing, and the relay stays up', async () => {
    const ledger = new Database(h.db, { readonly: true });
    const seen = new Set<string>();
    const rows = () => (ledger.prepare('SELECT COUNT(*) AS n FROM ledger').get() as { n: number }).n;
    let completed = 0;
    await checkWithinBudget(
      fc.asyncProperty(body, headers, async (b, hd) => {
        const before = rows();
        const callsBefore = h.sim.stats().totalCalls;
        const r = await h.post(b, hd);
        const json = r.json();
        seen.add(String(json['code']));
        expect(String(json['code'])).toMatch(CONTRACT_CODES);
        if (json['code'] === 'E400') {
          expect(r.status === 400 || r.status === 413 || r.status === 415).toBe(true);
          // 415 exactly when the media type is not application/json (contract v2 §2).
          expect(r.status === 415).toBe(json['field'] === 'Content-Type');
          expect(typeof json['field']).toBe('string');
          expect(rows()).toBe(before);
          expect(h.sim.stats().totalCalls).toBe(callsBefore);
        }
        // No GUID ever reaches the account system twice, whatever it answered the first time.
        expect(calledMoreThanOnce(h.sim.stats())).toEqual([]);
        completed++;
      }),
      bodiesBudget,
    );
    ledger.close();
    console.log(`relay fuzz: ${completed} bodies`);
    expectEnoughRuns(bodiesBudget, completed, 'the arbitrary bodies property');
    expect((await h.get('/healthz')).status).toBe(200);
    // The generator reaches past validation too, not only E400.
    expect([...seen].some((c) => c !== 'E400')).toBe(true);
  }, bodiesBudget.testTimeoutMs);

  it('strict input (Content-Type, amount spelling, key casing): each defect is E400 naming its field, with nothing stored and nothing sent; the same request without it is accepted', async () => {
    const ledger = new Database(h.db, { readonly: true });
    const rows = () => (ledger.prepare('SELECT COUNT(*) AS n FROM ledger').get() as { n: number }).n;
    let n = 0;
    let accepted = 0;
    await checkWithinBudget(
      fc.asyncProperty(defect, json, fc.boolean(), async (d, goodType, keyFirst) => {
        n++;
        const fields = `"guid":"SI-${process.pid}-${n}","from":"ACC-1001","to":"ACC-2002"`;
        const amount = d.kind === 'amount' ? d.value : '100';
        const extra = d.kind === 'key' ? `${JSON.stringify(d.value)}:"x"` : '"memo":"x"';
        const body = keyFirst ? `{${extra},${fields},"amount":${amount}}` : `{${fields},"amount":${amount},${extra}}`;
        const before = rows();
        const callsBefore = h.sim.stats().totalCalls;
        const r = await h.post(body, { 'content-type': d.kind === 'content-type' ? d.value : goodType });
        const expected = d.kind === 'content-type' ? [415, 'E400', 'Content-Type'] : [400, 'E400', d.kind === 'amount' ? 'amount' : d.value];
        expect([r.status, r.json()['code'], r.json()['field']]).toEqual(expected);
        expect(rows()).toBe(before);
        expect(h.sim.stats().totalCalls).toBe(callsBefore);

        // Without the defect the same transfer goes through: the refusal was for that defect alone.
        const fixed = `{${fields},"amount":100,"memo":"x"}`;
        const ok = await h.post(fixed, { 'content-type': goodType });
        expect(ok.json()['code']).toBe('0000');
        accepted++;
      }),
      defectsBudget,
    );
    ledger.close();
    console.log(`relay fuzz: ${accepted} defects`);
    expectEnoughRuns(defectsBudget, accepted, 'the strict input property');
    expect(calledMoreThanOnce(h.sim.stats())).toEqual([]);
  }, defectsBudget.testTimeoutMs);
});
