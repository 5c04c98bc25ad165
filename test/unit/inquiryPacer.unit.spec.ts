/**
 * The inquiry budget (CONTRACT.md §7, `--inquiry-rate`) on a clock the test moves: at most `count` inquiries in any
 * period, background work spaced and waiting its turn oldest row first, a channel's request never waiting.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createInquiryPacer, inquiryPacing, parseInquiryRate, type InquiryPacer, type TurnGiven } from '../../src/account/inquiryPacer.js';

describe('the inquiry budget', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const pacer = (text: string, keptForChannels = 0, onDeferred?: () => void): InquiryPacer =>
    createInquiryPacer({ rate: parseInquiryRate(text)!, keptForChannels, onDeferred, now: () => Date.now() });
  /** Starts `n` background turns for rows sent at `sentAt(i)`; records when each goes, in ms since the test began. */
  const background = (p: InquiryPacer, sentAt: number[], started = Date.now()) => {
    const went: Array<{ row: number; at: number }> = [];
    const all = sentAt.map((s, row) => p.turn({ waits: true, rowSentAt: s }).then((g) => (g.go ? went.push({ row, at: Date.now() - started }) : undefined)));
    return { went, all };
  };

  it('reads 50/s, 600/m, 3/h and 0 (no cap); refuses anything else', () => {
    expect(parseInquiryRate('50/s')).toEqual({ count: 50, perMs: 1000 });
    expect(parseInquiryRate(' 600/m ')).toEqual({ count: 600, perMs: 60_000 });
    expect(parseInquiryRate('3/h')).toEqual({ count: 3, perMs: 3_600_000 });
    expect(parseInquiryRate('0')).toBeNull();
    for (const bad of ['', '50', '0/s', '-1/s', '1.5/s', '50/d', '50 /s', 'fast']) expect(parseInquiryRate(bad), bad).toBeUndefined();
    expect(inquiryPacing('0', { forChannels: true })).toBeUndefined();
    expect(inquiryPacing('50/s', { forChannels: true })).toMatchObject({ keptForChannels: 5 });
    expect(inquiryPacing('50/s', { forChannels: false })).toMatchObject({ keptForChannels: 0 });
  });

  it('background work: evenly spaced, never more than the rate in any period, every turn given in the end', async () => {
    const p = pacer('10/s');
    const { went, all } = background(p, Array.from({ length: 35 }, (_, i) => i));
    await vi.advanceTimersByTimeAsync(5000);
    await Promise.all(all);
    expect(went).toHaveLength(35);
    const times = went.map((w) => w.at);
    // Spaced by 100 ms (10/s), the first at once; the 11th once the first is a period and a spacing old, so that a
    // delay on the way cannot bring 11 within one second of each other at the account system.
    expect(times.slice(0, 4)).toEqual([0, 100, 200, 300]);
    expect(times[10]).toBe(1100);
    for (let i = 0; i < times.length; i++) expect(times.filter((t) => t >= times[i]! && t < times[i]! + 1100).length).toBeLessThanOrEqual(10);
    expect(times.at(-1)).toBe(3700);
  });

  it('the oldest row first, whichever asked first', async () => {
    const p = pacer('1/s');
    // Row 0 takes the first turn at once; the others wait and go by their last Sent, oldest first.
    const { went, all } = background(p, [500, 300, 100, 400, 200]);
    await vi.advanceTimersByTimeAsync(10_000);
    await Promise.all(all);
    expect(went.map((w) => w.row)).toEqual([0, 2, 4, 1, 3]);
    // A newer caller with an older row goes before the younger rows already waiting.
    const q = pacer('1/s');
    const first = background(q, [1000, 900, 800]);
    await vi.advanceTimersByTimeAsync(10);
    const late = background(q, [50]);
    await vi.advanceTimersByTimeAsync(10_000);
    await Promise.all([...first.all, ...late.all]);
    // 1/s: one every 2 s (a period and a spacing).
    expect(late.went).toEqual([{ row: 0, at: 1990 }]);
    expect(first.went).toEqual([{ row: 0, at: 0 }, { row: 2, at: 4000 }, { row: 1, at: 6000 }]);
  });

  it("a channel's request never waits: a turn while the period has room, else when it will have one", async () => {
    const deferred = vi.fn();
    const p = pacer('3/s', 0, deferred);
    const channel = (): Promise<TurnGiven> => p.turn({ waits: false });
    expect(await channel()).toEqual({ go: true });
    await vi.advanceTimersByTimeAsync(200);
    expect(await channel()).toEqual({ go: true });
    expect(await channel()).toEqual({ go: true });
    // Full: the first of the three leaves the period 1000 ms after it went, 800 ms from now.
    expect(await channel()).toEqual({ go: false, retryAfterMs: 800 });
    expect(deferred).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(800);
    expect(await channel()).toEqual({ go: true });
  });

  it("background work leaves the channels' share: a storm being settled does not hold every channel's request back", async () => {
    const p = pacer('10/s', 2);
    const { went, all } = background(p, Array.from({ length: 40 }, (_, i) => i));
    const channelTurns: Array<{ at: number; given: TurnGiven }> = [];
    for (let ms = 250; ms <= 3000; ms += 250) {
      await vi.advanceTimersByTimeAsync(250);
      channelTurns.push({ at: ms, given: await p.turn({ waits: false }) });
    }
    p.close();
    await Promise.all(all);
    // Every channel request (4/s) got its turn while the storm was being settled.
    expect(channelTurns.every((c) => c.given.go)).toBe(true);
    // Background work alone: spaced by 125 ms (10 less the 2 kept, a second); never more than 8 a second, and never
    // more than 10 a second with the channels'.
    const bg = went.map((w) => w.at);
    const all2 = [...bg, ...channelTurns.map((c) => c.at)];
    for (const t of all2) {
      expect(bg.filter((u) => u >= t && u < t + 1000).length).toBeLessThanOrEqual(8);
      expect(all2.filter((u) => u >= t && u < t + 1000).length).toBeLessThanOrEqual(10);
    }
    expect(bg.slice(0, 3)).toEqual([0, 125, 250]);
  });

  it('a wait given up (the run stopped) or the client closed ends the turn unasked', async () => {
    const p = pacer('1/s');
    const abort = new AbortController();
    expect(await p.turn({ waits: true, rowSentAt: 1 })).toEqual({ go: true });
    const waiting = p.turn({ waits: true, rowSentAt: 2, signal: abort.signal });
    const other = p.turn({ waits: true, rowSentAt: 3 });
    abort.abort();
    expect(await waiting).toEqual({ go: false, retryAfterMs: 0 });
    // The next in line takes the turn the one that gave up would have had.
    await vi.advanceTimersByTimeAsync(2000);
    expect(await other).toEqual({ go: true });
    const last = p.turn({ waits: true, rowSentAt: 4 });
    p.close();
    expect(await last).toEqual({ go: false, retryAfterMs: 0 });
    expect(await p.turn({ waits: false })).toEqual({ go: false, retryAfterMs: 0 });
  });
});
