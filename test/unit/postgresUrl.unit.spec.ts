import { describe, expect, it } from 'vitest';
import { parsePostgresUrl, postgresUrlProblem } from '../../src/store/postgres/postgresUrl.js';
import { connectionTls } from '../../src/store/postgres/tls.js';
import { shownDb } from '../../src/store/openStore.js';
import { withoutPassword } from '../../src/relay/operator/reprocessCommand.js';
import { secretIn } from '../../src/cli/options.js';

describe('PostgreSQL URLs with several hosts (CONTRACT.md §9)', () => {
  it('reads what pg_autoctl show uri prints: each host becomes a URL of its own, everything else kept', () => {
    const parsed = parsePostgresUrl('postgres://app:s%40cret@10.0.0.1:6001,db2.example:6002/ledger?target_session_attrs=read-write&sslmode=require');
    expect(parsed.targetSessionAttrs).toBe('read-write');
    expect(parsed.hosts.map((h) => h.label)).toEqual(['10.0.0.1:6001', 'db2.example:6002']);
    // sslmode is applied by guidgate with libpq's meaning (tls.ts), not handed to node-postgres, which reads it otherwise.
    expect(parsed.hosts.map((h) => h.url)).toEqual([
      'postgres://app:s%40cret@10.0.0.1:6001/ledger',
      'postgres://app:s%40cret@db2.example:6002/ledger',
    ]);
    expect(parsed.tls).toMatchObject({ mode: 'require', explicit: true });
  });

  it('takes a host without a port (5432), an IPv6 address in brackets, and target_session_attrs=primary', () => {
    const parsed = parsePostgresUrl('postgresql://u@a,[::1]:7000/db?target_session_attrs=primary');
    expect(parsed.hosts.map((h) => [h.host, h.port])).toEqual([['a', 5432], ['[::1]', 7000]]);
    expect(parsed.targetSessionAttrs).toBe('primary');
  });

  it('leaves a single-host URL as it was but for libpq\'s TLS parameters', () => {
    const url = 'postgres://postgres@127.0.0.1:5432/x?options=-c+search_path%3Dy';
    expect(parsePostgresUrl(`${url}&sslmode=disable`, {}).hosts).toEqual([{ host: '127.0.0.1', port: 5432, label: '127.0.0.1:5432', url, tls: { mode: 'disable', explicit: true, rootCert: null, cert: null, key: null } }]);
  });

  it('reads sslmode as libpq does: prefer by default (or PGSSLMODE), each mode to its node-postgres settings', () => {
    expect(parsePostgresUrl('postgres://u@h/db', {}).tls).toMatchObject({ mode: 'prefer', explicit: false });
    expect(parsePostgresUrl('postgres://u@h/db', { PGSSLMODE: 'disable' }).tls).toMatchObject({ mode: 'disable', explicit: false });
    const tls = (mode: string) => parsePostgresUrl(`postgres://u@h1:1,h2:2/db?target_session_attrs=read-write&sslmode=${mode}`, {}).tls;
    expect(connectionTls(tls('disable'), {})).toEqual({ ssl: false, plainIfDeclined: false });
    expect(connectionTls(tls('allow'), {})).toEqual({ ssl: false, plainIfDeclined: false });
    expect(connectionTls(tls('allow'), {}, true)).toEqual({ ssl: { rejectUnauthorized: false }, plainIfDeclined: false });
    expect(connectionTls(tls('prefer'), {})).toEqual({ ssl: { rejectUnauthorized: false }, plainIfDeclined: true });
    expect(connectionTls(tls('require'), {})).toEqual({ ssl: { rejectUnauthorized: false }, plainIfDeclined: false });
    expect(connectionTls(tls('verify-full'), {})).toEqual({ ssl: {}, plainIfDeclined: false });
    const verifyCa = connectionTls(parsePostgresUrl('postgres://u@h/db?sslmode=verify-ca&sslrootcert=/ca.pem', {}).tls, { ca: 'CA' });
    expect(verifyCa.ssl).toMatchObject({ ca: 'CA' });
    expect((verifyCa.ssl as { checkServerIdentity?: unknown }).checkServerIdentity).toBeTypeOf('function');
    expect(postgresUrlProblem('postgres://u@h/db?sslmode=verify')).toContain('sslmode="verify" is not one of disable, allow, prefer, require, verify-ca, verify-full');
    expect(postgresUrlProblem('postgres://u@h/db?sslmode=verify-ca')).toContain('sslrootcert');
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

  // Unencoded in the password: the URL is read up to its LAST @; what follows is never shown unless it reads as hosts.
  const PASSWORDS = ['pa/ss12', 'pa#ss12', 'pa?ss12', 'pa@ss12', 'p/a#s?s@12'];

  it('reads a password holding an unencoded /, #, ? or @ whole, and hands it to node-postgres encoded', () => {
    for (const password of PASSWORDS) {
      const parsed = parsePostgresUrl(`postgres://app:${password}@db1:6001,db2:6002/ledger?target_session_attrs=read-write`, {});
      expect(parsed.hosts.map((h) => h.label), password).toEqual(['db1:6001', 'db2:6002']);
      expect(parsed.hosts[0]!.url).toBe(`postgres://app:${encodeURIComponent(password)}@db1:6001/ledger`);
    }
  });

  it('never shows any part of such a password: not in shownDb, not in a URL problem, not in a pasted command; a config file with it is a secret', () => {
    for (const password of PASSWORDS) {
      for (const url of [`postgres://app:${password}@db1:6001,db2:6002/ledger`, `postgres://app:${password}@db1:x/ledger`, `postgres://app:${password}@db1:1,,db2/ledger`, `postgres://app:${password}@/ledger`]) {
        const shown = [shownDb(url), postgresUrlProblem(url) ?? '', withoutPassword(url)];
        for (const text of shown) {
          expect(text, url).not.toContain('ss12');
          expect(text, url).not.toContain('12');
        }
        expect(secretIn('GUIDGATE_DB', url)).toBe('GUIDGATE_DB holds a URL with a password');
      }
    }
    expect(shownDb('postgres://app:pa/ss12@db1:6001,db2:6002/ledger?sslmode=prefer')).toBe('postgres://app:***@db1:6001,db2:6002/ledger?sslmode=prefer');
    expect(shownDb('postgres://app@db1:x y/ledger')).toBe('postgres://app@(hosts not shown: they do not parse)/ledger');
    expect(shownDb('postgres://app@db1/ledger?password=s3cret12')).toBe('postgres://app@db1/ledger?password=***');
  });
});
