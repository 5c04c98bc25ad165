import { describe, expect, it } from 'vitest';
import { parsePostgresUrl, postgresUrlProblem } from '../../src/store/postgres/postgresUrl.js';

describe('PostgreSQL URLs with several hosts (CONTRACT.md §9)', () => {
  it('reads what pg_autoctl show uri prints: each host becomes a URL of its own, everything else kept', () => {
    const parsed = parsePostgresUrl('postgres://app:s%40cret@10.0.0.1:6001,db2.example:6002/ledger?target_session_attrs=read-write&sslmode=require');
    expect(parsed.targetSessionAttrs).toBe('read-write');
    expect(parsed.hosts.map((h) => h.label)).toEqual(['10.0.0.1:6001', 'db2.example:6002']);
    expect(parsed.hosts.map((h) => h.url)).toEqual([
      'postgres://app:s%40cret@10.0.0.1:6001/ledger?sslmode=require',
      'postgres://app:s%40cret@db2.example:6002/ledger?sslmode=require',
    ]);
  });

  it('takes a host without a port (5432), an IPv6 address in brackets, and target_session_attrs=primary', () => {
    const parsed = parsePostgresUrl('postgresql://u@a,[::1]:7000/db?target_session_attrs=primary');
    expect(parsed.hosts.map((h) => [h.host, h.port])).toEqual([['a', 5432], ['[::1]', 7000]]);
    expect(parsed.targetSessionAttrs).toBe('primary');
  });

  it('leaves a single-host URL as it was', () => {
    const url = 'postgres://postgres@127.0.0.1:5432/x?options=-c%20search_path%3Dy';
    expect(parsePostgresUrl(url).hosts).toEqual([{ host: '127.0.0.1', port: 5432, label: '127.0.0.1:5432', url }]);
  });

  it('refuses any other target_session_attrs, naming it, and a host list that does not parse; never shows the password', () => {
    for (const [url, named] of [
      ['postgres://u:pw@h1:1,h2:2/db?target_session_attrs=read-only', 'target_session_attrs="read-only"'],
      ['postgres://u:pw@h1:1/db?target_session_attrs=any', 'target_session_attrs="any"'],
      ['postgres://u:pw@h1:1/db?target_session_attrs=primary&target_session_attrs=standby', 'more than once'],
      ['postgres://u:pw@h1:1,,h2:2/db', 'host 2 of the URL is empty'],
      ['postgres://u:pw@h1:1,h2:99999/db', 'the port of host 2'],
      ['postgres://u:pw@h1:x/db', 'host 1 of the URL'],
    ] as const) {
      const problem = postgresUrlProblem(url);
      expect(problem, url).toContain(named);
      expect(problem).not.toContain('pw');
    }
    expect(postgresUrlProblem('postgres://u:pw@h1:1,h2:2/db')).toBeNull();
  });
});
