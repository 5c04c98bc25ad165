/**
 * The config file's format is systemd's EnvironmentFile= (CONTRACT.md §5): each case is what systemd's parser
 * (src/basic/env-file.c, v254 and later) makes of the text, as systemd.exec(5) describes it; where systemd skips a
 * line quietly, guidgate refuses it, naming the line.
 */
import { describe, expect, it } from 'vitest';
import { decodeEnvironmentFile, parseEnvironmentFile } from '../../src/cli/environmentFile.js';

const values = (text: string): Record<string, string> => {
  const parsed = parseEnvironmentFile(text);
  if (!parsed.ok) throw new Error(`line ${parsed.problem.line}: ${parsed.problem.problem}`);
  return Object.fromEntries(parsed.assignments.map((a) => [a.name, a.value]));
};
const problem = (text: string) => {
  const parsed = parseEnvironmentFile(text);
  return parsed.ok ? null : parsed.problem;
};

describe('the config file as systemd reads an EnvironmentFile', () => {
  it.each([
    ['plain', 'A=a\n', { A: 'a' }],
    ['no newline at the end', 'A=a', { A: 'a' }],
    ['blanks around the name and the unquoted value dropped, interior kept', '  A  =  x  y \t\n', { A: 'x  y' }],
    ['empty values', 'A=\nB=', { A: '', B: '' }],
    ['# and ; comments, blank lines', '# one\n\n  ; two\nA=1\n', { A: '1' }],
    ['a # after a value is part of it', 'A=/x # not a comment\n', { A: '/x # not a comment' }],
    ['quotes after the first character are kept', 'A=it\'s "x"\n', { A: 'it\'s "x"' }],
    ['unquoted: a backslash keeps the next character', 'A=a\\\\b\\ \\#\n', { A: 'a\\b #' }],
    ['unquoted: an escaped blank at the end is kept', 'A=g\\ \n', { A: 'g ' }],
    ['unquoted: a backslash at the end of a line joins the next', 'A=b\\\nc\nD=d\\\ne\\\nf\n', { A: 'bc', D: 'def' }],
    ['a backslash at the very end', 'A=i\\', { A: 'i' }],
    ["single quotes: verbatim, no escapes, across lines", "A='x \\\" $y\n  z'\n", { A: 'x \\" $y\n  z' }],
    ['double quotes: \\ before " \\ ` $ keeps it, before anything else stays', 'A="a\\"b\\\\c\\`d\\$e\\nf"\n', { A: 'a"b\\c`d$e\\nf' }],
    ['double quotes: a backslash-newline joins, a newline is kept', 'A="x\\\ny\nz"\n', { A: 'xy\nz' }],
    ['blanks outside the quotes dropped', 'A=  "  x  "  \n', { A: '  x  ' }],
    ['after a closing quote the value goes on (systemd joins the parts)', 'A="x" \'y\' z\n', { A: 'xyz' }],
    ['an unclosed quote ends with the file', 'A="x\ny', { A: 'x\ny' }],
    ['CRLF line ends', 'A=1\r\nB=2\r\n', { A: '1', B: '2' }],
    ['the later of two lines for one name', 'A=1\nA=2\n', { A: '2' }],
    ['a comment whose backslash is not at its end', '# a \\ b\nA=1\n', { A: '1' }],
  ])('%s', (_what, text, expected) => {
    expect(values(text)).toEqual(expected);
  });

  it('each assignment keeps the line its name starts on', () => {
    const parsed = parseEnvironmentFile('# c\n\nA="multi\nline"\nB=2\n');
    expect(parsed.ok && parsed.assignments.map((a) => [a.name, a.line])).toEqual([['A', 3], ['B', 5]]);
  });

  it.each([
    ['a line without =', 'A=1\nGUIDGATE_DB /x\n', 2, "not NAME=value (no '=')"],
    ['a last line without =', 'A=1\nB', 2, "not NAME=value (no '=')"],
    ['a name that is no variable name', 'A=1\n\nGUIDGATE DB=/x\n', 3, "'GUIDGATE DB' is not a variable name"],
    ['a name starting with a digit', '1A=x\n', 1, "'1A' is not a variable name"],
    ['a comment ending in a backslash (systemd versions disagree on the next line)', '# a \\\nA=1\n', 1, 'a comment ending in \\'],
    ['a NUL', 'A=1\nB=\u0000\n', 2, 'a NUL byte'],
    ['a byte order mark', '\ufeffA=1\n', 1, 'a byte order mark'],
    ['a noncharacter', 'A=1\nB=\ufffe\n', 2, 'a Unicode noncharacter'],
  ])('refused, naming the line: %s', (_what, text, line, words) => {
    expect(problem(text)).toEqual({ line, problem: expect.stringContaining(words) });
  });

  it('bytes that are not UTF-8 are refused naming their line', () => {
    const decoded = decodeEnvironmentFile(Buffer.concat([Buffer.from('A=1\nB=2\nC='), Buffer.from([0xc3, 0x28]), Buffer.from('\n')]));
    expect(decoded).toEqual({ ok: false, problem: { line: 3, problem: expect.stringContaining('not UTF-8') } });
    expect(decodeEnvironmentFile(Buffer.from('A=é\n'))).toEqual({ ok: true, text: 'A=é\n' });
  });
});
