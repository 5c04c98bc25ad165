/**
 * How much of a stored JSON value (a channel's request, an account system's answer) a view shows. A request may
 * nest 30,000 levels deep inside 64 KiB (`[[[[…`): JSON.parse copes, but JSON.stringify and every recursive walk
 * overflow the stack at about 10,000 levels, and an indented print of 6,000 levels is 72 MB. Past these limits a
 * view shows a marker saying what it left out; the stored bytes are untouched (`history --json` gives them all).
 */

/** Levels of nesting shown; a value nested deeper is shown as `nestedMarker`. */
export const SHOWN_DEPTH = 32;

/** Characters of indented text shown per value (`history`); the rest is summed up by `truncatedMarker`. */
export const SHOWN_CHARS = 64 * 1024;

/** What stands for a value that opens `levels` more levels of nesting than are shown. */
export const nestedMarker = (levels: number): string => `…(nested ${levels} level${levels === 1 ? '' : 's'} deeper)`;

/** What ends a text cut short, `bytes` UTF-8 bytes of the stored value not shown. */
export const truncatedMarker = (bytes: number): string => `…(truncated, ${bytes} bytes more)`;

/** How many levels of arrays and objects `value` opens, itself included (0 for a scalar); without recursion. */
export function nestingOf(value: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [v, level] = top;
    if (v === null || typeof v !== 'object') continue;
    deepest = Math.max(deepest, level + 1);
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, level + 1]);
  }
  return deepest;
}
