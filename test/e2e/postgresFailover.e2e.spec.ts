/**
 * A real failover under load (issue #26, CONTRACT.md §9): a pg_auto_failover formation of this file's own (a monitor,
 * a primary and a synchronous secondary; fast failover timing, test/support/pgCluster.ts), two relays on the
 * formation's multi-host URL, a channel resending every GUID with each attempt sprayed at both relays at once, and
 * the primary stopped in the middle (`pg_autoctl stop --immediate`, then SIGKILL of its postmaster). What must hold:
 * no GUID applied twice; while no host takes writes, E503 and no call to the account system; both relays (and their
 * background settlers) on the new primary within the failover time plus a few seconds, without a restart; every
 * transfer settled afterwards and `rebuild --verify` clean. Prints the figures: time to a writable primary, the relays'
 * E503 window, time until both relays are ready again.
 */
import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { openStore } from '../../src/store/openStore.js';
import { orThrow } from '../../src/events/storeResult.js';
import { cli, transferBody } from '../support/commandsSeed.js';
import { clustersForTests, isWritable, startAutoFailoverFormation } from '../support/pgCluster.js';
import { expectSettledOnceEach, sigkillAndWait } from '../support/settle.js';
import { startServe } from '../support/serveProcess.js';
import { useCleanup } from '../support/cleanup.js';
import { sleep, waitFor } from '../support/waitFor.js';

const { available } = clustersForTests();
/**
 * The relays are ready again at most this long after the new primary takes writes: a relay judging the new timeline
 * waits up to 5 s for the other relays to vouch for their own writes (src/store/postgres/continuity.ts), then its
 * next check and /healthz follow.
 */
const FOLLOW_SLACK_MS = 10_000;

