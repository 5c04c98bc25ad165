import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, it, expect } from 'vitest';
import { isDefiniteCode } from '../../src/events/codecs.js';
import { REPLY_CODES } from '../../src/contract/codes.js';
import { REPO_ROOT } from '../support/children.js';
import { anchorsOf, githubAnchor, linksOf, sectionOf, tableRows } from '../support/markdown.js';

const read = (path: string): string => readFileSync(path, 'utf8');
const PAGES = [join(REPO_ROOT, 'README.md'), ...readdirSync(join(REPO_ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join(REPO_ROOT, 'docs', f))];

/** Each row of a codes table: the code (backticks off) and the first number of its HTTP cell. */
function codeRows(markdown: string, heading: string): { code: string; http: number | undefined }[] {
  return tableRows(sectionOf(markdown, heading)).map(([code = '', http = '']) => ({
    code: code.replace(/`/g, ''),
    http: /\d{3}/.exec(http) === null ? undefined : Number(/\d{3}/.exec(http)![0]),
  }));
}

describe('the reply codes in docs/channel-api.md and REPLY_CODES say the same', () => {
  const channelApi = read(join(REPO_ROOT, 'docs', 'channel-api.md'));
  const documented = codeRows(channelApi, 'Codes guidgate makes');

  it.each(Object.entries(REPLY_CODES))('documents %s with its HTTP status', (code, { http }) => {
    const rows = documented.filter((r) => r.code === code);
    expect(rows, `docs/channel-api.md, "Codes guidgate makes": ${rows.length} rows for ${code}`).toHaveLength(1);
    expect(rows[0]!.http, `the HTTP status documented for ${code}`).toBe(http);
  });

  it('documents no code guidgate does not make', () => {
    expect(documented.length).toBeGreaterThan(0);
    expect(documented.map((r) => r.code).filter((code) => !Object.hasOwn(REPLY_CODES, code))).toEqual([]);
  });

  it('lists as the account system\'s answers only definite codes, passed on with 200', () => {
    const passedOn = codeRows(channelApi, 'Reply codes');
    expect(passedOn.length).toBeGreaterThan(0);
    for (const { code, http } of passedOn) {
      expect(isDefiniteCode(code.replace(/x/g, '0')), `${code} is not a definite code`).toBe(true);
      expect(http, code).toBe(200);
    }
  });
});

describe('the links between README.md and docs/*.md resolve', () => {
  const anchors = new Map<string, Set<string>>();
  const anchorsIn = (path: string): Set<string> => {
    if (!anchors.has(path)) anchors.set(path, anchorsOf(read(path)));
    return anchors.get(path)!;
  };

  it.each(PAGES.map((p) => [relative(REPO_ROOT, p), p]))('%s', (_name, page) => {
    const broken: string[] = [];
    for (const { target, line } of linksOf(read(page))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      const [path = '', anchor] = target.split('#', 2);
      const file = path === '' ? page : join(dirname(page), decodeURIComponent(path));
      if (!file.startsWith(REPO_ROOT) || !existsSync(file)) broken.push(`line ${line}: ${target}: no such file`);
      else if (anchor !== undefined && (statSync(file).isDirectory() || !anchorsIn(file).has(anchor))) {
        broken.push(`line ${line}: ${target}: no heading with the anchor #${anchor} in ${relative(REPO_ROOT, file)}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('makes anchors as GitHub does', () => {
    expect(githubAnchor('`resolve`: settle UNKNOWN rows by inquiry')).toBe('resolve-settle-unknown-rows-by-inquiry');
    expect(githubAnchor('Sending a transfer: `POST /v1/transfers`')).toBe('sending-a-transfer-post-v1transfers');
    expect(githubAnchor("Testing a channel's resends in its own CI")).toBe('testing-a-channels-resends-in-its-own-ci');
    expect(githubAnchor('On a distributed SQL engine (on paper: not tested)')).toBe('on-a-distributed-sql-engine-on-paper-not-tested');
    expect(githubAnchor('`history`, `ledger`, `stats`, `check`, `rebuild`')).toBe('history-ledger-stats-check-rebuild');
    expect([...anchorsOf('# A\n```sh\n# not a heading\n```\n## A\n')]).toEqual(['a', 'a-1']);
  });
});

describe('the README', () => {
  const readme = read(join(REPO_ROOT, 'README.md'));
  it('shows the two commands', () => {
    expect(readme).toContain('npm install && npm start');
    expect(readme).toContain('npm install && npm test');
  });
});
