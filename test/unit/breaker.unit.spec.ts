import { describe, it, expect } from 'vitest';
import { createBreaker } from '../../src/relay/breaker.js';

describe('breaker (CONTRACT.md §7)', () => {
  const setup = (failures = 3, cooldownMs = 1000) => {
    let now = 0;
    const seen = { trips: 0, open: [] as boolean[] };
    const breaker = createBreaker({ failures, cooldownMs, clock: () => now, metrics: { breaker: (o) => seen.open.push(o), breakerTripped: () => seen.trips++ } });
    const call = (outcome: 'definite' | 'unknown' | 'failed') => {
      const p = breaker.permit();
      if (p !== null) p.done(outcome);
      return p !== null;
    };
    return { breaker, call, seen, advance: (ms: number) => (now += ms) };
  };

  it('opens after N failures or unknowns in a row; a definite answer in between resets the count', () => {
    const { breaker, call, seen } = setup(3);
    expect([call('failed'), call('unknown'), call('definite'), call('failed'), call('unknown')]).toEqual([true, true, true, true, true]);
    expect(breaker.isOpen()).toBe(false);
    expect(call('failed')).toBe(true);
    expect(breaker.isOpen()).toBe(true);
    expect(breaker.permit()).toBeNull();
    expect(seen).toEqual({ trips: 1, open: [true] });
  });

  it('after the cooldown one trial call only; a definite answer closes it, a failure re-opens it', () => {
    const { breaker, call, seen, advance } = setup(2, 1000);
    call('failed');
    call('failed');
    advance(999);
    expect(breaker.permit()).toBeNull();
    advance(1);
    const trial = breaker.permit();
    expect(trial).not.toBeNull();
    expect(breaker.permit()).toBeNull(); // the trial is in flight: nobody else
    trial!.done('unknown');
    expect(breaker.isOpen()).toBe(true);
    expect(breaker.permit()).toBeNull();
    advance(1000);
    breaker.permit()!.done('definite');
    expect(breaker.isOpen()).toBe(false);
    expect(seen).toEqual({ trips: 2, open: [true, true, false] });
  });

  it('a trial that made no call gives its place back; calls in flight when it opened do not close it', () => {
    const { breaker, advance } = setup(1, 10);
    const early = breaker.permit()!;
    breaker.permit()!.done('failed');
    early.done('definite');
    expect(breaker.isOpen()).toBe(true);
    advance(10);
    breaker.permit()!.done(null);
    expect(breaker.permit()).not.toBeNull();
  });

  it('0 turns it off', () => {
    const { breaker, call } = setup(0);
    for (let i = 0; i < 100; i++) expect(call('failed')).toBe(true);
    expect(breaker.isOpen()).toBe(false);
  });

  it('tells its state for the operator API: failures in a row while closed, when the trial comes while open, off at 0', () => {
    const { breaker, call, advance } = setup(2, 1000);
    call('failed');
    expect(breaker.view()).toEqual({ state: 'closed', failuresInRow: 1, failuresToOpen: 2, cooldownMs: 1000 });
    advance(10);
    call('unknown');
    expect(breaker.view()).toEqual({ state: 'open', trialAt: 1010, failuresToOpen: 2, cooldownMs: 1000 });
    expect(createBreaker({ failures: 0, cooldownMs: 1000, clock: () => 0 }).view()).toEqual({ state: 'off' });
  });
});
