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
    expect(w.recent()).toEqual({ windowSeconds: 3, perCode: { '0000': 2, E901: 1 } });
    now += 2000; // the first second is now 3 s old: out of a 3 s window, and its slot is the one this second uses
    expect(w.recent().perCode).toEqual({ E901: 1 });
    w.record('E400');
    expect(w.recent().perCode).toEqual({ E901: 1, E400: 1 });
    now += 60_000;
    expect(w.recent().perCode).toEqual({});
  });
});
