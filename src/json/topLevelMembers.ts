/** One member of a JSON object's top level, as written. */
export interface TopLevelMember {
  /** The key decoded (`"gu\u0069d"` is `guid`), so that escapes cannot spell a key past a check. */
  readonly key: string;
  /** The value's raw text, without the whitespace around it: JSON.parse loses how a number was spelled. */
  readonly raw: string;
}

/**
 * The top-level members of `text`, in order, duplicates included. `text` must be JSON that JSON.parse has
 * accepted; anything but an object gives []. JSON.parse keeps the last of duplicate keys and forgets how a
 * value was written, while another parser (the account system's) may keep the first: checks that must agree
 * with every parser look at these members. Hand-written because it only needs the top level, so it can skip
 * every nested value unparsed.
 */
export function topLevelMembers(text: string): TopLevelMember[] {
  const members: TopLevelMember[] = [];
  const start = text.search(/\S/);
  if (start < 0 || text.charCodeAt(start) !== 0x7b) return members;
  let depth = 0;
  let expectKey = false;
  let key: string | null = null;
  let valueStart = -1;
  const close = (end: number): void => {
    if (key !== null) members.push({ key, raw: text.slice(valueStart, end).trim() });
    key = null;
  };
  // Most texts hold no backslash at all: then a string ends at the next quote, found by indexOf, not char by char.
  const escapes = text.includes('\\');
  for (let i = start; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let j = i + 1;
      let escaped = false;
      if (!escapes) {
        j = text.indexOf('"', j);
        if (j < 0) break; // not JSON: cannot happen for a text JSON.parse accepted
      } else {
        for (let d = text.charCodeAt(j); d !== 0x22; d = text.charCodeAt(j)) {
          if (d === 0x5c) {
            escaped = true;
            j += 2;
          } else j++;
        }
      }
      if (depth === 1 && expectKey) {
        expectKey = false;
        // Only a key with an escape needs decoding; most have none, and a slice is far cheaper than a parse.
        key = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j);
        valueStart = text.indexOf(':', j + 1) + 1;
      }
      i = j;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth === 1) expectKey = true;
    } else if (c === 0x7d || c === 0x5d) {
      if (depth === 1) close(i);
      depth--;
    } else if (c === 0x2c && depth === 1) {
      close(i);
      expectKey = true;
    }
  }
  return members;
}
