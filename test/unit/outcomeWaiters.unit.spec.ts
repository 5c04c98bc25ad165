import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import type { EventStore, LedgerQuery } from '../../src/events/store.js';
import type { LedgerState } from '../../src/events/state.js';
import { foldEvents } from '../../src/events/evolve.js';
import { createOutcomeWaiters, watchOutcomes } from '../../src/relay/outcomeWaiters.js';
import { fittingWait, preferredWait } from '../../src/contract/preferWait.js';
import { createClient } from '../../src/client/index.js';
import { ev, GUID } from '../support/given.js';

const sent = foldEvents(GUID, [ev.claimed(), ev.sent()]);
const done = foldEvents(GUID, [ev.claimed(), ev.sent(), ev.answered()]);
/** A ledger whose one row the test sets. */
const ledgerOf = (initial: LedgerState | null) => {
  let row = initial;
  let reads = 0;
  return {
    set: (s: LedgerState | null) => void (row = s),
    reads: () => reads,
    store: {
      getLedger: async () => (reads++, E.right(row)),
      // As a store answers `{ guids, statuses }`: the one row, if it is among them and in one of the statuses.
      queryLedger: async (q: LedgerQuery) => (reads++, E.right(row !== null && (q.guids ?? []).includes(row.guid) && (q.statuses ?? []).includes(row.status) ? [row] : [])),
    },
  };
};

describe('Prefer: wait=N (RFC 7240), as the relay reads it', () => {
  it.each([
    ['wait=5', 5],
    ['WAIT=5', 5],
    [' wait = 30 ', 30],
    ['wait="7"', 7],
    ['respond-async, wait=10', 10],
    ['handling=lenient; x=1, wait=3; foo=bar', 3],
    ['wait=1', 1],
    ['wait=05', 5],
    [['respond-async', 'wait=2'], 2],
    ['x="a,wait=9", wait=4', 4],
  ] as const)('%j → %s seconds', (header, seconds) => {
    expect(preferredWait(header)).toBe(seconds);
  });
  it.each([undefined, '', 'respond-async', 'wait', 'wait=', 'wait=0', 'wait=31', 'wait=-1', 'wait=1.5', 'wait=1e1', 'wait=abc', 'wait=9999999', 'wait=0x5'])('%j → none (ignored)', (header) => {
    expect(preferredWait(header)).toBeNull();
  });
  it('of two waits the first counts, even when it is not taken', () => {
    expect(preferredWait('wait=40, wait=5')).toBeNull();
    expect(preferredWait('wait=5, wait=40')).toBe(5);
  });
});

describe('the waiting room', () => {
  it('a write of this process that settles the row wakes its waiters at once', async () => {
    const ledger = ledgerOf(sent);
    const waiters = createOutcomeWaiters({ store: ledger.store, maxWaiters: 10, pollMs: 60_000 });
    const slot = waiters.enter(GUID)!;
    const end = slot.wait(10_000);
    ledger.set(done);
    waiters.settled(GUID);
    expect(await end).toBe('settled');
    slot.leave();
    expect(waiters.waiting).toBe(0);
  });

  it('an outcome recorded by another process is read by the poll, all waited GUIDs each tick', async () => {
    const ledger = ledgerOf(sent);
    const waiters = createOutcomeWaiters({ store: ledger.store, maxWaiters: 10, pollMs: 20 });
    const end = waiters.enter(GUID)!.wait(10_000);
    await new Promise((r) => setTimeout(r, 70));
    expect(ledger.reads()).toBeGreaterThanOrEqual(2);
    ledger.set(done);
    expect(await end).toBe('settled');
    // No one waits: no more reads.
    const after = ledger.reads();
    await new Promise((r) => setTimeout(r, 70));
    expect(ledger.reads()).toBe(after);
  });

  it('an outcome recorded just before the wait began is seen at its start', async () => {
    const waiters = createOutcomeWaiters({ store: ledgerOf(done).store, maxWaiters: 10, pollMs: 60_000 });
    expect(await waiters.enter(GUID)!.wait(10_000)).toBe('settled');
  });

  it('runs out after its time; a channel that leaves is let go', async () => {
    const waiters = createOutcomeWaiters({ store: ledgerOf(sent).store, maxWaiters: 10, pollMs: 60_000 });
    expect(await waiters.enter(GUID)!.wait(30)).toBe('timeout');
    const gone = new AbortController();
    const end = waiters.enter(GUID)!.wait(10_000, gone.signal);
    gone.abort();
    expect(await end).toBe('released');
  });

  it('holds --max-waiters places at most; a place given back is free again; shutdown lets every waiter go and refuses more', async () => {
    const waiters = createOutcomeWaiters({ store: ledgerOf(sent).store, maxWaiters: 2, pollMs: 60_000 });
    const one = waiters.enter(GUID)!;
    const two = waiters.enter('G-2')!;
    expect(waiters.enter('G-3')).toBeNull();
    two.leave();
    two.leave();
    expect(waiters.waiting).toBe(1);
    const waiting = one.wait(10_000);
    waiters.close();
    expect(await waiting).toBe('released');
    expect(waiters.enter('G-4')).toBeNull();
    expect(createOutcomeWaiters({ store: ledgerOf(sent).store, maxWaiters: 0 }).enter(GUID)).toBeNull();
  });

  it('watchOutcomes tells the waiters of a write that left the row settled, not of one that left it in progress', async () => {
    const told: string[] = [];
    let next = sent as LedgerState | null;
    const store = { execute: async () => E.right({ kind: 'applied', state: next, events: [] }), appendEvents: async () => E.right({ won: true, state: next, events: [] }) } as unknown as EventStore;
    const watched = watchOutcomes(store, { settled: (g) => told.push(g) });
    await watched.execute(GUID, { type: 'Submit' } as never);
    expect(told).toEqual([]);
    next = done;
    await watched.execute(GUID, { type: 'RecordAnswer' } as never);
    await watched.appendEvents(GUID, 1, []);
    expect(told).toEqual([GUID, GUID]);
  });
});

describe("the client's wait: what fits one attempt", () => {
  it.each([
    [5_000, 30, 4],
    [1_999, 30, null],
    [2_000, 30, 1],
    [60_000, 30, 30],
    [60_000, 7, 7],
    [3_500, 7, 2],
  ] as const)('an attempt of %s ms, at most %s s → %s', (attemptMs, most, seconds) => {
    expect(fittingWait(attemptMs, most)).toBe(seconds);
  });
  it('refuses a wait the relay would ignore', () => {
    for (const wait of [0, 31, 1.5]) expect(() => createClient({ baseUrl: 'http://127.0.0.1:1', timeout: 5000, maxWait: 5000, wait })).toThrow(/wait must be whole seconds from 1 to 30/);
  });
});
