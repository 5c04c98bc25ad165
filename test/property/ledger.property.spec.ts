import { join } from 'node:path';
import fc from 'fast-check';
import { describe, it, expect } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite/sqliteStore.js';
import { decide, type Command } from '../../src/events/decide.js';
import { evolve } from '../../src/events/evolve.js';
import type { LedgerState } from '../../src/events/state.js';
import { useTempDir } from '../support/tmp.js';
import { orThrow } from '../../src/events/storeResult.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';
import { checkWithinBudget, expectEnoughRuns, propertyBudget } from '../support/scheduleBudget.js';

const GUIDS = ['g0', 'g1', 'g2', 'g3'];
const CODES = ['0000', 'B201', 'B202', 'E500', 'E400'];

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ type: fc.constant('Submit' as const), request: fc.constantFrom('{"a":1}', '{"a":2}'), fingerprint: fc.constantFrom('f1', 'f2'), timeoutMs: fc.integer({ min: 0, max: 50 }), maxAttempts: fc.integer({ min: 1, max: 4 }) }),
  fc.record({ type: fc.constant('Claim' as const), request: fc.constant('{"a":1}'), fingerprint: fc.constantFrom('f1', 'f2') }),
  fc.record({ type: fc.constant('Send' as const), timeoutMs: fc.integer({ min: 0, max: 50 }), maxAttempts: fc.integer({ min: 1, max: 4 }) }),
  fc.record({ type: fc.constant('RecordAnswer' as const), attempt: fc.integer({ min: 1, max: 4 }), code: fc.constantFrom(...CODES), response: fc.string({ maxLength: 8 }), latencyMs: fc.nat(100) }),
  fc.record({ type: fc.constant('RecordTimeout' as const), attempt: fc.integer({ min: 1, max: 4 }), reason: fc.constantFrom('timeout' as const, 'reset' as const, 'non-definite' as const) }),
  fc.record({ type: fc.constant('RecordConnectFailure' as const), attempt: fc.integer({ min: 1, max: 4 }), reason: fc.constantFrom('refused' as const, 'connect-timeout' as const) }),
  fc.record({ type: fc.constant('SweepOrphan' as const), graceMs: fc.integer({ min: 0, max: 50 }) }),
  fc.oneof(
    fc.record({ type: fc.constant('Resolve' as const), outcome: fc.constant('absent' as const) }),
    fc.record({ type: fc.constant('Resolve' as const), outcome: fc.constant('processed' as const), code: fc.constantFrom(...CODES), response: fc.string({ maxLength: 8 }) }),
  ),
  fc.record({ type: fc.constant('Purge' as const), retentionMs: fc.integer({ min: 0, max: 50 }) }),
);

/** One step: a few commands issued together (they share a group-commit batch), then the clock moves. */
const stepArb = fc.record({
  commands: fc.array(fc.record({ guid: fc.constantFrom(...GUIDS), command: commandArb }), { minLength: 1, maxLength: 4 }),
  advanceMs: fc.integer({ min: 0, max: 40 }),
});

// 300 sequences take about 4 s on an idle 2-core machine; 100 are run however long they take, the rest while 15 s last.
const budget = propertyBudget(15, 100, 300);

describe('property: the ledger is always the fold of the log', () => {
  const tmp = useTempDir();

  it('random command sequences on random GUIDs keep ledger = rebuild, gapless seqs, one row per GUID, and match a pure model', async () => {
    let completed = 0;
    await checkWithinBudget(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 25 }), async (steps) => {
        let now = 1_000;
        const store = openSqliteStore({ projection: ledgerProjection, path: join(tmp(), 'p.db'), clock: () => now, synchronous: 'NORMAL' });
        const model = new Map<string, LedgerState>();
        try {
          for (const step of steps) {
            // The model applies the same commands in the same order the store's batch will.
            for (const { guid, command } of step.commands) {
              const d = decide(model.get(guid) ?? null, command, now);
              if (d._tag === 'Right') {
                let s: LedgerState | null = model.get(guid) ?? null;
                for (const e of d.right) s = evolve(s, e, guid);
                model.set(guid, s!);
              }
            }
            await Promise.all(step.commands.map(({ guid, command }) => orThrow(store.execute(guid, command))));
            now += step.advanceMs;

            expect(await orThrow(store.verifyProjection())).toEqual([]);
            const log = await orThrow(store.readAll(-1, 1_000_000));
            const seqs = new Map<string, number[]>();
            for (const e of log) seqs.set(e.guid, [...(seqs.get(e.guid) ?? []), e.seq]);
            for (const [, s] of seqs) expect(s).toEqual(s.map((_, i) => i));
            const rows = await orThrow(store.queryLedger({}));
            expect(rows.map((r) => r.guid)).toEqual([...seqs.keys()].sort());
            expect(rows).toEqual([...model.values()].sort((a, b) => a.guid.localeCompare(b.guid)));
          }
        } finally {
          await store.close();
        }
        completed++;
      }),
      budget,
    );
    expectEnoughRuns(budget, completed, 'the ledger property');
  }, budget.testTimeoutMs);
});
