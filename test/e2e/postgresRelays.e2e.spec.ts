/**
 * Several relays and several commands on ONE PostgreSQL ledger, as real processes: the account system (not
 * idempotent) must see each GUID at most once whoever handles its copies, and whoever dies.
 */
import type { ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../src/store/postgres/postgresStore.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { cli, seedRow, transferBody } from '../support/commandsSeed.js';
import { postgresForTests, useTestDatabases } from '../support/pg.js';
import { settleWithCommands, sigkillAndWait } from '../support/settle.js';
import { startServe } from '../support/serveProcess.js';
import { useCleanup } from '../support/cleanup.js';
import { sleep, waitFor } from '../support/waitFor.js';
import { orThrow } from '../../src/events/storeResult.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';

const { available } = await postgresForTests();
const LONG_AGO = Date.UTC(2020, 0, 1);

describe.skipIf(!available)('many relays and commands on one PostgreSQL ledger', () => {
  const dbs = useTestDatabases();
  const cleanup = useCleanup();
  const simulator = async (o: Parameters<typeof startSimulator>[0] = {}): Promise<Simulator> => cleanup.use(await startSimulator({ port: 0, ...o }));
  const relay = async (db: string, accountUrl: string): Promise<{ url: string; child: ChildProcess }> => {
    const r = startServe(['--db', db, '--account-url', accountUrl, '--timeout', '400ms', '--grace', '500ms']);
    cleanup.add(() => sigkillAndWait(r.child));
    return { url: await r.ready, child: r.child };
  };

  it('two serve processes, each GUID\'s copies sprayed across both, one SIGKILLed mid-load and restarted; then resolve and reprocess: each GUID applied exactly once, the projection equals the log', async () => {
    // Slow answers, and 1 GUID in 8 answered after the relay gave up (applied: UNKNOWN until resolve asks).
    const sim = await simulator({ latencyMs: 20, faults: { byGuidPrefix: { 'LATE-': 'late-answer' }, lateMs: 700 } });
    const db = dbs.url();
    const relays: Array<string | null> = [(await relay(db, sim.url)).url, null];
    const second = await relay(db, sim.url);
    relays[1] = second.url;

    const guids = Array.from({ length: 160 }, (_, i) => (i % 8 === 0 ? `LATE-${i}` : `PGR-${i}`));
    const copies = guids.flatMap((g) => [g, g, g]).sort(() => Math.random() - 0.5);
    const codes: Record<string, number> = {};
    let sentCopies = 0;
    /** One copy to a random live relay; a refused connection (the relay just died) goes to another. */
    const sendCopy = async (guid: string): Promise<void> => {
      for (let tries = 0; tries < 20; tries++) {
        const live = relays.filter((u): u is string => u !== null);
        const url = live[Math.floor(Math.random() * live.length)]!;
        try {
          const res = await fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: transferBody(guid).body });
          const { code } = (await res.json()) as { code: string };
          codes[code] = (codes[code] ?? 0) + 1;
          return;
        } catch {
          await sleep(20); // a channel's pace between retries
        }
      }
      throw new Error(`no relay took a copy of ${guid}`);
    };
    const killer = (async () => {
      await waitFor(() => sentCopies >= copies.length / 3, { intervalMs: 5, what: 'a third of the copies sent' });
      relays[1] = null;
      await sigkillAndWait(second.child);
      relays[1] = (await relay(db, sim.url)).url;
    })();
    const queue = [...copies];
    await Promise.all(Array.from({ length: 16 }, async () => {
      for (let g = queue.shift(); g !== undefined; g = queue.shift()) {
        await sendCopy(g);
        sentCopies++;
      }
    }));
    const loadEnded = Date.now();
    await killer;
    expect(sim.stats().doubleApplied).toEqual([]);

    // Settle what is open once every call's last Sent (all before the load ended) is past its timeout and grace
    // (400 + 500 ms, the sweep's own condition) and the late answers (700 ms) are in: the point, so sleep.
    await sleep(Math.max(0, loadEnded + 950 - Date.now()));
    await settleWithCommands(db, sim.url, '500ms');

    const store = await openPostgresStore({ projection: ledgerProjection, url: db });
    try {
      const rows = await orThrow(store.queryLedger({}));
      expect(rows).toHaveLength(guids.length);
      expect(rows.filter((r) => r.status !== 'DONE').map((r) => `${r.guid} ${r.status}`)).toEqual([]);
      // At most once, and since every row is DONE with the account system's answer: exactly once.
      const stats = sim.stats();
      expect(stats.doubleApplied).toEqual([]);
      for (const g of guids) expect(stats.applied[g] ?? 0, g).toBe(1);
      expect(await orThrow(store.verifyProjection())).toEqual([]);
    } finally {
      await store.close();
    }
    const verify = await cli(['rebuild', '--verify', '--db', db]);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    // The load was real: both relays answered, some copies were replays or in progress, some were unknown.
    expect(codes['0000']).toBeGreaterThan(guids.length);
    expect(Object.keys(codes).length).toBeGreaterThan(1);
  }, 120_000);

  it('two resolve and two reprocess processes on the same backlog at once: each row inquired about once and settled once, each FAILED row sent once', async () => {
    const sim = await simulator({ latencyMs: 5 });
    const db = await dbs.fresh();
    const processed = Array.from({ length: 60 }, (_, i) => `RP-P${i}`);
    const absent = Array.from({ length: 60 }, (_, i) => `RP-A${i}`);
    for (const g of processed) await (await fetch(`${sim.url}/transfer`, { method: 'POST', body: transferBody(g).body })).text();
    const old = await openPostgresStore({ projection: ledgerProjection, url: db, clock: () => LONG_AGO });
    await Promise.all([...processed, ...absent].map((g) => seedRow(old, g, 'UNKNOWN', transferBody(g))));
    await old.close();

    const env = { GUIDGATE_DB: db, GUIDGATE_ACCOUNT_URL: sim.url };
    const resolves = await Promise.all([1, 2].map(() => cli(['resolve', '--min-age', '1m', '--json'], env)));
    for (const r of resolves) expect(r.code, r.stderr).toBe(0);
    const sums = resolves.map((r) => JSON.parse(r.stdout) as { processed: number; absent: number });
    expect(sums.reduce((n, s) => n + s.processed, 0)).toBe(processed.length);
    expect(sums.reduce((n, s) => n + s.absent, 0)).toBe(absent.length);

    // The leases: one process asked about each row, the other left it alone.
    for (const g of [...processed, ...absent]) expect(sim.inquiries(g), g).toBe(1);
    expect(resolves.map((r) => (JSON.parse(r.stdout) as { candidates: number }).candidates).reduce((a, b) => a + b)).toBe(processed.length + absent.length);

    // The absent rows were FAILED by an inquiry, so each is asked about once more before its resend (CONTRACT.md §7):
    // by one reprocess only.
    const reprocesses = await Promise.all([1, 2].map(() => cli(['reprocess', '--min-age', '1m', '--json'], env)));
    for (const r of reprocesses) expect(r.code, r.stderr).toBe(0);
    for (const g of absent) expect(sim.inquiries(g), g).toBe(2);
    for (const g of processed) expect(sim.inquiries(g), g).toBe(1);

    const store = await openPostgresStore({ projection: ledgerProjection, url: db });
    try {
      const log = await orThrow(store.readAll(-1, 100_000));
      const count = (g: string, type: string) => log.filter((e) => e.guid === g && e.type === type).length;
      for (const g of [...processed, ...absent]) expect(count(g, 'Resolved'), g).toBe(1);
      // The absent rows went FAILED and were sent again exactly once (one more Sent each), the processed never.
      for (const g of absent) expect([count(g, 'Sent'), sim.guidStats(g).calls], g).toEqual([2, 1]);
      for (const g of processed) expect([count(g, 'Sent'), sim.guidStats(g).calls], g).toEqual([1, 1]);
      expect(await orThrow(store.countLedger({ statuses: ['UNKNOWN', 'FAILED', 'SENT', 'RECEIVED'] }))).toBe(0);
      expect(await orThrow(store.verifyProjection())).toEqual([]);
    } finally {
      await store.close();
    }
  }, 120_000);
});
