/**
 * The one write protocol (src/store/shared/writeProtocol.ts), driven against a table in memory whose rows a test may
 * move "behind the store's back" between the caller's read and the write: given the rows, when a batch is written,
 * then each unit's outcome and the steps the store was asked for.
 */
import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/events/decide.js';
import { foldEvents } from '../../src/events/evolve.js';
import type { LedgerState } from '../../src/events/state.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';
import type { BatchPlan } from '../../src/store/shared/planBatch.js';
import { eventKey, runProtocolSync, type SyncWriteIo, type WriteUnit } from '../../src/store/shared/writeProtocol.js';
import { ev } from '../support/given.js';

const submit = (guid: string, seen?: LedgerState | null): WriteUnit => ({
  op: 'execute', guid, now: 10, command: { type: 'Submit', request: `{"guid":"${guid}"}`, fingerprint: guid, timeoutMs: 1, maxAttempts: 3 }, ...(seen === undefined ? {} : { seen }),
});
const exec = (guid: string, command: Command, seen?: LedgerState | null): WriteUnit => ({ op: 'execute', guid, now: 20, command, ...(seen === undefined ? {} : { seen }) });
const answer: Command = { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{}', latencyMs: 1 };
const sentRow = (guid: string) => foldEvents(guid, [ev.claimed(1, `{"guid":"${guid}"}`, guid), ev.sent(1, 1)])!;

/** A store in memory: rows by GUID, the steps asked of it, and a hook that moves a row right before a write. */
function memoryStore(rows: Map<string, LedgerState>, beforeWrite: (plan: BatchPlan) => void = () => undefined) {
  const steps: string[] = [];
  let position = 0;
  const io: SyncWriteIo = {
    read(guids) {
      steps.push(`read ${guids.join(',')}`);
      return { rows: new Map(guids.flatMap((g) => (rows.has(g) ? [[g, rows.get(g)!] as const] : []))) };
    },
    taken: () => new Set(),
    write(plan) {
      beforeWrite(plan);
      steps.push(`write ${plan.rows.map((r) => r.row['guid']).join(',')}`);
      const won = new Set<string>();
      const positions = new Map<string, number>();
      for (const { row, prevSeq } of plan.rows) {
        const guid = row['guid'] as string;
        if ((rows.get(guid)?.lastSeq ?? -1) !== prevSeq) continue; // the compare-and-set
        won.add(guid);
        rows.set(guid, ledgerProjection.rowToState(row));
        for (const e of plan.events) if (e.guid === guid) positions.set(eventKey(e.guid, e.seq), ++position);
      }
      return { won, positions };
    },
  };
  return { io, steps };
}

const run = (units: readonly WriteUnit[], io: SyncWriteIo) => runProtocolSync(units, { stateToRow: ledgerProjection.stateToRow, maxRounds: 2, checkTaken: false }, io);

describe('the write protocol (both stores)', () => {
  it('given rows its callers saw as they are: one round, nothing read, one write', () => {
    const { io, steps } = memoryStore(new Map([['b', sentRow('b')]]));
    const [a, b] = run([submit('a', null), exec('b', answer, sentRow('b'))], io);
    expect(steps).toEqual(['read ', 'write a,b']);
    expect(a).toMatchObject({ ok: true, value: { kind: 'applied' } });
    expect(b).toMatchObject({ ok: true, value: { kind: 'applied', state: { status: 'DONE' } } });
  });

  it('given a seen row that moved before the write: the GUID is read and decided again; the other stands', () => {
    const rows = new Map([['b', sentRow('b')]]);
    let moved = false;
    const { io, steps } = memoryStore(rows, () => {
      if (moved) return;
      moved = true;
      rows.set('b', foldEvents('b', [ev.claimed(1, '{"guid":"b"}', 'b'), ev.sent(1, 1), ev.timedOut(1, 5)])!);
    });
    const [a, b] = run([submit('a', null), exec('b', answer, sentRow('b'))], io);
    expect(steps).toEqual(['read ', 'write a,b', 'read b', 'write b']);
    expect(a).toMatchObject({ ok: true, value: { kind: 'applied' } });
    // Decided on the row as it now is (UNKNOWN after a timeout): the answer still settles it.
    expect(b).toMatchObject({ ok: true, value: { kind: 'applied', state: { status: 'DONE', lastSeq: 3 } } });
  });

  it('given a refusal decided on a seen row: it is decided again on the row read, not taken on trust', () => {
    // The caller saw no row, so a RecordAnswer is refused; the row exists (someone claimed meanwhile).
    const { io, steps } = memoryStore(new Map([['b', sentRow('b')]]));
    const [b] = run([exec('b', answer, null)], io);
    expect(steps).toEqual(['read ', 'read b', 'write b']);
    expect(b).toMatchObject({ ok: true, value: { kind: 'applied', state: { status: 'DONE' } } });
  });

  it('given a row that keeps moving: when the rounds run out, the unit answers `exists` with the row last read', () => {
    const rows = new Map([['a', sentRow('a')]]);
    const { io, steps } = memoryStore(rows, (plan) => {
      for (const { row } of plan.rows) {
        const guid = row['guid'] as string;
        const lastSeq = rows.get(guid)?.lastSeq ?? -1;
        rows.set(guid, { ...sentRow(guid), lastSeq: lastSeq + 5 });
      }
    });
    const [a] = run([exec('a', answer)], io);
    expect(steps).toEqual(['read a', 'write a', 'read a', 'write a']);
    expect(a).toMatchObject({ ok: true, value: { kind: 'refused', refusal: { reason: 'exists', state: { lastSeq: 6 } } } });
  });

  it('given a row that does not decode: its units fail alone, the others commit', () => {
    const { io } = memoryStore(new Map());
    const unreadable: SyncWriteIo = { ...io, read: (guids) => ({ ...io.read(guids, false), unreadable: new Map([['x', new Error('bad row')]]) }) };
    const [a, x] = run([submit('a'), exec('x', answer)], unreadable);
    expect(a).toMatchObject({ ok: true, value: { kind: 'applied' } });
    expect(x).toMatchObject({ ok: false, error: new Error('bad row') });
  });

  it('given units without a time: the store must read its clock, and they are stamped with it', () => {
    const { io } = memoryStore(new Map());
    const clockless: WriteUnit = { op: 'execute', guid: 'a', command: { type: 'Submit', request: '{"guid":"a"}', fingerprint: 'a', timeoutMs: 1, maxAttempts: 3 } };
    expect(() => run([clockless], io)).toThrow(/no clock/);
    const [a] = run([clockless], { ...io, read: (guids, clock) => ({ ...io.read(guids, clock), ...(clock ? { now: 777 } : {}) }) });
    expect(a).toMatchObject({ ok: true, value: { kind: 'applied', state: { createdAt: 777 } } });
  });
});
