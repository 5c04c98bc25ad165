import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, it, expect, beforeEach, vi } from 'vitest';
import { openPostgresStore, isPostgresUrl, type PostgresStoreOptions } from '../../src/store/postgres/postgresStore.js';
import { migrate, SCHEMA_VERSION } from '../../src/store/postgres/schema.js';
import { sweepOrphans } from '../../src/send/sweepOrphans.js';
import { LedgerUnavailableError } from '../../src/events/errors.js';
import type { Command } from '../../src/events/decide.js';
import { resolveUnknown } from '../../src/commands/resolve.js';
import { inquireBeforeResend } from '../../src/send/resendAfterInquiry.js';
import type { AccountClient } from '../../src/account/accountClient.js';
import { seedRow } from '../support/commandsSeed.js';
import { PG_ADMIN_URL, postgresForTests, useTestDatabases } from '../support/pg.js';
import { orThrow } from '../../src/events/storeResult.js';
import { expectLeft } from '../support/storeResult.js';
import { sleep, waitFor } from '../support/waitFor.js';
import * as E from 'fp-ts/lib/Either.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';
import { groupCommit } from '../../src/store/postgres/groupCommit.js';
import { coalescedGetLedger, GET_LEDGERS_SQL } from '../../src/store/postgres/ledgerQueries.js';
import { LEASE_ROWS_SQL } from '../../src/store/postgres/leases.js';
import { MISSING_EVENTS_SQL } from '../../src/store/postgres/continuity.js';
import { ledgerTypes } from '../../src/store/postgres/pools.js';
import { startHoldingProxy } from '../support/pgHoldingProxy.js';

const submit = (fp = 'fp'): Command => ({ type: 'Submit', request: '{"guid":"g"}', fingerprint: fp, timeoutMs: 3000, maxAttempts: 3 });
const answer = (attempt = 1, response = '{"code":"0000"}'): Command => ({ type: 'RecordAnswer', attempt, code: '0000', response, latencyMs: 3 });

const { available } = await postgresForTests();

async function sql<T extends pg.QueryResultRow = pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** Whether a session of the application named `app` is waiting on a lock. */
const waitsOnLock = async (url: string, app: string): Promise<boolean> =>
  (await sql(url, "SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", [app])).length > 0;

it('isPostgresUrl tells a PostgreSQL URL from a file path', () => {
  expect(['postgres://u@h/db', 'postgresql://u@h:5432/db', 'POSTGRES://h/db'].map(isPostgresUrl)).toEqual([true, true, true]);
  expect(['./data/guidgate.db', 'postgres.db', '/tmp/postgres://x', 'mysql://h/db'].map(isPostgresUrl)).toEqual([false, false, false, false]);
});

