import { describe, it, expect } from 'vitest';
import { createReplyWindow } from '../../src/telemetry/replyWindow.js';

describe('replies per code over the last minutes (GET /v1/stats)', () => {
  it('counts per code within the window; a second leaves it once the window has passed, its slot reused cleanly', () => {
    let now = 1_000_000;
    const w = createReplyWindow(() => now, 3);
    w.record('0000');
    w.record('0000');
    now += 1000;
    w.record('E901');
    expect(w.recent()).toMatchObject({ windowSeconds: 3, perCode: { '0000': 2, E901: 1 } });
    now += 2000; // the first second is now 3 s old: out of a 3 s window, and its slot is the one this second uses
    expect(w.recent().perCode).toEqual({ E901: 1 });
    w.record('E400');
    expect(w.recent().perCode).toEqual({ E901: 1, E400: 1 });
    now += 60_000;
    expect(w.recent().perCode).toEqual({});
  });

  it('counts per code in each of the last 60 clock minutes, oldest first, the minute in progress last', () => {
    let now = 60_000 * 1_000 + 30_000; // half past the start of a minute
    const w = createReplyWindow(() => now);
    w.record('0000');
    w.record('E901');
    now += 60_000;
    w.record('0000');
    let perMinute = w.recent().perMinute;
    expect(perMinute).toHaveLength(60);
    expect(perMinute.slice(-2)).toEqual([{ '0000': 1, E901: 1 }, { '0000': 1 }]);
    expect(perMinute.slice(0, -2).every((m) => Object.keys(m).length === 0)).toBe(true);
    // 59 minutes later the first minute is the oldest shown; one more and it is gone, its slot reused cleanly.
    now += 58 * 60_000;
    expect(w.recent().perMinute[0]).toEqual({ '0000': 1, E901: 1 });
    now += 60_000;
    w.record('E902');
    perMinute = w.recent().perMinute;
    expect(perMinute[0]).toEqual({ '0000': 1 });
    expect(perMinute[59]).toEqual({ E902: 1 });
    expect(perMinute.reduce((n, m) => n + Object.values(m).reduce((a, b) => a + b, 0), 0)).toBe(2);
  });
});
