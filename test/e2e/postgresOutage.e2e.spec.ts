/**
 * PostgreSQL going away under a resending load, without restarting guidgate: every connection of the ledger's
 * database terminated again and again (what a server restart does to its clients), and a stretch where the
 * database refuses new connections at all. The server itself is shared with other tests, so it is never
 * restarted here: `pg_terminate_backend` of this database's sessions stands in for it.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../src/store/postgres/postgresStore.js';
import { startSimulator } from '../../src/simulator/index.js';
import { cli, transferBody } from '../support/commandsSeed.js';
import { admin, postgresForTests, useTestDatabases } from '../support/pg.js';
import { expectSettledOnceEach, settleWithCommands, sigkillAndWait } from '../support/settle.js';
import { startServe } from '../support/serveProcess.js';
import { useCleanup } from '../support/cleanup.js';
import { sleep, waitFor } from '../support/waitFor.js';
import { orThrow } from '../../src/events/storeResult.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';

const { available } = await postgresForTests();

const adminQuery = (text: string) => admin((c) => c.query(text));

describe.skipIf(!available)('PostgreSQL restarted under a resending load', () => {
  const dbs = useTestDatabases();
  const cleanup = useCleanup();

  it('no GUID applied twice, E503 and no call for what was never claimed, /healthz 503 meanwhile, reconnects by itself; settled and clean afterwards', async () => {
    const sim = cleanup.use(await startSimulator({ port: 0, latencyMs: 30 }));
    const db = dbs.url();
    const name = new URL(db).pathname.slice(1);
    const relay = startServe(['--db', db, '--account-url', sim.url, '--timeout', '500ms', '--grace', '500ms']);
    cleanup.add(() => sigkillAndWait(relay.child));
    const url = await relay.ready;
    const terminate = () => adminQuery(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}' AND pid <> pg_backend_pid()`);

    // The channel: each GUID resent until it gets a definite answer (or 60 tries), 12 at a time, 40 ms apart (the
    // pace of the load is the point: sleep); new GUIDs after the first 150 until the outage is over, so that a fast
    // machine cannot settle them all before it.
    const guids = Array.from({ length: 150 }, (_, i) => `OUT-${i}`);
    const replies: Record<string, string[]> = {};
    let running = true;
    let outageOver = false;
    const channel = (async () => {
      const queue = [...guids];
      const next = (): string | undefined => {
        const g = queue.shift() ?? (outageOver ? undefined : `OUT-${guids.length}`);
        if (g !== undefined && !guids.includes(g)) guids.push(g);
        return g;
      };
      await Promise.all(Array.from({ length: 12 }, async () => {
        for (let g = next(); g !== undefined; g = next()) {
          const seen: string[] = (replies[g] = []);
          for (let n = 0; n < 60; n++) {
            try {
              const res = await fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: transferBody(g).body });
              const { code } = (await res.json()) as { code: string };
              seen.push(code);
              if (code === '0000') break;
            } catch {
              seen.push('fetch-failed');
            }
            await sleep(40);
          }
        }
      }));
      running = false;
    })();
    let channelEnded = 0;
    void channel.then(() => (channelEnded = Date.now()));
    const health: number[] = [];
    const prober = (async () => {
      while (running) {
        health.push((await fetch(`${url}/healthz`)).status);
        await sleep(50);
      }
    })();

    // The outage, once transfers go through: sessions killed every 100 ms for 1.5 s, then connections refused
    // until the relay has answered E503 and /healthz 503 for it, then killed again (its pace is the point: sleep).
    await waitFor(() => Object.values(replies).flat().includes('0000'), { what: 'the load under way' });
    for (let i = 0; i < 15; i++) {
      await terminate();
      await sleep(100);
    }
    await adminQuery(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    try {
      await terminate();
      const [replied, probed] = [Object.values(replies).flat().length, health.length];
      await waitFor(() => Object.values(replies).flat().slice(replied).includes('E503') && health.slice(probed).includes(503), { what: 'E503 and /healthz 503 while connections are refused' });
    } finally {
      await adminQuery(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    }
    for (let i = 0; i < 5; i++) {
      await terminate();
      await sleep(100);
    }
    outageOver = true;
    await channel;
    await prober;

    const all = Object.values(replies).flat();
    expect(all).toContain('E503');
    expect(health).toContain(503);
    // Reconnected without a restart: healthy again, and a new transfer goes through.
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const after = await fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: transferBody('OUT-AFTER').body });
    expect(((await after.json()) as { code: string }).code).toBe('0000');
    expect(sim.stats().doubleApplied).toEqual([]);

    // Settle what the outage left open, once every row's last Sent (all before the channel ended) is older than
    // --timeout 500 ms plus --grace 500 ms, the sweep's own condition (the point: sleep).
    await sleep(Math.max(0, channelEnded + 1050 - Date.now()));
    await settleWithCommands(db, sim.url, '500ms');

    const store = await openPostgresStore({ projection: ledgerProjection, url: db });
    try {
      await expectSettledOnceEach(store, sim, guids);
      expect(await orThrow(store.countLedger({ statuses: ['RECEIVED', 'SENT', 'UNKNOWN', 'FAILED'] }))).toBe(0);
      expect(await orThrow(store.verifyProjection())).toEqual([]);
    } finally {
      await store.close();
    }
    const verify = await cli(['rebuild', '--verify', '--db', db]);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    const counts = all.reduce<Record<string, number>>((m, c) => ({ ...m, [c]: (m[c] ?? 0) + 1 }), {});
    console.log(`replies during the outage: ${JSON.stringify(counts)}; /healthz 503 ${health.filter((s) => s === 503).length} of ${health.length}`);
  }, 120_000);
  it('the ledger table locked by another session past the claim\'s deadline: E503 within about the send window, no call, nothing written; once the lock is gone the resend goes through, once', async () => {
    const sim = await startSimulator({ port: 0 });
    cleanup.add(() => sim.close());
    const db = await dbs.fresh();
    // --grace 1s: a claim has half of it, 500 ms, to commit; the lock wait alone (--busy-timeout) would be an hour,
    // longer than the test may take: only the claim's deadline can answer.
    const relay = startServe(['--db', db, '--account-url', sim.url, '--timeout', '1s', '--grace', '1s', '--busy-timeout', '1h']);
    cleanup.add(() => sigkillAndWait(relay.child));
    const url = await relay.ready;
    const t = transferBody('LOCKED-1');
    const post = async () => {
      const res = await fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: t.body });
      return { status: res.status, code: ((await res.json()) as { code: string }).code };
    };
    // A rebuild elsewhere, or any long transaction holding the ledger table.
    const holder = new pg.Client({ connectionString: db });
    await holder.connect();
    cleanup.add(() => holder.end());
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE ledger IN EXCLUSIVE MODE');
    expect(await post()).toEqual({ status: 503, code: 'E503' });
    await holder.query('ROLLBACK');
    expect(sim.guidStats('LOCKED-1').calls).toBe(0);
    expect((await fetch(`${url}/v1/transfers/LOCKED-1`)).status).toBe(404);
    expect(await post()).toEqual({ status: 200, code: '0000' });
    expect(sim.guidStats('LOCKED-1').calls).toBe(1);
  });
});
