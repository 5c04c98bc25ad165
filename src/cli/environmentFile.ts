/**
 * The format of systemd's `EnvironmentFile=` (systemd.exec(5)), read the way systemd reads it (src/basic/env-file.c),
 * so that the unit and the operator's cron lines mean the same by one file (CONTRACT.md §5, `--config`):
 *
 * - blank lines, and lines whose first non-blank character is `#` or `;`, are comments;
 * - `NAME=value`, blanks around the name and around an unquoted value dropped, interior blanks kept;
 * - unquoted: `\` keeps the next character as it is (`\\` is `\`), `\` at the end of a line joins the next one;
 *   quotes after the value's first character are plain characters;
 * - `'…'`: everything up to the next `'` as it is, newlines included, no escapes;
 * - `"…"`: up to the next `"`, newlines included; `\` before one of `"` `\` `` ` `` `$` keeps that character, before a
 *   newline joins the lines, before anything else stays with it;
 * - after a closing quote, blanks are dropped and what follows is added to the value (`A="x" 'y'` is `xy`), as
 *   systemd does.
 *
 * Where systemd ignores a line quietly, this refuses it, since a file that says less than its author meant is the
 * typo `--config` must catch: a line with no `=`, a name that is no variable name (systemd drops it), a comment ending
 * in `\` (systemd before v254 makes the next line part of the comment, later versions do not), and what systemd
 * does not take in the file at all (invalid UTF-8, NUL, a byte order mark).
 */

export interface Assignment {
  readonly name: string;
  readonly value: string;
  /** The line the name starts on (1-based). */
  readonly line: number;
}

export interface EnvironmentFileProblem {
  readonly line: number;
  readonly problem: string;
}

export type ParsedEnvironmentFile =
  | { readonly ok: true; readonly assignments: readonly Assignment[] }
  | { readonly ok: false; readonly problem: EnvironmentFileProblem };

const BLANK = new Set([' ', '\t', '\r', '\n']);
const NEWLINE = new Set(['\n', '\r']);
const ESCAPED_IN_DOUBLE_QUOTES = new Set(['"', '\\', '`', '$']);
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const COMMENT_ENDING_IN_BACKSLASH = 'a comment ending in \\: systemd before v254 reads the next line as part of the comment, later versions do not; end the comment otherwise';

/** The first character systemd does not take in an environment file (NUL, U+FEFF, a noncharacter) and its line, or null. */
function forbiddenCharacter(text: string): EnvironmentFileProblem | null {
  const at = text.search(/[\u0000\ufeff\ufdd0-\ufdef\ufffe\uffff]|[\ud83f\ud87f\ud8bf\ud8ff\ud93f\ud97f\ud9bf\ud9ff\uda3f\uda7f\udabf\udaff\udb3f\udb7f\udbbf\udbff][\udffe\udfff]/);
  if (at < 0) return null;
  const what = text[at] === '\u0000' ? 'a NUL byte' : text[at] === '\ufeff' ? 'a byte order mark (U+FEFF)' : 'a Unicode noncharacter';
  return { line: lineOf(text, at), problem: `${what}: systemd does not take it in an environment file` };
}

/** The 1-based line of `index`: `\n`, `\r\n` and a lone `\r` each end a line. */
function lineOf(text: string, index: number): number {
  let line = 1;
  for (let i = 0; i < index; i++) if (text[i] === '\n' || (text[i] === '\r' && text[i + 1] !== '\n')) line++;
  return line;
}

/** The file's bytes as text, or the line of the first byte that is not UTF-8. */
export function decodeEnvironmentFile(bytes: Uint8Array): { readonly ok: true; readonly text: string } | { readonly ok: false; readonly problem: EnvironmentFileProblem } {
  try {
    return { ok: true, text: new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes) };
  } catch {
    // Decode line by line to say which one holds the bad byte.
    let line = 1;
    let start = 0;
    for (let i = 0; i <= bytes.length; i++) {
      if (i < bytes.length && bytes[i] !== 0x0a) continue;
      try {
        new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(start, i));
      } catch {
        return { ok: false, problem: { line, problem: 'not UTF-8 (systemd reads environment files as UTF-8)' } };
      }
      line++;
      start = i + 1;
    }
    return { ok: false, problem: { line: 1, problem: 'not UTF-8 (systemd reads environment files as UTF-8)' } };
  }
}

