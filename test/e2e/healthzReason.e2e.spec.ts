/**
 * /healthz is public (CONTRACT.md §6), and its reason can name the database's hosts, ports and user: with keys on, a
 * caller without a `read` or `admin` key gets a reason without connection details; such a key gets the whole reason.
 * A real `serve` on a real PostgreSQL database that stops accepting connections.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { admin, postgresForTests, useTestDatabases } from '../support/pg.js';
import { startServe } from '../support/serveProcess.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';
import { makeKeys } from '../support/relayHarness.js';
import { freePorts } from '../support/pgCluster.js';
import { waitFor } from '../support/waitFor.js';

const { available } = await postgresForTests();

describe.skipIf(!available)('/healthz: the reason for callers without a read or admin key has no connection details', () => {
  const dbs = useTestDatabases();
  const cleanup = useCleanup();
  const tmp = useTempDir();

  it('a database that refuses connections: 503 for everyone; hosts, ports and user only to a read or admin key', async () => {
    const name = new URL(dbs.url()).pathname.slice(1);
    const [down] = await freePorts(1);
    const db = `postgres://postgres@127.0.0.1:${down},127.0.0.1:5432/${name}?target_session_attrs=read-write`;
    const keys = makeKeys(join(tmp(), 'keys'), { pay: ['transfer'], reader: ['read'], ops: ['admin'] });
    const relay = startServe(['--db', db, '--keys', keys.ring.path]);
    cleanup.add(() => relay.child.kill('SIGKILL'));
    const url = await relay.ready;
    cleanup.add(() => admin((c) => c.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`)));
    await admin(async (c) => {
      await c.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
    });
    const health = async (token: string | null) => {
      const res = await fetch(`${url}/healthz`, token === null ? {} : { headers: { authorization: `Bearer ${token}` } });
      return { status: res.status, body: (await res.json()) as { code?: string; reason?: string } };
    };
    await waitFor(async () => (await health(keys.tokens['ops']!)).status === 503, { what: '/healthz 503 once the database refuses connections' });

    const detailed = [await health(keys.tokens['ops']!), await health(keys.tokens['reader']!)];
    for (const r of detailed) {
      expect(r.body.code).toBe('E503');
      expect(r.body.reason).toContain(`127.0.0.1:${down}`);
      expect(r.body.reason).toContain('127.0.0.1:5432');
    }
    const undetailed = [await health(null), await health(keys.tokens['pay']!), await health('not-a-token')];
    for (const r of undetailed) {
      expect(r.status).toBe(503);
      expect(r.body.code).toBe('E503');
      expect(r.body.reason).toContain('cannot take new transfers now');
      for (const detail of ['127.0.0.1', String(down), '5432', 'postgres', name]) expect(r.body.reason).not.toContain(detail);
    }
  }, 60_000);
});