/** What only PostgreSQL has; what every store must do is the conformance suite (test/conformance/postgres.int.spec.ts). */
describe.skipIf(!available)('PostgreSQL event store', () => {
  const dbs = useTestDatabases();
  beforeEach(() => dbs.reset());
  const open = (extra: Partial<PostgresStoreOptions> = {}) => openPostgresStore({ projection: ledgerProjection, url: dbs.url(), ...extra });

  it('the row reads of one turn of the event loop are one query, each call given its own row; a row that does not decode fails its own callers only', async () => {
    const store = await open();
    await orThrow(store.execute('g1', submit()));
    await orThrow(store.execute('g2', submit('fp2')));
    await store.close();
    const pool = new pg.Pool({ connectionString: dbs.url(), max: 2, types: ledgerTypes });
    try {
      const queries: string[] = [];
      const counting = { query: ((q: { name?: string }) => (queries.push(q.name ?? '?'), pool.query(q as pg.QueryConfig))) as pg.Pool['query'] } as pg.Pool;
      const get = coalescedGetLedger(counting, ledgerProjection.rowToState);
      const [a, b, again, none] = await Promise.all([get('g1'), get('g2'), get('g1'), get('absent')]);
      expect([a?.guid, a?.fingerprint, b?.guid, b?.fingerprint, again?.guid, none]).toEqual(['g1', 'fp', 'g2', 'fp2', 'g1', null]);
      expect(queries).toEqual(['guidgate_get_ledgers']);
      // A write acknowledged before a call is seen by it: the next turn's reads are a query of their own.
      await pool.query("UPDATE ledger SET status = 'NOT-A-STATUS' WHERE guid = 'g2'");
      const [good, bad] = await Promise.allSettled([get('g1'), get('g2')]);
      expect(good).toMatchObject({ status: 'fulfilled', value: { guid: 'g1' } });
      expect(bad).toMatchObject({ status: 'rejected', reason: { name: 'LedgerCorruptError' } });
      expect(queries).toHaveLength(2);
    } finally {
      await pool.end();
    }
  });

  it("the store's row reads run on a pool of their own whose sessions plan the read once, never anew at a run (however many GUIDs a turn carries)", async () => {
    const store = await open();
    try {
      for (let i = 0; i < 6; i++) await orThrow(store.execute(`g${i}`, submit(`fp${i}`)));
      // Turns of 1 to 6 GUIDs: left to choose, PostgreSQL plans each of the first five runs for its values.
      for (let n = 1; n <= 6; n++) await Promise.all(Array.from({ length: n }, (_, i) => orThrow(store.getLedger(`g${i}`))));
      // Every connection the pool can hold, at once, so that the ones the reads ran on are among them.
      const clients = await Promise.all([store.rowReads.connect(), store.rowReads.connect()]);
      try {
        let generic = 0;
        let custom = 0;
        for (const c of clients) {
          const { rows } = await c.query<{ generic_plans: string; custom_plans: string }>("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'guidgate_get_ledgers'");
          for (const r of rows) [generic, custom] = [generic + Number(r.generic_plans), custom + Number(r.custom_plans)];
        }
        expect({ generic, custom }).toEqual({ generic: 6, custom: 0 });
      } finally {
        for (const c of clients) c.release();
      }
    } finally {
      await store.close();
    }
  });

  it('the lookups of many keys outside a write transaction (row reads, leases, missing events) go through the keys even in a generic plan made on a new ledger, never analyzed (as the sixth run on a pooled connection makes it), and find the same rows', async () => {
    const store = await open();
    await store.close();
    const client = new pg.Client({ connectionString: dbs.url() });
    await client.connect();
    const statements = [
      { name: 'get_ledgers', text: GET_LEDGERS_SQL, values: [['g7', 'absent', 'g4999']], args: "'{a,b}'", index: 'ledger_pkey' },
      { name: 'lease_rows', text: LEASE_ROWS_SQL, values: ['h', ['g7', 'g8', 'absent'], [2, 1, 2], 1000, 1], args: "'h', '{a}', '{1}', 1, 1", index: 'ledger_pkey' },
      { name: 'missing_events', text: MISSING_EVENTS_SQL, values: [['g7', 'g7', 'absent'], [0, 9, 0]], args: "'{a}', '{1}'", index: 'events_pkey' },
    ];
    const plan = async (name: string, args: string) =>
      (await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE ${name}(${args})`)).rows.map((r) => r['QUERY PLAN']).join('\n');
    try {
      await client.query('SET plan_cache_mode = force_generic_plan');
      for (const s of statements) {
        await client.query({ name: s.name, text: s.text, values: s.values });
        expect(await plan(s.name, s.args), s.name).toContain(`using ${s.index} on`);
        expect(await plan(s.name, s.args), s.name).not.toMatch(/Seq Scan on (ledger|events)/);
      }
      // The plans made when the ledger was empty are the ones kept as it grows.
      await client.query(`INSERT INTO ledger (guid, status, fingerprint, attempts, created_at, updated_at, last_seq)
                          SELECT 'g' || i, 'DONE', 'fp', 1, 1, 1, 2 FROM generate_series(1, 5000) AS i`);
      await client.query(`INSERT INTO events (guid, seq, type, at, data) SELECT 'g' || i, 0, 'Claimed', 1, '{}' FROM generate_series(1, 5000) AS i`);
      for (const s of statements) expect(await plan(s.name, s.args), s.name).toContain(`using ${s.index} on`);
      const found = async (s: (typeof statements)[number]) => (await client.query<{ guid: string; seq?: number }>({ name: s.name, text: s.text, values: s.values })).rows;
      expect((await found(statements[0]!)).map((r) => r.guid).sort()).toEqual(['g4999', 'g7']);
      expect((await found(statements[1]!)).map((r) => r.guid)).toEqual(['g7']); // g8 is at seq 2, not 1
      expect(await found(statements[2]!)).toEqual([{ guid: 'g7', seq: 9 }, { guid: 'absent', seq: 0 }]);
    } finally {
      await client.end();
    }
  });

  it('migrates a fresh database to the current version: logged tables, synchronous_commit on', async () => {
    const store = await open();
    expect(await sql(dbs.url(), 'SELECT version FROM schema_version ORDER BY version')).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => ({ version: i + 1 })));
    const persistence = await sql(dbs.url(), "SELECT relname, relpersistence FROM pg_class WHERE relname IN ('events', 'ledger') ORDER BY relname");
    expect(persistence).toEqual([{ relname: 'events', relpersistence: 'p' }, { relname: 'ledger', relpersistence: 'p' }]);
    expect((await store.pool.query('SHOW synchronous_commit')).rows).toEqual([{ synchronous_commit: 'on' }]);
    await store.close();
  });

  it('indexes only what is searched: one partial index over the unsettled states, used by the queries for them even in a generic plan, and the rows found are the right ones', async () => {
    const store = await open();
    const indexes = await sql<{ indexname: string }>(dbs.url(), "SELECT indexname FROM pg_indexes WHERE tablename = 'ledger' ORDER BY indexname");
    expect(indexes.map((r) => r.indexname)).toEqual(['ledger_pkey', 'ledger_status_updated', 'ledger_unsettled']);
    for (let i = 0; i < 50; i++) {
      await orThrow(store.execute(`d${i}`, submit()));
      await orThrow(store.execute(`d${i}`, answer()));
    }
    await orThrow(store.execute('u', submit()));
    await orThrow(store.execute('u', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
    await orThrow(store.execute('s', submit()));
    // What the store sends, to ask PostgreSQL for the plan it would use once it stops planning per execution.
    const sent: pg.QueryConfig[] = [];
    const query = store.pool.query.bind(store.pool) as (c: pg.QueryConfig) => Promise<pg.QueryResult>;
    store.pool.query = ((c: pg.QueryConfig) => (sent.push(c), query(c))) as typeof store.pool.query;
    const genericPlan = async (c: pg.QueryConfig): Promise<string> => {
      const client = new pg.Client({ connectionString: dbs.url() });
      await client.connect();
      try {
        await client.query('ANALYZE ledger');
        await client.query('SET plan_cache_mode = force_generic_plan');
        await client.query(`PREPARE q AS ${c.text}`);
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE q(${(c.values ?? []).map(() => 'NULL').join(', ')})`);
        return rows.map((r) => r['QUERY PLAN']).join('\n');
      } finally {
        await client.end();
      }
    };
    try {
      expect((await orThrow(store.queryLedger({ statuses: ['UNKNOWN'], sentAtOrBefore: Date.now() + 1 }))).map((r) => r.guid)).toEqual(['u']);
      expect(await genericPlan(sent.pop()!)).toContain('ledger_unsettled');
      expect(await orThrow(store.countLedger({ statuses: ['SENT', 'RECEIVED'] }))).toBe(1);
      expect(await genericPlan(sent.pop()!)).toContain('ledger_unsettled');
      expect((await orThrow(store.queryLedger({ statuses: ['DONE', 'SENT'], limit: 2 }))).map((r) => r.guid)).toEqual(['d0', 'd1']);
      expect(await genericPlan(sent.pop()!)).not.toContain('ledger_unsettled'); // DONE is not in it
    } finally {
      await store.close();
    }
  });

  it('migration 4 on a ledger of schema 3: the two status indexes over every row give way to the partial index; every row is still found by status', async () => {
    const url = await dbs.fresh();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await migrate(client, true, 3);
      const row = (guid: string, status: string) =>
        client.query("INSERT INTO ledger (guid, status, fingerprint, attempts, created_at, updated_at, last_seq) VALUES ($1, $2, 'fp', 1, 1000, 1000, 1)", [guid, status]);
      await Promise.all([row('u', 'UNKNOWN'), row('d', 'DONE'), row('f', 'FAILED')]);
      const indexes = async () => (await client.query<{ indexname: string }>("SELECT indexname FROM pg_indexes WHERE tablename = 'ledger' ORDER BY indexname")).rows.map((r) => r.indexname);
      expect(await indexes()).toEqual(['ledger_pkey', 'ledger_status_guid', 'ledger_status_sent', 'ledger_status_updated']);
      const store = await openPostgresStore({ projection: ledgerProjection, url });
      try {
        expect(await indexes()).toEqual(['ledger_pkey', 'ledger_status_updated', 'ledger_unsettled']);
        expect((await client.query('SELECT max(version) AS v FROM schema_version')).rows).toEqual([{ v: SCHEMA_VERSION }]);
        expect((await orThrow(store.queryLedger({ statuses: ['UNKNOWN', 'FAILED'] }))).map((r) => r.guid)).toEqual(['f', 'u']);
        expect((await orThrow(store.queryLedger({ statuses: ['DONE'] }))).map((r) => r.guid)).toEqual(['d']);
      } finally {
        await store.close();
      }
    } finally {
      await client.end();
    }
  });

  it('migrations started by several stores at once on a fresh database run once', async () => {
    const url = await dbs.fresh();
    const stores = await Promise.all(Array.from({ length: 6 }, () => openPostgresStore({ projection: ledgerProjection, url })));
    expect(await sql(url, 'SELECT version FROM schema_version ORDER BY version')).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => ({ version: i + 1 })));
    const results = await Promise.all(stores.map((s) => orThrow(s.execute('g', submit()))));
    expect(results.filter((r) => r.kind === 'applied')).toHaveLength(1);
    await Promise.all(stores.map((s) => s.close()));
  });

  it('under SERIALIZABLE (as on a distributed SQL engine) a batch that fails with 40001 runs again: each GUID claimed once', async () => {
    const url = await dbs.fresh();
    const name = new URL(url).pathname.slice(1);
    await sql(url, `ALTER DATABASE ${name} SET default_transaction_isolation TO 'serializable'`);
    const [a, b] = await Promise.all([openPostgresStore({ projection: ledgerProjection, url, maxBatch: 8, maxInFlight: 1 }), openPostgresStore({ projection: ledgerProjection, url, maxBatch: 8, maxInFlight: 1 })]);
    expect((await a.pool.query('SHOW transaction_isolation')).rows).toEqual([{ transaction_isolation: 'serializable' }]);
    const guids = Array.from({ length: 80 }, (_, i) => `g${i}`);
    const results = await Promise.all(guids.flatMap((g) => [orThrow(a.execute(g, submit(g))), orThrow(b.execute(g, submit(g)))]));
    expect(results.filter((r) => r.kind === 'applied')).toHaveLength(80);
    const outcomes = await Promise.all(guids.flatMap((g) => [orThrow(a.execute(g, answer())), orThrow(b.execute(g, answer()))]));
    // One Answered per GUID; the other store's copy of the same answer lands on a DONE row: kept as a StaleAnswer.
    const appended = (type: string) => outcomes.filter((r) => r.kind === 'applied' && r.events[0]?.type === type);
    expect([appended('Answered').length, appended('StaleAnswer').length]).toEqual([80, 80]);
    expect(await orThrow(a.countLedger({ statuses: ['DONE'] }))).toBe(80);
    expect(await orThrow(a.verifyProjection())).toEqual([]);
    await Promise.all([a.close(), b.close()]);
  });

  it('one store, small batches, four in flight at once: duplicates split across concurrent batches are claimed once', async () => {
    const store = await open({ maxBatch: 5, maxInFlight: 4 });
    const guids = Array.from({ length: 60 }, (_, i) => `g${i}`);
    const results = await Promise.all([0, 1, 2].flatMap(() => guids.map((g) => orThrow(store.execute(g, submit(g))))));
    expect(results.filter((r) => r.kind === 'applied')).toHaveLength(60);
    const refused = results.filter((r) => r.kind === 'refused');
    expect(refused).toHaveLength(120);
    for (const r of refused) expect(r).toMatchObject({ refusal: { reason: 'exists', state: { status: 'SENT', lastSeq: 1 } } });
    expect(await orThrow(store.countLedger({ statuses: ['SENT'] }))).toBe(60);
    expect(await orThrow(store.verifyProjection())).toEqual([]);
    await store.close();
  });

  it('the group commit leaves out a unit whose caller gave up: queued behind a batch, or in a batch waiting for a lock (checked before COMMIT)', async () => {
    const store = await open();
    await orThrow(store.execute('held', submit('held')));
    // The group commit on the store's read pool (no server-side limits): only the check before COMMIT can leave a unit out.
    const writes = groupCommit(store.pool, { maxBatch: 8, maxInFlight: 1, fail: (e) => (e instanceof Error ? e : new Error(String(e))), projection: ledgerProjection });
    const holder = new pg.Client({ connectionString: dbs.url() });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT * FROM ledger WHERE guid = 'held' FOR UPDATE");
      const waiting = { gaveUp: false };
      const kept = { gaveUp: false };
      const queued = { gaveUp: false };
      // One batch (the two units of this turn) waits for the row lock; a third unit queues behind it.
      const inBatch = expect(writes.submit({ op: 'execute', guid: 'gave-up', command: submit('gave-up') }, waiting)).rejects.toThrow(/caller stopped waiting/);
      const withIt = writes.submit({ op: 'execute', guid: 'held', command: answer() }, kept);
      await waitFor(async () => (await sql(dbs.url(), "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")).length > 0, { what: 'the batch to wait for the lock' });
      const behind = expect(writes.submit({ op: 'execute', guid: 'queued', command: submit('queued') }, queued)).rejects.toThrow(/caller stopped waiting/);
      waiting.gaveUp = true;
      queued.gaveUp = true;
      await holder.query('COMMIT');
      await inBatch;
      await behind;
      expect(await withIt).toMatchObject({ kind: 'applied', state: { status: 'DONE' } });
      await writes.drain();
      expect(await orThrow(store.getLedger('gave-up'))).toBeNull();
      expect(await orThrow(store.getLedger('queued'))).toBeNull();
      expect(await orThrow(store.verifyProjection())).toEqual([]);
    } finally {
      await holder.end();
      await store.close();
    }
  });

  it('a COMMIT whose reply never comes (held by a proxy): the claim fails at its deadline, and the stuck connection is closed after query_timeout, so later writes go through', async () => {
    const proxy = await startHoldingProxy({ host: new URL(dbs.url()).hostname, port: Number(new URL(dbs.url()).port || 5432) });
    const store = await openPostgresStore({ projection: ledgerProjection, url: proxy.through(dbs.url()), claimDeadlineMs: 300, lockTimeoutMs: 300, maxInFlight: 1 });
    const hold = proxy.arm('ACK-HELD');
    try {
      // The server commits it (a claim nobody will call for: E503 to its channel, the sweep settles it).
      await expectLeft(store.execute('ACK-HELD', submit('ACK-HELD')), 'LEDGER_UNAVAILABLE', /did not complete within 300 ms/);
      await hold.holding;
      expect((await sql<{ status: string }>(dbs.url(), "SELECT status FROM ledger WHERE guid = 'ACK-HELD'"))[0]?.status).toBe('SENT');
      // The only write connection is stuck until query_timeout (the write deadline, 300 + 1000 ms, plus a margin) closes
      // it; then writes go on, with the reply still held.
      await waitFor(async () => E.isRight(await store.execute('after', submit('after'))), { what: 'a write to go through again' });
      expect((await orThrow(store.getLedger('after')))?.status).toBe('SENT');
    } finally {
      hold.release();
      await store.close();
      await proxy.close();
    }
  });

  it('without a clock, events are stamped and orphans judged by the database\'s clock, not this host\'s (a host a day ahead sweeps nothing young)', async () => {
    const store = await open();
    try {
      const before = Number((await sql<{ now: string }>(dbs.url(), 'SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now'))[0]!.now);
      const DAY = 86_400_000;
      vi.useFakeTimers({ toFake: ['Date'], now: before + DAY });
      const r = await orThrow(store.execute('g', submit()));
      if (r.kind !== 'applied') throw new Error('not applied');
      expect(r.state.createdAt).toBeGreaterThanOrEqual(before);
      expect(r.state.createdAt).toBeLessThan(before + 60_000);
      // now() is the database's clock, not this host's (a day ahead).
      const now = await orThrow(store.now());
      expect(now).toBeGreaterThanOrEqual(r.state.createdAt);
      expect(now).toBeLessThan(before + 60_000);
      // This host believes the row is a day old, far past its timeout (3 s) and grace: the database knows better.
      expect(await orThrow(sweepOrphans(store, 1000, Date.now()))).toEqual({ neverSent: 0, orphaned: 0 });
      expect(await orThrow(sweepOrphans(store, 1000, now))).toEqual({ neverSent: 0, orphaned: 0 });
      expect((await orThrow(store.getLedger('g')))?.status).toBe('SENT');
    } finally {
      vi.useRealTimers();
      await store.close();
    }
    // The same store given this host's clock (what a test or SQLite does) judges by it.
    const hosted = await open({ clock: () => Date.now() + 86_400_000 });
    try {
      expect(await orThrow(sweepOrphans(hosted, 1000, Date.now() + 86_400_000))).toEqual({ neverSent: 0, orphaned: 1 });
    } finally {
      await hosted.close();
    }
  });

  it('the min-age checks read the database\'s clock: on a host a day ahead, resolve and the inquiry before a resend leave a young row alone and ask nothing', async () => {
    const store = await open();
    const asked: string[] = [];
    const account = { inquire: async (guid: string) => (asked.push(guid), { kind: 'absent' as const }) } as unknown as AccountClient;
    try {
      await seedRow(store, 'YOUNG-U', 'UNKNOWN');
      const failed = await seedRow(store, 'YOUNG-F', 'UNKNOWN');
      await orThrow(store.appendEvents('YOUNG-F', failed.lastSeq, [{ type: 'Resolved', at: await orThrow(store.now()), data: { source: 'inquiry', outcome: 'absent', code: null, response: null } }]));
      const row = (await orThrow(store.getLedger('YOUNG-F')))!;
      expect(row).toMatchObject({ status: 'FAILED', failedByInquiry: true });
      vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 86_400_000 });
      expect(await resolveUnknown({ store, account }, { minAgeMs: 60_000, graceMs: 1000 })).toMatchObject({ candidates: 0, absent: 0 });
      const { inquiry } = await orThrow(inquireBeforeResend({ store, account }, row, 60_000));
      expect(inquiry.answer).toEqual({ kind: 'unknown' });
      expect(asked).toEqual([]);
    } finally {
      vi.useRealTimers();
      await store.close();
    }
  });

  it('an event is stamped by the database clock read after its row is locked: a write that waited for another stamps after it', async () => {
    const app = `guidgate-test-${randomBytes(4).toString('hex')}`;
    const store = await open({ applicationName: app });
    const holder = new pg.Client({ connectionString: dbs.url() });
    await holder.connect();
    try {
      const claimed = await orThrow(store.execute('g', submit()));
      if (claimed.kind !== 'applied') throw new Error('not applied');
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM ledger WHERE guid = 'g' FOR UPDATE");
      const answered = orThrow(store.execute('g', answer()));
      await waitFor(() => waitsOnLock(dbs.url(), app), { what: 'the store to wait on the row lock' });
      await sleep(50); // the point: time passes between the transaction's start and the lock let go
      const released = Number((await holder.query<{ now: string }>('SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now')).rows[0]!.now);
      await holder.query('COMMIT');
      const r = await answered;
      if (r.kind !== 'applied') throw new Error('not applied');
      // Stamped at the transaction's start, the Answered would be 50 ms or more before the lock was let go.
      expect(r.events[0]!.at).toBeGreaterThanOrEqual(released);
    } finally {
      await holder.end();
      await store.close();
    }
  });

  it('ping fails when a write would (once the last write that settled is a second old): a read-only database, a ledger table locked past the lock timeout', async () => {
    const store = await open({ lockTimeoutMs: 200 });
    const name = new URL(dbs.url()).pathname.slice(1);
    const terminate = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}' AND pid <> pg_backend_pid()`;
    // A ping answers from the outcome of the last write for WRITE_EVIDENCE_FRESH_MS, so a change shows within that.
    const pingSays = (want: 'ok' | RegExp) =>
      waitFor(async () => {
        const r = await store.ping();
        return want === 'ok' ? E.isRight(r) : E.isLeft(r) && r.left.code === 'LEDGER_UNAVAILABLE' && want.test(r.left.message);
      }, { what: `ping ${String(want)}` });
    try {
      expect(await store.ping()).toEqual(E.right(undefined));
      // Read-only for every new session (set from another database); the store's sessions are ended so that it takes new ones.
      await sql(PG_ADMIN_URL, `ALTER DATABASE ${name} SET default_transaction_read_only = on`);
      await sql(PG_ADMIN_URL, terminate);
      // A new session is checked before use (CONTRACT.md §9): the server is refused as read-only, naming it.
      await pingSays(/no writable PostgreSQL host: tried \S+ \(read-only/);
      await expectLeft(store.execute('ro', submit()), 'LEDGER_UNAVAILABLE');
      // The failed write stands for the next one: the ping says so at once.
      await expectLeft(store.ping(), 'LEDGER_UNAVAILABLE', /read-only/);
      await sql(PG_ADMIN_URL, `ALTER DATABASE ${name} RESET default_transaction_read_only`);
      await sql(PG_ADMIN_URL, terminate);
      await pingSays('ok');
      // A session holding the ledger table (a rebuild elsewhere) past the lock timeout.
      const holder = new pg.Client({ connectionString: dbs.url() });
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE ledger IN EXCLUSIVE MODE');
      try {
        await pingSays(/lock timeout/);
      } finally {
        await holder.query('ROLLBACK');
        await holder.end();
      }
      await pingSays('ok');
    } finally {
      await sql(PG_ADMIN_URL, `ALTER DATABASE ${name} RESET default_transaction_read_only`);
      await store.close();
    }
  });

  it('a server that cannot be reached: opening fails as unavailable (it does not wait for one)', async () => {
    await expect(openPostgresStore({ projection: ledgerProjection, url: 'postgres://postgres@127.0.0.1:1/nothing', connectTimeoutMs: 1000 })).rejects.toBeInstanceOf(LedgerUnavailableError);
  });

  it('connections terminated mid-batch: the batch is unavailable and nothing of it is stored; the pool reconnects by itself', async () => {
    const app = `guidgate-test-${randomBytes(4).toString('hex')}`;
    const store = await open({ applicationName: app });
    await orThrow(store.execute('held', submit()));
    // Another session holds the row, so the store's next batch waits inside its transaction.
    const holder = new pg.Client({ connectionString: dbs.url() });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query("SELECT * FROM ledger WHERE guid = 'held' FOR UPDATE");
    const batch = Promise.all([expectLeft(store.execute('held', answer()), 'LEDGER_UNAVAILABLE'), expectLeft(store.execute('new', submit()), 'LEDGER_UNAVAILABLE')]);
    await waitFor(() => waitsOnLock(dbs.url(), app), { what: 'the store to wait on the row lock' });
    await sql(dbs.url(), 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
    await batch;
    await holder.query('ROLLBACK');
    await holder.end();
    expect(await orThrow(store.getLedger('new'))).toBeNull();
    // Every connection of the store was killed, idle ones too; the very next write still succeeds.
    expect((await orThrow(store.execute('new', submit()))).kind).toBe('applied');
    expect((await orThrow(store.execute('held', answer()))).kind).toBe('applied');
    await orThrow(store.ping());
    await store.close();
  });

  it('idle connections terminated (a PostgreSQL restart): the next write succeeds without reopening the store', async () => {
    const app = `guidgate-test-${randomBytes(4).toString('hex')}`;
    const store = await open({ applicationName: app });
    await Promise.all(['a', 'b', 'c'].map((g) => orThrow(store.execute(g, submit()))));
    const killed = await sql(dbs.url(), 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
    expect(killed.length).toBeGreaterThan(0);
    expect((await orThrow(store.execute('d', submit()))).kind).toBe('applied');
    expect((await orThrow(store.queryLedger({}))).map((r) => r.guid)).toEqual(['a', 'b', 'c', 'd']);
    await store.close();
  });

  it('a write or a read right after its pooled connections were killed takes a new connection (20 times in a row)', async () => {
    const app = `guidgate-test-${randomBytes(4).toString('hex')}`;
    const store = await open({ applicationName: app, poolSize: 1 });
    const killer = new pg.Client({ connectionString: dbs.url() });
    await killer.connect();
    try {
      for (let i = 0; i < 20; i++) {
        await orThrow(store.ping()); // the pool holds an idle connection
        await killer.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
        expect((await orThrow(store.execute(`k${i}`, submit()))).kind).toBe('applied');
        await killer.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
        expect((await orThrow(store.getLedger(`k${i}`)))?.status).toBe('SENT');
      }
    } finally {
      await killer.end();
      await store.close();
    }
  });

});
