import Database from 'better-sqlite3';
import fc from 'fast-check';
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { startHarness, type Harness } from '../support/relayHarness.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

describe('property: arbitrary bodies and headers at POST /v1/transfers', () => {
  const dir = mkdtempSync(join(tmpdir(), 'guidgate-fuzz-'));
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(dir);
  });
  afterAll(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });
  it('only contract codes come back, invalid requests store nothing, and the relay stays up', async () => {
    const ledger = new Database(h.db, { readonly: true });
    const seen = new Set<string>();
    const rows = () => (ledger.prepare('SELECT COUNT(*) AS n FROM ledger').get() as { n: number }).n;
    await fc.assert(
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
        // No GUID is ever applied twice by the account system.
        expect(h.sim.stats().doubleApplied).toEqual([]);
      }),
      { interruptAfterTimeLimit: 10_000, markInterruptAsFailure: false, numRuns: 2000 },
    );
    ledger.close();
    expect((await h.get('/healthz')).status).toBe(200);
    // The generator reaches past validation too, not only E400.
    expect([...seen].some((c) => c !== 'E400')).toBe(true);
  }, 60_000);
});
