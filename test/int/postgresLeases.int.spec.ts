import pg from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { resolveUnknown, type ResolveSummary } from '../../src/commands/resolve.js';
import { startSettler, type Settler } from '../../src/commands/settler.js';
import { orThrow } from '../../src/events/storeResult.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';
import type { AccountClient, InquiryOutcome } from '../../src/account/accountClient.js';
import { openPostgresStore, type PostgresEventStore } from '../../src/store/postgres/postgresStore.js';
import { seedRow } from '../support/commandsSeed.js';
import { postgresForTests, useTestDatabases } from '../support/pg.js';
import { waitFor } from '../support/waitFor.js';
import { useCleanup } from '../support/cleanup.js';

const { available } = await postgresForTests();

/** An account system that has none of the GUIDs, and runs `onFirst` inside the first inquiry (before answering). */
function absentAccount(onFirst: () => Promise<void>): { client: AccountClient; asked: string[] } {
  const asked: string[] = [];
  const client: AccountClient = {
    transfer: () => Promise.reject(new Error('a settle run never sends')),
    async inquire(guid: string): Promise<InquiryOutcome> {
      asked.push(guid);
      if (asked.length === 1) await onFirst();
      return { kind: 'absent' };
    },
    close: async () => undefined,
  };
  return { client, asked };
}

const GUIDS = ['L-1', 'L-2', 'L-3', 'L-4', 'L-5', 'L-6'];

/**
 * On PostgreSQL a settle run ends its leases once, at its end: when that fails too (the ledger failed under the
 * run, a lock, a connection lost), the rows it leased were skipped by every run for the 2-minute lease (#24).
 */
describe.skipIf(!available)('leases a failed run could not end (real PostgreSQL)', () => {
  const dbs = useTestDatabases();
  beforeEach(() => dbs.reset());
  const cleanup = useCleanup();

  /** A store whose statements give up on a lock after 300 ms, with GUIDS UNKNOWN, and a connection to lock it with. */
  async function given(): Promise<{ store: PostgresEventStore; locker: pg.Client }> {
    const store = cleanup.use(await openPostgresStore({ projection: ledgerProjection, url: dbs.url(), lockTimeoutMs: 300 }));
    for (const guid of GUIDS) await seedRow(store, guid, 'UNKNOWN');
    const locker = new pg.Client({ connectionString: dbs.url() });
    cleanup.add(() => locker.end().catch(() => undefined));
    await locker.connect();
    return { store, locker };
  }
  /** Every table a settle run writes, locked by `locker` until it rolls back: the run's writes and release fail. */
  const lockEverything = async (c: pg.Client): Promise<void> => {
    await c.query('BEGIN');
    await c.query('LOCK TABLE leases, ledger, events IN ACCESS EXCLUSIVE MODE');
  };
  const statuses = async (s: PostgresEventStore): Promise<string[]> => Promise.all(GUIDS.map(async (g) => (await orThrow(s.getLedger(g)))?.status ?? 'none'));

  it("serve's settler: the next run takes over the leases a failed run left and settles those rows at once, not after the lease", async () => {
    const { store: s, locker: l } = await given();
    const account = absentAccount(() => lockEverything(l));
    const runs: ResolveSummary[] = [];
    let leftBehind: Array<{ guid: string; holder: string }> | undefined;
    const settler: Settler = startSettler(
      {
        store: s,
        account: account.client,
        metrics: { inquiry: () => undefined, settled: () => undefined, settleRunFinished: () => undefined },
        clock: Date.now,
        log: (summary) => {
          runs.push(summary);
          if (runs.length !== 1) return;
          // The first run is over: its write failed, and so did ending its leases. Seen from inside the lock, then let go.
          void (async () => {
            leftBehind = (await l.query<{ guid: string; holder: string }>('SELECT guid, holder FROM leases ORDER BY guid')).rows;
            await l.query('ROLLBACK');
          })();
        },
      },
      { everyMs: 50, minAgeMs: 0, graceMs: 1000, concurrency: 1 },
    );
    cleanup.add(() => settler.stop());
    await waitFor(async () => (await statuses(s).catch(() => [])).filter((st) => st === 'FAILED').length === GUIDS.length, { timeoutMs: 30_000, what: 'every row settled (the lease is 120 s)' });
    expect(runs[0]).toMatchObject({ ledgerErrors: 1, absent: 0 });
    // One worker leases two rows at a time: the one asked about and the next, both still leased by the settler.
    expect(leftBehind?.map((r) => r.guid)).toEqual(['L-1', 'L-2']);
    expect(leftBehind?.every((r) => /:settler:/.test(r.holder))).toBe(true);
    // The next run asked about them again (the first answer was never recorded), the others once.
    expect(account.asked.filter((g) => g === 'L-1')).toHaveLength(2);
    expect(account.asked.filter((g) => g === 'L-2')).toHaveLength(1);
    await waitFor(async () => (await s.pool.query('SELECT 1 FROM leases')).rowCount === 0, { what: 'every lease ended' });
  });

  it('ending the leases is tried again: a release whose connection is killed still ends them, so another run settles those rows at once', async () => {
    const { store: s, locker: l } = await given();
    const name = new URL(dbs.url()).pathname.slice(1);
    let killed = 0;
    let watching: Promise<void> = Promise.resolve();
    const account = absentAccount(async () => {
      await lockEverything(l);
      // The run's write fails on the lock; then its release waits on it: kill that connection, then let go.
      watching = (async () => {
        // pg_stat_activity is read once per transaction: the locker, inside one, would see it stand still.
        const waiting = await waitFor(async () => (await s.pool.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM leases%'", [name])).rows[0], { what: 'the release waiting on the lock' });
        killed = (await l.query('SELECT pg_terminate_backend($1)', [waiting.pid])).rowCount ?? 0;
        await l.query('ROLLBACK');
      })();
    });
    const first = await resolveUnknown({ store: s, account: account.client }, { minAgeMs: 0, graceMs: 1000, concurrency: 1 });
    await watching;
    expect(first).toMatchObject({ ledgerErrors: 1, absent: 0 });
    expect(killed).toBe(1);
    expect((await s.pool.query('SELECT guid FROM leases')).rows).toEqual([]);
    // A run of another holder (an operator's resolve) finds nothing leased.
    const second = await resolveUnknown({ store: s, account: account.client }, { minAgeMs: 0, graceMs: 1000, concurrency: 1 });
    expect(second).toMatchObject({ ledgerErrors: 0, absent: GUIDS.length });
    expect(await statuses(s)).toEqual(GUIDS.map(() => 'FAILED'));
  });
});