type State = 'pre-key' | 'key' | 'pre-value' | 'value' | 'value-escape' | 'single' | 'double' | 'double-escape' | 'comment';

/** The assignments of an environment file's text, in order (a name given twice: the later one counts, as for systemd). */
export function parseEnvironmentFile(text: string): ParsedEnvironmentFile {
  const forbidden = forbiddenCharacter(text);
  if (forbidden !== null) return { ok: false, problem: forbidden };
  const assignments: Assignment[] = [];
  let state: State = 'pre-key';
  let line = 1;
  let keyLine = 1;
  let key = '';
  let keyEnd = -1; // where the key's trailing blanks start, -1: none
  let value = '';
  let valueEnd = -1; // where the unquoted value's trailing blanks start, -1: none
  let commentStart = 0;

  const push = (): EnvironmentFileProblem | null => {
    const name = keyEnd < 0 ? key : key.slice(0, keyEnd);
    if (!VARIABLE_NAME.test(name)) return { line: keyLine, problem: `'${name}' is not a variable name (letters, digits and _, not starting with a digit)` };
    assignments.push({ name, value, line: keyLine });
    key = '';
    keyEnd = -1;
    value = '';
    return null;
  };

  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    const endsLine = c === '\n' || (c === '\r' && text[i + 1] !== '\n');
    switch (state) {
      case 'pre-key':
        if (c === '#' || c === ';') {
          state = 'comment';
          commentStart = i;
        } else if (!BLANK.has(c)) {
          state = 'key';
          key = c;
          keyEnd = -1;
          keyLine = line;
        }
        break;
      case 'key':
        if (NEWLINE.has(c)) return { ok: false, problem: { line: keyLine, problem: "not NAME=value (no '=')" } };
        if (c === '=') {
          state = 'pre-value';
          valueEnd = -1;
        } else {
          if (!BLANK.has(c)) keyEnd = -1;
          else if (keyEnd < 0) keyEnd = key.length;
          key += c;
        }
        break;
      case 'pre-value':
        if (NEWLINE.has(c)) {
          const problem = push();
          if (problem !== null) return { ok: false, problem };
          state = 'pre-key';
        } else if (c === "'") state = 'single';
        else if (c === '"') state = 'double';
        else if (c === '\\') state = 'value-escape';
        else if (!BLANK.has(c)) {
          state = 'value';
          value += c;
        }
        break;
      case 'value':
        if (NEWLINE.has(c)) {
          if (valueEnd >= 0) value = value.slice(0, valueEnd);
          const problem = push();
          if (problem !== null) return { ok: false, problem };
          state = 'pre-key';
        } else if (c === '\\') {
          state = 'value-escape';
          valueEnd = -1;
        } else {
          if (!BLANK.has(c)) valueEnd = -1;
          else if (valueEnd < 0) valueEnd = value.length;
          value += c;
        }
        break;
      case 'value-escape':
        state = 'value';
        if (!NEWLINE.has(c)) value += c;
        break;
      case 'single':
        if (c === "'") state = 'pre-value';
        else value += c;
        break;
      case 'double':
        if (c === '"') state = 'pre-value';
        else if (c === '\\') state = 'double-escape';
        else value += c;
        break;
      case 'double-escape':
        state = 'double';
        if (ESCAPED_IN_DOUBLE_QUOTES.has(c)) value += c;
        else if (c !== '\n') value += `\\${c}`;
        break;
      case 'comment':
        if (NEWLINE.has(c)) {
          if (text[i - 1] === '\\' && i - 1 > commentStart) {
            return { ok: false, problem: { line, problem: COMMENT_ENDING_IN_BACKSLASH } };
          }
          state = 'pre-key';
        }
        break;
    }
    if (endsLine) line++;
  }
  // The end of the file ends a value as a newline does; an unclosed quote ends there too, as for systemd.
  if (state === 'key') return { ok: false, problem: { line: keyLine, problem: "not NAME=value (no '=')" } };
  if (state === 'comment' && text.endsWith('\\') && text.length - 1 > commentStart) {
    return { ok: false, problem: { line, problem: COMMENT_ENDING_IN_BACKSLASH } };
  }
  if (state !== 'pre-key' && state !== 'comment') {
    if (state === 'value' && valueEnd >= 0) value = value.slice(0, valueEnd);
    const problem = push();
    if (problem !== null) return { ok: false, problem };
  }
  return { ok: true, assignments };
}
