import { SHOWN_CHARS, SHOWN_DEPTH, nestedMarker, truncatedMarker } from './shownLimits.js';

export interface IndentLimits {
  /** Levels shown; a value opening a deeper one is shown as `…(nested N levels deeper)`. */
  readonly maxDepth: number;
  /** Characters of output; past them the rest is `…(truncated, N bytes more)`. */
  readonly maxChars: number;
}

const SHOWN: IndentLimits = { maxDepth: SHOWN_DEPTH, maxChars: SHOWN_CHARS };

const isSpace = (c: string | undefined): boolean => c === ' ' || c === '\t' || c === '\n' || c === '\r';

/**
 * The end (index of its closing bracket) and the levels of nesting of the array or object opening at `start` in
 * `text` (JSON), itself included.
 */
function skipValue(text: string, start: number): { end: number; levels: number } {
  let depth = 0;
  let levels = 0;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if (c === '{' || c === '[') {
      levels = Math.max(levels, ++depth);
    } else if ((c === '}' || c === ']') && --depth === 0) {
      return { end: i, levels };
    }
  }
  return { end: text.length - 1, levels }; // not reached for JSON
}

/**
 * `text` (JSON) re-indented for a human, from its own characters: numbers, escapes and key order stay exactly as
 * stored (JSON.parse would round `12345678901234567890` and keep only the last of two equal keys, and an auditor
 * must see what was sent). Bounded by `limits` (see shownLimits.ts), so that no stored value, however deep or
 * long, makes a view fail or flood the terminal. Null when `text` is not JSON.
 */
export function indentJson(text: string, indent = '  ', limits: IndentLimits = SHOWN): string | null {
  try {
    JSON.parse(text);
  } catch {
    return null;
  }
  let out = '';
  let depth = 0;
  let inString = false;
  let escaped = false;
  const newline = () => `\n${indent.repeat(depth)}`;
  for (let i = 0; i < text.length; i++) {
    if (out.length >= limits.maxChars) {
      return `${out}\n${truncatedMarker(Buffer.byteLength(text.slice(i), 'utf8'))}`;
    }
    const c = text[i]!;
    if (inString) {
      out += c;
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
      continue;
    }
    switch (c) {
      case '"':
        inString = true;
        out += c;
        break;
      case ' ':
      case '\t':
      case '\n':
      case '\r':
        break;
      case '{':
      case '[': {
        const close = c === '{' ? '}' : ']';
        let next = i + 1;
        while (isSpace(text[next])) next++;
        if (text[next] === close) {
          out += c + close;
          i = next;
        } else if (depth >= limits.maxDepth) {
          const skipped = skipValue(text, i);
          out += nestedMarker(skipped.levels);
          i = skipped.end;
        } else {
          depth++;
          out += c + newline();
        }
        break;
      }
      case '}':
      case ']':
        depth--;
        out += newline() + c;
        break;
      case ',':
        out += `,${newline()}`;
        break;
      case ':':
        out += ': ';
        break;
      default:
        out += c;
    }
  }
  return out;
}
