import { describe, it, expect } from 'vitest';
import type { Command } from '../../src/events/decide.js';
import { foldEvents } from '../../src/events/evolve.js';
import type { LedgerState } from '../../src/events/state.js';
import { planBatch, type Unit } from '../../src/store/shared/planBatch.js';
import { ev } from '../support/given.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';

const toRow = ledgerProjection.stateToRow;

const submit = (guid: string): Unit => ({ op: 'execute', guid, now: 10, command: { type: 'Submit', request: `{"guid":"${guid}"}`, fingerprint: guid, timeoutMs: 1, maxAttempts: 3 } });
const exec = (guid: string, command: Command, now = 20): Unit => ({ op: 'execute', guid, now, command });
const stored = (...states: LedgerState[]) => new Map(states.map((s) => [s.guid, s]));
const sentRow = (guid: string) => foldEvents(guid, [ev.claimed(1, `{"guid":"${guid}"}`, guid), ev.sent(1, 1)])!;

describe('planBatch (the group commit, decided in JS before anything is written)', () => {
  it('writes rows in GUID order and events in (guid, seq) order, whatever the submission order', () => {
    const plan = planBatch([submit('c'), exec('b', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{}', latencyMs: 1 }), submit('a')], stored(sentRow('b')), toRow);
    expect(plan.rows.map((r) => [r.row.guid, r.prevSeq, r.row.last_seq])).toEqual([['a', -1, 1], ['b', 1, 2], ['c', -1, 1]]);
    expect(plan.events.map((e) => `${e.guid}#${e.seq}`)).toEqual(['a#0', 'a#1', 'b#2', 'c#0', 'c#1']);
  });

  it('duplicates of a GUID carry the state forward; one row is written with the first seq the batch found', () => {
    const plan = planBatch([submit('g'), submit('g'), exec('g', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' })], new Map(), toRow);
    expect(plan.units.map((u) => u.kind)).toEqual(['won', 'refused', 'won']);
    expect(plan.rows).toHaveLength(1);
    expect(plan.rows[0]).toMatchObject({ prevSeq: -1, row: { status: 'UNKNOWN', last_seq: 2 } });
  });

  it('a unit that throws fails alone and changes no state', () => {
    const bad: Unit = { op: 'append', guid: 'x', expectedSeq: -1, events: [ev.sent()] };
    const plan = planBatch([submit('a'), bad, submit('x')], new Map(), toRow);
    expect(plan.units.map((u) => u.kind)).toEqual(['won', 'error', 'won']);
    expect(plan.rows.map((r) => r.row.guid)).toEqual(['a', 'x']);
  });

  it('a row the projection cannot make fails its GUID\'s units alone; nothing of that GUID is planned', () => {
    const picky: typeof toRow = (state) => {
      if (state.guid === 'x') throw new Error('no row for x');
      return toRow(state);
    };
    const plan = planBatch([submit('a'), submit('x'), exec('x', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }), submit('b')], new Map(), picky);
    expect(plan.units.map((u) => u.kind)).toEqual(['won', 'error', 'error', 'won']);
    expect(plan.rows.map((r) => r.row.guid)).toEqual(['a', 'b']);
    expect(plan.events.map((e) => e.guid)).not.toContain('x');
  });

  it('a blocked GUID (its next seq already in the log) loses without writing', () => {
    const plan = planBatch([submit('a'), { op: 'append', guid: 'b', expectedSeq: 1, events: [ev.answered()] }], stored(sentRow('b')), toRow, new Set(['a', 'b']));
    expect(plan.units).toEqual([
      { kind: 'lost', state: null },
      { kind: 'lost', state: sentRow('b') },
    ]);
    expect(plan.rows).toEqual([]);
  });

  it('a Purged redacts the events planned before it in the same batch', () => {
    const done = foldEvents('g', [ev.claimed(), ev.sent(), ev.answered()])!;
    const plan = planBatch([exec('g', { type: 'Purge', retentionMs: 0 }, 5000)], stored({ ...done, guid: 'g' }), toRow);
    expect(plan.units.map((u) => u.kind)).toEqual(['won']);
    expect(plan.purged).toEqual(new Set(['g']));
    const inBatch = planBatch([submit('h'), exec('h', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{"bal":1}', latencyMs: 1 }), exec('h', { type: 'Purge', retentionMs: 0 })], new Map(), toRow);
    expect(inBatch.units.map((u) => u.kind)).toEqual(['won', 'won', 'won']);
    expect(inBatch.events.map((e) => e.data).join(' ')).not.toMatch(/guid|bal/);
  });
});
