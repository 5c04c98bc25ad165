/**
 * `--db` as libpq reads it (CONTRACT.md §9 v4), on real processes against the test server, which has no TLS:
 * `sslmode=prefer` (what `pg_autoctl show uri` prints, and libpq's default) connects plainly, `require` fails
 * saying why, `disable` connects; `check` takes the multi-host form; and a password holding an unencoded `/`, `#`,
 * `?` or `@` is never shown, on any path that prints `--db` (startup lines, errors, `check`).
 */
import { describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../src/store/postgres/postgresStore.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';
import { cli } from '../support/commandsSeed.js';
import { postgresForTests, useTestDatabases } from '../support/pg.js';
import { startServe } from '../support/serveProcess.js';
import { useCleanup } from '../support/cleanup.js';
import { freePorts } from '../support/pgCluster.js';

const { available } = await postgresForTests();

/** Unencoded; the test server trusts every local connection, so any password logs in. */
const PASSWORDS = ['pa/ss9z', 'pa#ss9z', 'pa?ss9z', 'pa@ss9z', 'p/a#s?s@9z'];

describe.skipIf(!available)('--db with libpq\'s sslmode, the multi-host form for check, and passwords never shown', () => {
  const dbs = useTestDatabases();
  const cleanup = useCleanup();

  /** The test database's URL with a closed port listed first (a host that is down) and `query` appended. */
  const multiHost = async (query: string, userinfo = 'postgres'): Promise<string> => {
    const [down] = await freePorts(1);
    const u = new URL(dbs.url());
    return `postgres://${userinfo}@127.0.0.1:${down},127.0.0.1:${u.port || 5432}${u.pathname}?target_session_attrs=read-write${query}`;
  };
  const created = async (): Promise<void> => {
    const store = await openPostgresStore({ url: dbs.url(), projection: ledgerProjection, clock: () => Date.now() });
    await store.close();
  };

  it('sslmode=prefer (as pg_autoctl prints it) and disable connect to a server without TLS; require fails saying so; an unknown mode is exit 2', async () => {
    await created();
    const prefer = await cli(['stats', '--db', await multiHost('&sslmode=prefer')]);
    expect(prefer.code, prefer.stderr).toBe(0);
    const byDefault = await cli(['stats', '--db', await multiHost('')]);
    expect(byDefault.code, byDefault.stderr).toBe(0);
    const disable = await cli(['stats', '--db', await multiHost('&sslmode=disable')]);
    expect(disable.code, disable.stderr).toBe(0);
    const require = await cli(['stats', '--db', await multiHost('&sslmode=require')]);
    expect(require.code).toBe(1);
    expect(require.stderr).toContain('The server does not support SSL connections (sslmode=require)');
    const unknown = await cli(['stats', '--db', await multiHost('&sslmode=on')]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('sslmode="on" is not one of');
  });

  it('check takes the multi-host form, with sslmode=prefer', async () => {
    await created();
    const r = await cli(['check', '--db', await multiHost('&sslmode=prefer')]);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toContain('is a sound guidgate ledger on PostgreSQL');
    const require = await cli(['check', '--db', await multiHost('&sslmode=require')]);
    expect(require.code).toBe(1);
    expect(require.stdout).toContain('sslmode=require');
  });

  it('a password with an unencoded /, #, ? or @: logs in, and no part of it is printed by check, serve, a command that fails, or the URL check', async () => {
    await created();
    for (const password of PASSWORDS) {
      const good = await multiHost('&sslmode=prefer', `postgres:${password}`);
      const checked = await cli(['check', '--db', good]);
      expect(checked.code, password + checked.stderr).toBe(0);
      expect(checked.stdout).toContain('postgres:***@127.0.0.1:');

      const relay = startServe(['--db', good, '--log-level', 'info']);
      cleanup.add(() => relay.child.kill('SIGKILL'));
      await relay.ready;
      relay.child.kill('SIGTERM');
      await new Promise((r) => relay.child.once('exit', r));

      const [down] = await freePorts(1);
      const failing = await Promise.all([
        cli(['stats', '--db', `postgres://postgres:${password}@127.0.0.1:${down}/x?sslmode=disable`]),
        cli(['check', '--db', `postgres://postgres:${password}@127.0.0.1:${down}/x`]),
        cli(['purge', '--db', `postgres://postgres:${password}@127.0.0.1:${down},,h/x`]),
        cli(['stats', '--db', `postgres://postgres:${password}@127.0.0.1:x/x`]),
      ]);
      expect(failing.map((r) => r.code)).toEqual([1, 1, 2, 2]);
      for (const text of [checked.stdout, checked.stderr, relay.output(), ...failing.flatMap((r) => [r.stdout, r.stderr])]) {
        expect(text, password).not.toContain('9z');
      }
    }
  }, 120_000);
});
