/**
 * Every command on a PostgreSQL ledger, as an operator runs them: `./bin/guidgate … --db postgres://…` as real
 * processes on a throwaway database, against the real simulator.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../src/store/postgres/postgresStore.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { cli, seedRow, transferBody } from '../support/commandsSeed.js';
import { postgresForTests, useTestDatabases } from '../support/pg.js';
import { exited, startServe } from '../support/serveProcess.js';
import { useCleanup } from '../support/cleanup.js';
import { REPO_ROOT } from '../support/children.js';
import { useTempDir } from '../support/tmp.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';
import { SCHEMA_VERSION } from '../../src/store/postgres/schema.js';

const { available } = await postgresForTests();
const LONG_AGO = Date.UTC(2020, 0, 1);

describe.skipIf(!available)('the commands on a PostgreSQL ledger (--db postgres://…)', () => {
  const dbs = useTestDatabases();
  const cleanup = useCleanup();
  const tmp = useTempDir();
  const simulator = async (): Promise<Simulator> => {
    const sim = await startSimulator({ port: 0 });
    cleanup.add(() => sim.close());
    return sim;
  };
  const post = (url: string, body: string) => fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });

  it('serve answers a transfer and its replay; ledger, history, rebuild --verify, resolve, reprocess and purge work on the same URL', async () => {
    const sim = await simulator();
    const db = dbs.url();
    // No background settling: it would lease the rows below and settle them before the operator's resolve does.
    const relay = startServe(['--db', db, '--account-url', sim.url, '--settle-every', '0']);
    cleanup.add(async () => {
      relay.child.kill('SIGKILL');
      await exited(relay.child);
    });
    const url = await relay.ready;

    const t = transferBody('PG-E2E-1');
    const first = await post(url, t.body);
    const firstText = await first.text();
    expect(first.status).toBe(200);
    expect(JSON.parse(firstText)).toMatchObject({ guid: 'PG-E2E-1', code: '0000' });
    const replay = await post(url, t.body);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.text()).toBe(firstText);
    expect(sim.guidStats('PG-E2E-1').calls).toBe(1);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);

    // Rows for the commands, old enough for every --min-age: one the account system processed, one it never
    // saw (UNKNOWN, for resolve), one refused connection (FAILED, for reprocess).
    const applied = transferBody('PG-E2E-P');
    await (await fetch(`${sim.url}/transfer`, { method: 'POST', body: applied.body })).text();
    const old = await openPostgresStore({ projection: ledgerProjection, url: db, clock: () => LONG_AGO });
    await seedRow(old, 'PG-E2E-P', 'UNKNOWN', applied);
    await seedRow(old, 'PG-E2E-A', 'UNKNOWN');
    await seedRow(old, 'PG-E2E-F', 'FAILED');
    await old.close();

    const env = { GUIDGATE_DB: db };
    const ledger = await cli(['ledger', '--json'], env);
    expect(ledger.code, ledger.stderr).toBe(0);
    const rows = JSON.parse(ledger.stdout) as Array<{ guid: string; status: string }>;
    expect(rows.map((r) => [r.guid, r.status])).toEqual([['PG-E2E-1', 'DONE'], ['PG-E2E-A', 'UNKNOWN'], ['PG-E2E-F', 'FAILED'], ['PG-E2E-P', 'UNKNOWN']]);

    const history = await cli(['history', 'PG-E2E-1', '--json', '--db', db]);
    expect(history.code, history.stderr).toBe(0);
    expect((JSON.parse(history.stdout) as Array<{ seq: number; type: string }>).map((e) => [e.seq, e.type])).toEqual([[0, 'Claimed'], [1, 'Sent'], [2, 'Answered']]);
    expect((await cli(['history', 'PG-E2E-NONE', '--db', db])).code).toBe(1);

    const resolve = await cli(['resolve', '--min-age', '1m', '--json', '--account-url', sim.url], env);
    expect(resolve.code, resolve.stderr).toBe(0);
    expect(JSON.parse(resolve.stdout)).toMatchObject({ candidates: 2, processed: 1, absent: 1, stillUnknown: 0 });

    const reprocess = await cli(['reprocess', '--json', '--account-url', sim.url], env);
    expect(reprocess.code, reprocess.stderr).toBe(0);
    // PG-E2E-F and PG-E2E-A (found absent, so FAILED) are sent again, once each.
    expect(JSON.parse(reprocess.stdout)).toMatchObject({ candidates: 2 });
    expect(sim.guidStats('PG-E2E-F').calls).toBe(1);
    expect(sim.guidStats('PG-E2E-A').calls).toBe(1);
    expect(sim.guidStats('PG-E2E-P').calls).toBe(1);

    const purge = await cli(['purge', '--retention', '1ms', '--json'], env);
    expect(purge.code, purge.stderr).toBe(0);
    expect(JSON.parse(purge.stdout)).toMatchObject({ purged: 4 });
    const gone = await post(url, t.body);
    expect(gone.status).toBe(410);

    const verify = await cli(['rebuild', '--verify'], env);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    const stats = await cli(['stats', '--db', db]);
    expect(stats.code, stats.stderr).toBe(0);
    expect(stats.stdout).toContain('PURGED');
  }, 60_000);

  it("docs/deploying.md's several-instances example works as written (#28): serve and resolve on the exported GUIDGATE_DB, only the hosts made local", async () => {
    const doc = readFileSync(join(REPO_ROOT, 'docs', 'deploying.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## Running several instances'));
    const block = /```sh\n([\s\S]*?)```/.exec(section)![1]!;
    const lines = block.split('\n').map((l) => l.replace(/\s+#.*$/, '').trim()).filter((l) => l !== '');
    const exported = /^export GUIDGATE_DB=(\S+)$/.exec(lines[0]!)?.[1];
    expect(exported).toMatch(/^postgres:\/\//);
    const commands = lines.slice(1).map((l) => l.split(/\s+/));
    expect(commands.map((c) => c.slice(0, 2))).toEqual([['./bin/guidgate', 'serve'], ['./bin/guidgate', 'resolve']]);

    const sim = await simulator();
    const db = dbs.url();
    const keys = join(tmp(), 'keys');
    expect((await cli(['keys', 'add', 'ops', '--scopes', 'admin', '--keys', keys])).code).toBe(0);
    // Only where things are changes: the database, the account system, the relay's address and its keys file.
    const local = (args: string[]) => args.slice(2).map((a) => ({ 'https://core.bank.internal': sim.url, '10.0.0.11': '127.0.0.1', '/etc/guidgate/keys': keys })[a] ?? a);
    const env = { GUIDGATE_DB: db };
    const relay = startServe(local(commands[0]!), env);
    cleanup.add(async () => {
      relay.child.kill('SIGKILL');
      await exited(relay.child);
    });
    await relay.ready;
    const old = await openPostgresStore({ projection: ledgerProjection, url: db, clock: () => LONG_AGO });
    await seedRow(old, 'PG-DOC-A', 'UNKNOWN');
    await old.close();

    const resolve = await cli(['resolve', ...local(commands[1]!)], env);
    expect([resolve.code, resolve.stderr]).toEqual([0, '']);
    expect(resolve.stdout).toMatch(/absent=1/);
  }, 30_000);

  it('check says what it checked on PostgreSQL (schema version, tables, the projection against the log), never quick_check; reads only (#28)', async () => {
    const db = await dbs.fresh();
    const store = await openPostgresStore({ projection: ledgerProjection, url: db });
    await seedRow(store, 'PG-CK-1', 'DONE');
    await seedRow(store, 'PG-CK-2', 'UNKNOWN');
    await store.close();
    const sql = async (text: string) => {
      const client = new pg.Client({ connectionString: db });
      await client.connect();
      try {
        return (await client.query(text)).rows as Array<Record<string, unknown>>;
      } finally {
        await client.end();
      }
    };

    const ok = await cli(['check', '--db', db]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).not.toContain('quick_check null');
    expect(ok.stdout.split('\n').slice(0, 4)).toEqual([
      expect.stringMatching(/^ok: postgres.* is a sound guidgate ledger on PostgreSQL; checked:$/),
      `  schema version ${SCHEMA_VERSION} (this guidgate's), tables events, ledger, inquiry_schedule, requests, leases`,
      expect.stringMatching(/^ {2}the ledger projection against a fold of the event log, as rebuild --verify: 2 rows, no difference \(\d+ ms\)$/),
      "  pages: not checked from here (PRAGMA quick_check is SQLite's; on PostgreSQL, the server's amcheck)",
    ]);
    expect(JSON.parse((await cli(['check', '--json', '--db', db])).stdout)).toMatchObject({ ok: true, store: 'postgresql', schemaVersion: SCHEMA_VERSION, rows: 2, problems: [] });

    await sql("UPDATE ledger SET attempts = 7 WHERE guid = 'PG-CK-2'");
    const differs = await cli(['check', '--db', db]);
    expect(differs.code).toBe(1);
    expect(differs.stdout).toContain('PG-CK-2  differs  attempts (the ledger row differs from the log: guidgate rebuild repairs it)');
    expect((await cli(['rebuild', '--db', db])).code).toBe(0);

    // A ledger an older guidgate made: reported, not migrated (an open would migrate it).
    await sql(`DELETE FROM schema_version WHERE version = ${SCHEMA_VERSION}`);
    const older = await cli(['check', '--db', db]);
    expect([older.code, older.stdout]).toEqual([1, expect.stringContaining(`schema version ${SCHEMA_VERSION - 1} is older than this guidgate's (${SCHEMA_VERSION})`)]);
    expect(await sql('SELECT max(version) AS v FROM schema_version')).toEqual([{ v: SCHEMA_VERSION - 1 }]);

    const empty = await dbs.fresh();
    const none = await cli(['check', '--db', empty]);
    expect([none.code, none.stdout]).toEqual([1, expect.stringContaining('no ledger in this database')]);
  });

  it('a command other than serve, on a database without a ledger, exits 1 with "no ledger at" and creates nothing; a password is never shown', async () => {
    const empty = new URL(await dbs.fresh());
    empty.password = 'sekret-pw';
    const r = await cli(['ledger', '--db', empty.toString()]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no ledger at');
    expect(r.stderr).not.toContain('sekret-pw');
    const client = new pg.Client({ connectionString: empty.toString() });
    await client.connect();
    try {
      expect((await client.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'")).rows[0]).toEqual({ n: 0 });
    } finally {
      await client.end();
    }
  });
});
