import { describe, expect, it } from 'vitest';
import { indentJson } from '../../src/json/indentJson.js';
import { SHOWN_CHARS, SHOWN_DEPTH, nestingOf } from '../../src/json/shownLimits.js';
import { timelineView } from '../../src/relay/operator/timeline.js';
import { maskAccountsIn } from '../../src/shared/maskAccount.js';

/** `{"x":[[…]]}` with `arrays` arrays around `inner`: `arrays + 1` levels in all. */
const deep = (arrays: number, inner = ''): string => `{"from":"6222021001","x":${'['.repeat(arrays)}${inner}${']'.repeat(arrays)}}`;
/** `levels` nested one-element arrays around `inner`, as a parsed value. */
const nested = (levels: number, inner: unknown = 1): unknown => {
  let v = inner;
  for (let i = 0; i < levels; i++) v = [v];
  return v;
};

describe('indentJson: bounded, whatever is stored (#24)', () => {
  it('a request nested 30,000 levels deep: 32 levels shown, the rest a marker; no throw', () => {
    const text = indentJson(deep(30_000));
    expect(text).not.toBeNull();
    expect(text!.length).toBeLessThan(4 * 1024);
    expect(text).toContain(`…(nested ${30_001 - SHOWN_DEPTH} levels deeper)`);
    expect(text!.split('[').length - 1).toBe(SHOWN_DEPTH - 1); // the object and 31 arrays
  });

  it('exactly 32 levels are shown whole; of 33, the last is cut', () => {
    expect(indentJson(deep(SHOWN_DEPTH - 1, '1'))).not.toContain('nested');
    expect(indentJson(deep(SHOWN_DEPTH, '1'))).toContain('…(nested 1 level deeper)');
    expect(indentJson(deep(SHOWN_DEPTH + 1, '1'))).toContain('…(nested 2 levels deeper)');
    // An empty array or object at the limit is shown as it is: nothing is left out.
    expect(indentJson(deep(SHOWN_DEPTH))).not.toContain('nested');
    expect(indentJson(deep(SHOWN_DEPTH - 1, '{}'))).not.toContain('nested');
  });

  it('the value left out is skipped whole: strings with brackets inside it, and what follows it, are right', () => {
    const inner = `${'['.repeat(SHOWN_DEPTH)}"]]]\\"[[",{"a":"}"}${']'.repeat(SHOWN_DEPTH)}`;
    const text = indentJson(`{"x":${inner},"after":"ok"}`)!;
    expect(text).toContain('…(nested 2 levels deeper)');
    expect(text).toMatch(/\n {2}"after": "ok"\n\}$/);
  });

  it('a long value is cut at 64 KiB of text, saying how many bytes are left out', () => {
    const stored = JSON.stringify({ memo: 'é'.repeat(200_000) });
    const text = indentJson(stored)!;
    expect(text.length).toBeLessThan(SHOWN_CHARS + 100);
    const marker = /…\(truncated, (\d+) bytes more\)$/.exec(text);
    expect(marker).not.toBeNull();
    const shownChars = text.length - marker![0].length - 1;
    // Shown: `{`, newline, indent, `"memo": "`, then é's; the rest of the stored text (é is 2 bytes) is counted.
    const shownEs = shownChars - '{\n  "memo": "'.length;
    expect(Number(marker![1])).toBe((200_000 - shownEs) * 2 + '"}'.length);
  });

  it('what fits is shown whole', () => {
    expect(indentJson('{"a":[1,2]}')).toBe('{\n  "a": [\n    1,\n    2\n  ]\n}');
  });
});

describe('maskAccountsIn: every view masks and bounds the same way', () => {
  it('a value nested 30,000 levels deep: masked where shown, cut at 32 levels, serialisable', () => {
    const value = { from: '6222021001', x: nested(30_000) };
    expect(() => JSON.stringify(value)).toThrow(RangeError); // what the view would do without the bound
    const shown = maskAccountsIn(value) as { from: string; x: unknown };
    expect(shown.from).toBe('******1001');
    expect(() => JSON.stringify(shown)).not.toThrow();
    let v: unknown = shown.x;
    for (let level = 2; level <= SHOWN_DEPTH; level++) v = (v as unknown[])[0];
    expect(v).toBe(`…(nested ${30_001 - SHOWN_DEPTH} levels deeper)`);
  });

  it('an account key below the cut is never shown at all', () => {
    const shown = JSON.stringify(maskAccountsIn(nested(40, { to: '6222021002' })));
    expect(shown).not.toContain('6222021002');
    expect(shown).toContain('…(nested 9 levels deeper)');
  });

  it('nestingOf counts levels without recursion', () => {
    expect([nestingOf(1), nestingOf([]), nestingOf({ a: [1, { b: 2 }] }), nestingOf(nested(100_000))]).toEqual([0, 1, 3, 100_000]);
  });
});

describe('timelineView of a deep request', () => {
  it('parses it, masks it, bounds it once (not again for the event around it)', () => {
    const request = deep(30_000);
    const view = timelineView({ kind: 'event', seq: 0, type: 'Claimed', at: 1, data: { request, fingerprint: 'f' }, actor: null });
    if (view.kind !== 'event') throw new Error('unreachable');
    const shown = (view.data as { request: { from: string; x: unknown } }).request;
    expect(shown.from).toBe('******1001');
    let v: unknown = shown.x;
    for (let level = 2; level <= SHOWN_DEPTH; level++) v = (v as unknown[])[0];
    expect(v).toBe(`…(nested ${30_001 - SHOWN_DEPTH} levels deeper)`);
    expect(JSON.stringify(view)).not.toContain('6222021001');
  });
});
