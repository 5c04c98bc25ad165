import { describe, it, expect } from 'vitest';
import { LEDGER_COLUMNS, rowFromValues, rowToState, stateToRow } from '../../src/projections/ledgerRow.js';
import type { LedgerState } from '../../src/events/state.js';

const state: LedgerState = {
  guid: 'g-1', status: 'DONE', code: '0000', request: '{"guid":"g-1"}', response: '{"code":"0000"}', fingerprint: 'f'.repeat(64),
  channel: 'hub', attempts: 2, createdAt: 10, updatedAt: 20, lastSeq: 4, sentAt: 15, timeoutMs: 3000, failedByInquiry: false,
};

describe('the ledger row, column by column', () => {
  it('rowFromValues puts each value under the column of its place in LEDGER_COLUMNS (the order a raw read returns)', () => {
    expect(rowFromValues(LEDGER_COLUMNS)).toEqual(Object.fromEntries(LEDGER_COLUMNS.map((c) => [c, c])));
  });

  it('a state written as a row and read back as values is the same state', () => {
    const row = stateToRow(state);
    expect(Object.keys(row)).toEqual([...LEDGER_COLUMNS]);
    expect(rowToState(rowFromValues(LEDGER_COLUMNS.map((c) => row[c])))).toEqual(state);
  });
});