describe.skipIf(!available)('PostgreSQL failover under a resending load (pg_auto_failover)', () => {
  const cleanup = useCleanup();

  it('no GUID applied twice; E503 and no call while nothing is writable; the relays follow the new primary without a restart; all settled, rebuild --verify clean', async () => {
    const formation = await startAutoFailoverFormation({ timing: 'fast' });
    cleanup.add(() => formation.stop());
    const sim = cleanup.use(await startSimulator({ port: 0, latencyMs: 30 }));
    const db = formation.url;
    const relays = await Promise.all(
      [0, 1].map(async () => {
        const relay = startServe(['--db', db, '--account-url', sim.url, '--timeout', '500ms', '--grace', '1s', '--settle-every', '1s', '--min-age', '1s', '--log-level', 'info']);
        cleanup.add(() => sigkillAndWait(relay.child));
        return { ...relay, url: await relay.ready };
      }),
    );

    // The channel: each GUID resent until a definite answer (at most 80 tries, 100 ms apart), every try posted to
    // both relays at once (duplicates across them), 8 GUIDs at a time. The pace is the point: sleep.
    const guids = Array.from({ length: 120 }, (_, i) => `FO-${i}`);
    const replies: Array<{ at: number; guid: string; code: string }> = [];
    const post = async (url: string, guid: string) => {
      try {
        const res = await fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: transferBody(guid).body, signal: AbortSignal.timeout(5000) });
        return ((await res.json()) as { code: string }).code;
      } catch {
        return 'fetch-failed';
      }
    };
    let running = true;
    const channel = (async () => {
      const queue = [...guids];
      await Promise.all(Array.from({ length: 8 }, async () => {
        for (let g = queue.shift(); g !== undefined; g = queue.shift()) {
          for (let n = 0; n < 80; n++) {
            const codes = await Promise.all(relays.map((r) => post(r.url, g)));
            for (const code of codes) replies.push({ at: performance.now(), guid: g, code });
            if (codes.includes('0000')) break;
            await sleep(100);
          }
        }
      }));
      running = false;
    })();
    const health: Array<{ at: number; relay: number; status: number }> = [];
    const prober = (async () => {
      while (running) {
        for (const [i, r] of relays.entries()) {
          const status = await fetch(`${r.url}/healthz`, { signal: AbortSignal.timeout(5000) }).then((res) => res.status, () => 0);
          health.push({ at: performance.now(), relay: i, status });
        }
        await sleep(50);
      }
    })();

    await waitFor(() => replies.filter((r) => r.code === '0000').length >= 20, { timeoutMs: 30_000, what: 'the load under way' });
    const before = await formation.primary();
    const stopped = await formation.stopPrimary();
    // Once `pg_autoctl stop --immediate` has returned and the postmaster is SIGKILLed: the old primary takes nothing more.
    const stoppedAt = performance.now();
    expect(stopped.name).toBe(before?.name);
    // No call while no host takes writes: a claim committed before the stop has its call started within the send
    // window (half of --grace, 500 ms); from then until the new primary takes writes the account system hears nothing.
    const next = formation.nodes.find((n) => n.name !== stopped.name)!;
    await sleep(Math.max(0, stoppedAt + 700 - performance.now()));
    const callsAfterStop = sim.stats().calls;
    let callsWhileNone = callsAfterStop;
    let lastNoneWritableAt: number | null = null;
    for (;;) {
      if (await isWritable(next.port)) break;
      lastNoneWritableAt = performance.now();
      callsWhileNone = sim.stats().calls;
      await sleep(50);
      expect(performance.now() - stoppedAt, 'the secondary writable within 120 s').toBeLessThan(120_000);
    }
    const writableAt = performance.now();
    // The window was there to watch: nothing writable for a while after the send window, the channel still resending
    // through it. A promotion faster than that would leave "no call" proved over no time at all.
    expect(lastNoneWritableAt, 'a moment after the send window with no host taking writes').not.toBeNull();
    expect(running, 'the channel still resending while nothing was writable').toBe(true);
    const calledMeanwhile = Object.keys(callsWhileNone).filter((g) => callsWhileNone[g] !== callsAfterStop[g]);
    expect(calledMeanwhile, 'GUIDs called while no host took writes').toEqual([]);
    // Both relays ready again (their /healthz 200 after the stop) within the failover time plus a few seconds.
    await waitFor(() => relays.every((_, i) => health.some((h) => h.relay === i && h.at > writableAt && h.status === 200)), { timeoutMs: FOLLOW_SLACK_MS + 10_000, intervalMs: 50, what: 'both relays ready on the new primary' });
    const followedAt = Math.max(...relays.map((_, i) => health.find((h) => h.relay === i && h.at > writableAt && h.status === 200)!.at));
    expect(followedAt - writableAt).toBeLessThan(FOLLOW_SLACK_MS);
    await channel;
    await prober;

    const e503 = replies.filter((r) => r.code === 'E503' && r.at > stoppedAt);
    expect(e503.length, 'E503 while no host took writes').toBeGreaterThan(0);
    expect(health.some((h) => h.at > stoppedAt && h.status === 503)).toBe(true);
    // Every GUID got its definite answer in the end, through relays that were never restarted.
    for (const g of guids) expect(replies.some((r) => r.guid === g && r.code === '0000'), g).toBe(true);
    for (const r of relays) expect(r.child.exitCode).toBeNull();

    // The relays' background settlers (on the new primary too) settle what the failover left open.
    const store = await openStore(db, { create: false });
    try {
      await waitFor(async () => (await orThrow(store.countLedger({ statuses: ['RECEIVED', 'SENT', 'UNKNOWN', 'FAILED'] }))) === 0, { timeoutMs: 60_000, intervalMs: 250, what: 'every row settled by the relays' });
      await expectSettledOnceEach(store, sim, guids);
      expect(await orThrow(store.verifyProjection())).toEqual([]);
    } finally {
      await store.close();
    }
    const verify = await cli(['rebuild', '--verify', '--db', db]);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    const lastE503 = e503.length === 0 ? stoppedAt : Math.max(...e503.map((r) => r.at));
    const firstE503 = e503.length === 0 ? stoppedAt : Math.min(...e503.map((r) => r.at));
    const logs = relays.map((r) => r.output()).join('');
    expect(logs).toMatch(/no writable PostgreSQL host: tried 127\.0\.0\.1:\d+ \(/);
    expect(logs).toMatch(/the primary changed from 127\.0\.0\.1:\d+ to 127\.0\.0\.1:\d+/);
    // What the relays logged for their E503s (a cause per reply), for the figures line.
    const causes: Record<string, number> = {};
    for (const line of logs.split('\n')) {
      if (!line.includes('"reply":"E503"')) continue;
      const cause = String((JSON.parse(line) as { cause?: unknown }).cause ?? '').replace(/\d+(\.\d+)?/g, 'N').slice(0, 90);
      causes[cause] = (causes[cause] ?? 0) + 1;
    }
    const afterReady = e503.filter((r) => r.at > followedAt).length;
    console.info(
      `failover: E503 causes ${JSON.stringify(causes)}; ${afterReady} E503 after both relays were ready`,
    );
    console.info(
      `failover: secondary writable ${((writableAt - stoppedAt) / 1000).toFixed(1)} s after the stop; both relays ready ${((followedAt - stoppedAt) / 1000).toFixed(1)} s after it ` +
        `(${((followedAt - writableAt) / 1000).toFixed(1)} s after the new primary); E503 from +${((firstE503 - stoppedAt) / 1000).toFixed(1)} s to +${((lastE503 - stoppedAt) / 1000).toFixed(1)} s ` +
        `(${e503.length} replies); ${guids.length} GUIDs, ${replies.length} replies, ${sim.stats().totalCalls} calls, 0 applied twice`,
    );
  }, 300_000);
});
