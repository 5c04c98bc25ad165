import { describe, expect, it } from 'vitest';
import { classify } from '../../src/reconcile/classify.js';
import { LedgerSourceError } from '../../src/reconcile/errors.js';
import type { JournalEntry, LedgerFacts, ReconcileWindow } from '../../src/reconcile/types.js';

const W: ReconcileWindow = { from: 1_000_000, to: 2_000_000, pendingMs: 100_000 };
const terms = { from: 'ACC-1', to: 'ACC-2', amount: 250n, currency: 'CNY' as string | null };
const row = (status: LedgerFacts['status'], code: string | null, over: Partial<LedgerFacts> = {}): LedgerFacts => ({
  guid: 'G-1', status, code, firstSentAt: 1_200_000, terms, ...over,
});
const entry = (over: Partial<JournalEntry> = {}): JournalEntry => ({
  guid: 'G-1', ref: 'tx-1', from: 'ACC-1', to: 'ACC-2', amount: 250n, currency: 'CNY', appliedAt: 1_200_005, line: 1, ...over,
});
const one = [entry()];
const two = [entry(), entry({ ref: 'tx-2', line: 2 })];

describe('classify: the contract §8 table, one category per GUID', () => {
  it.each([
    ['DONE 0000 + one equal entry', row('DONE', '0000'), one, 'matched', null],
    ['DONE 0000 + no entry (a posting removed)', row('DONE', '0000'), [], 'missing_in_journal', 'P2'],
    ['no row + one entry (a posting for an unknown GUID)', null, one, 'missing_in_ledger', 'P2'],
    ['DONE 0000 + two entries (a second posting)', row('DONE', '0000'), two, 'duplicate_in_journal', 'P1'],
    ['DONE 0000 + an altered amount', row('DONE', '0000'), [entry({ amount: 251n })], 'amount_mismatch', 'P1'],
    ['DONE 0000 + another from', row('DONE', '0000'), [entry({ from: 'ACC-9' })], 'amount_mismatch', 'P1'],
    ['DONE 0000 + another to', row('DONE', '0000'), [entry({ to: 'ACC-9' })], 'amount_mismatch', 'P1'],
    ['DONE 0000 + another currency', row('DONE', '0000'), [entry({ currency: 'USD' })], 'amount_mismatch', 'P1'],
    ['DONE 0000 + a null currency against CNY', row('DONE', '0000'), [entry({ currency: null })], 'amount_mismatch', 'P1'],
    ['no currency on both sides', row('DONE', '0000', { terms: { ...terms, currency: null } }), [entry({ currency: null })], 'matched', null],
    ['DONE B201 + one entry', row('DONE', 'B201'), one, 'rejected_in_ledger', 'P1'],
    ['DONE E500 + one entry', row('DONE', 'E500'), one, 'rejected_in_ledger', 'P1'],
    ['UNKNOWN + one entry', row('UNKNOWN', 'E901'), one, 'unsettled_in_ledger', 'P2'],
    ['SENT + one entry', row('SENT', null), one, 'unsettled_in_ledger', 'P2'],
    ['RECEIVED + one entry', row('RECEIVED', null), one, 'unsettled_in_ledger', 'P2'],
    ['FAILED + one entry (a resend would apply it twice)', row('FAILED', 'E902'), one, 'unsettled_in_ledger', 'P1'],
    ['DONE 0000 sent within pending of to, no entry yet', row('DONE', '0000', { firstSentAt: W.to - 1 }), [], 'pending', null],
    ['pending starts exactly at to − pending', row('DONE', '0000', { firstSentAt: W.to - W.pendingMs }), [], 'pending', null],
    ['one ms before to − pending is missing', row('DONE', '0000', { firstSentAt: W.to - W.pendingMs - 1 }), [], 'missing_in_journal', 'P2'],
  ] as const)('%s → %s', (_what, ledger, entries, category, severity) => {
    expect(classify(ledger, entries, W)).toEqual({ category, severity });
  });

  // Both sides agree that no money moved, but matched is DONE 0000 with its posting: these are counted apart.
  it.each([
    ['B201 + no entry', row('DONE', 'B201'), 'rejected'],
    ['E500 + no entry', row('DONE', 'E500'), 'rejected'],
    ['a B202 tombstone + no entry', row('PURGED', 'B202', { terms: null }), 'rejected'],
    ['FAILED + no entry', row('FAILED', 'E902'), 'unsettled'],
    ['UNKNOWN + no entry: for resolve, not a break', row('UNKNOWN', 'E901'), 'unsettled'],
    ['SENT + no entry', row('SENT', null), 'unsettled'],
  ] as const)('%s → no posting (%s), not matched, not a break', (_what, ledger, kind) => {
    expect(classify(ledger, [], W)).toEqual({ category: 'no_posting', severity: null, kind });
  });
});

describe('classify: where the table overlaps, a double debit wins', () => {
  it.each([
    ['FAILED', row('FAILED', 'E902')],
    ['UNKNOWN', row('UNKNOWN', 'E901')],
    ['B201', row('DONE', 'B201')],
    ['no row', null],
    ['an altered amount', row('DONE', '0000', { terms: { ...terms, amount: 1n } })],
    ['a tombstone', row('PURGED', '0000', { terms: null })],
  ] as const)('two entries and %s → duplicate_in_journal P1', (_what, ledger) => {
    expect(classify(ledger, two, W)).toEqual({ category: 'duplicate_in_journal', severity: 'P1' });
  });
});

describe('classify: a PURGED row counts as its tombstone', () => {
  const tomb = (code: string, over: Partial<LedgerFacts> = {}) => row('PURGED', code, { terms: null, ...over });
  it('0000 + one entry: matched on its code (no request kept, the terms cannot be compared)', () => {
    expect(classify(tomb('0000'), [entry({ amount: 999n })], W)).toEqual({ category: 'matched', severity: null });
  });
  it('0000 + no entry: missing_in_journal, or pending near to', () => {
    expect(classify(tomb('0000'), [], W).category).toBe('missing_in_journal');
    expect(classify(tomb('0000', { firstSentAt: W.to - 5 }), [], W).category).toBe('pending');
  });
  it('B202 + one entry: rejected_in_ledger', () => {
    expect(classify(tomb('B202'), one, W)).toEqual({ category: 'rejected_in_ledger', severity: 'P1' });
  });
  it('a settled row without a definite code is a corrupt ledger: the run stops, naming the GUID', () => {
    expect(() => classify(tomb('E901'), one, W)).toThrow(LedgerSourceError);
    expect(() => classify(row('DONE', null), [], W)).toThrow(/G-1 is DONE without a definite code/);
  });
});
