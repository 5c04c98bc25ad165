import Database from 'better-sqlite3';
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { startHarness, type Harness } from '../support/relayHarness.js';

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

describe('property: strict input at POST /v1/transfers (Content-Type, amount spelling, key casing)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'guidgate-strict-'));
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(dir);
  });
  afterAll(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('each defect is E400 naming its field, with nothing stored and nothing sent; the same request without it is accepted', async () => {
    const ledger = new Database(h.db, { readonly: true });
    const rows = () => (ledger.prepare('SELECT COUNT(*) AS n FROM ledger').get() as { n: number }).n;
    let n = 0;
    let accepted = 0;
    await fc.assert(
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
      { interruptAfterTimeLimit: 8_000, markInterruptAsFailure: false, numRuns: 1000 },
    );
    ledger.close();
    expect(accepted).toBeGreaterThan(20);
    expect(h.sim.stats().doubleApplied).toEqual([]);
  }, 60_000);
});
