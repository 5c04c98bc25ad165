/**
 * `text` (JSON) re-indented for a human, from its own characters: numbers, escapes and key order stay exactly as
 * stored (JSON.parse would round `12345678901234567890` and keep only the last of two equal keys, and an auditor
 * must see what was sent). Null when `text` is not JSON.
 */
export function indentJson(text: string, indent = '  '): string | null {
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
        const next = i + 1 + text.slice(i + 1).search(/[^ \t\n\r]/);
        if (text[next] === close) {
          out += c + close;
          i = next;
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
