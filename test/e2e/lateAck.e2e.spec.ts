/**
 * Issue #24: a claim acknowledged late must not be sent. Two relays on one ledger, real processes throughout (two
 * `serve`, the bundled `simulator` they share, `history`). Relay A's claim of a GUID is committed, but A hears of it
 * only much later; meanwhile relay B's sweep makes the row UNKNOWN, its settler finds it absent (FAILED), and the
 * channel's resend reaches B, which inquires again and sends attempt 2. Then A hears of its claim. Before the send
 * window, A called attempt 1 then: applied twice, and its answer dropped as a stale attempt.
 *
 * - PostgreSQL: a TCP proxy between A and the server forwards A's COMMIT and holds the server's reply
 *   (test/support/pgHoldingProxy.ts): a partition, a stalled synchronous standby.
 * - SQLite: A stopped by gdb at the fdatasync of its claim's commit (the commit is in the WAL, visible to B, not yet
 *   acknowledged to A): a process frozen after its commit, or a disk that takes that long.
 *
 * What A does, on both stores: its claim's deadline (the send window, half of --grace) passes long before the
 * acknowledgement comes, so A gives the claim up and answers E503; the write's late result is dropped. The other
 * late-acknowledgement branch, a claim acknowledged within its deadline yet past the send window (E901, the row left
 * SENT uncalled, counted as withheld claim-too-slow), needs an acknowledgement within a hair of the deadline, which
 * these stalls of seconds never give; the schedules (test/property/regressions.spec.ts) run that one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BIN, postTransfer, startServe, startSimulatorProcess, transferStatus } from '../support/serveProcess.js';
import { runToEnd } from '../support/children.js';
import { sigkillAndWait } from '../support/settle.js';
import { postgresForTests, useTestDatabases } from '../support/pg.js';
import { startHoldingProxy } from '../support/pgHoldingProxy.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

const { available: pgAvailable } = await postgresForTests();

/** Both relays, as the reproduction runs them: a 10-second scenario. */
const RELAY_FLAGS = ['--timeout', '1s', '--grace', '1s', '--min-age', '2s', '--settle-every', '200ms'];

type Reply = Awaited<ReturnType<typeof postTransfer>>;

/** The scenario's lines of `guidgate history GUID --json`: each event's type and data. */
async function history(db: string, guid: string): Promise<Array<{ type: string; data: Record<string, unknown> }>> {
  const r = await runToEnd(spawn(process.execPath, [BIN, 'history', guid, '--db', db, '--json'], { stdio: ['ignore', 'pipe', 'pipe'] }));
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Array<{ type: string; data: Record<string, unknown> }>;
}

/** A's reply was the claim deadline's E503, and A logged that cause for it. */
function expectGaveUpAtDeadline(fromA: Reply, output: string): void {
  expect(fromA.code).toBe('E503');
  expect(output).toMatch(/"reply":"E503".*did not complete within \d+ ?ms/);
}

/** Claims A acknowledged past the send window and so did not call (the E901 branch): none in this scenario. */
async function withheldTooSlow(relayUrl: string): Promise<number> {
  const text = await (await fetch(`${relayUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('guidgate_sends_withheld_total{') && l.includes('reason="claim-too-slow"'));
  expect(line, 'the claim-too-slow series on /metrics').toBeDefined();
  return Number(line!.split(' ').at(-1));
}

describe('a claim acknowledged late is not sent (issue #24)', () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    while (cleanup.length) await cleanup.pop()!().catch(() => undefined);
  });

  /** The bundled simulator as its own process, shared by both relays: `GET /stats` counts POSTs per GUID. */
  const simulator = async (): Promise<{ url: string; calls: (guid: string) => Promise<number> }> => {
    const { child, ready } = startSimulatorProcess();
    cleanup.push(() => sigkillAndWait(child));
    const { url, stats } = await ready;
    return { url, calls: async (guid: string) => (await stats(guid)).calls };
  };
  const relay = async (db: string, accountUrl: string, extra: string[] = []): Promise<{ url: string; child: ChildProcess; output: () => string }> => {
    const r = startServe(['--db', db, '--account-url', accountUrl, ...RELAY_FLAGS, ...extra]);
    cleanup.push(() => sigkillAndWait(r.child));
    return { url: await r.ready, child: r.child, output: r.output };
  };

  /**
   * The rest of the scenario, the same for both stores, once A's claim is committed and A does not know it: B sweeps
   * and settles it, the channel's resend reaches B and is sent as attempt 2; then A is let go.
   */
  async function whileAIsInTheDark(b: string, guid: string, calls: (g: string) => Promise<number>, letAGo: () => void, aReply: Promise<Reply>) {
    expect(await calls(guid)).toBe(0);
    // Past the timeout plus the grace B's sweep makes it UNKNOWN; past --min-age B's settler finds it absent.
    await waitFor(async () => (await transferStatus(b, guid)) === 'FAILED', { timeoutMs: 30_000, what: 'B to settle the row FAILED' });
    const resend = await postTransfer(b, guid);
    expect(resend.code).toBe('0000');
    expect(await calls(guid)).toBe(1);
    letAGo();
    const fromA = await aReply;
    return { resend, fromA };
  }

  describe.skipIf(!pgAvailable)('PostgreSQL: A\'s COMMIT reaches the server, its acknowledgement is held by a proxy', () => {
    const dbs = useTestDatabases();

    it('A gives up its claim at the deadline (E503) before its acknowledgement comes; B settles and sends attempt 2; once the acknowledgement reaches A, still no call: the GUID is POSTed exactly once', async () => {
      const sim = await simulator();
      const db = dbs.url();
      const proxy = await startHoldingProxy({ host: new URL(db).hostname, port: Number(new URL(db).port || 5432) });
      cleanup.push(() => proxy.close());
      const b = await relay(db, sim.url);
      const a = await relay(proxy.through(db), sim.url);

      // A's claim must reach COMMIT for its reply to be held: on a loaded machine it may miss its own deadline first
      // (E503, rolled back, nothing held), and then the scenario is played again with another GUID.
      let guid = '';
      let aReply: Promise<Reply> | null = null;
      let hold: ReturnType<typeof proxy.arm> | null = null;
      for (let round = 1; round <= 5 && aReply === null; round++) {
        guid = `LATE-ACK-PG-${round}`;
        const armed = proxy.arm(guid);
        const reply = postTransfer(a.url, guid);
        if ((await Promise.race([armed.holding.then(() => 'held' as const), reply.then(() => 'answered' as const)])) === 'held') {
          [aReply, hold] = [reply, armed];
        } else armed.release();
      }
      if (aReply === null || hold === null) throw new Error('A never reached the COMMIT of its claim in 5 tries');
      const held = hold;
      const { fromA } = await whileAIsInTheDark(b.url, guid, sim.calls, () => held.release(), aReply);
      // Whatever A still had in flight has ended by now (its reply came after it); nothing called attempt 1.
      expect(await sim.calls(guid)).toBe(1);
      expectGaveUpAtDeadline(fromA, a.output());
      expect((await history(db, guid)).map((e) => e.type)).toEqual(['Claimed', 'Sent', 'TimedOut', 'Resolved', 'Sent', 'Answered']);
      expect(await transferStatus(b.url, guid)).toBe('DONE');
      expect(await withheldTooSlow(a.url)).toBe(0);
    }, 90_000);
  });

  describe('SQLite: A stopped (gdb) at the fdatasync of its claim\'s commit', () => {
    const tmp = useTempDir();

    it('A, run again long after its deadline, gives its claim up (E503); B has settled it and sent attempt 2: the GUID is POSTed exactly once', async () => {
      const sim = await simulator();
      const db = join(tmp(), 'ledger.db');
      // A long busy timeout: the deadline of A's claim is not what keeps it from calling (it was busy + 1 s before #24).
      const a = await relay(db, sim.url, ['--busy-timeout', '60s']);
      const b = await relay(db, sim.url);
      const gdb = await attachGdb(a.child.pid!);
      cleanup.push(() => gdb.quit());

      // The breakpoint may catch another sync of A's first (none is expected on an idle relay): then the claim is not
      // in the file yet, and the next one is awaited.
      const guid = 'LATE-ACK-SQLITE-1';
      await gdb.command('break fdatasync');
      const stopped = gdb.continueUntilStop();
      const aReply = postTransfer(a.url, guid);
      for (;;) {
        await stopped.then(() => undefined);
        if ((await transferStatus(b.url, guid)) === 'SENT') break;
        await gdb.continueUntilStop();
      }
      // A is stopped with its claim committed (B reads it) and not yet acknowledged to it.
      const { fromA } = await whileAIsInTheDark(b.url, guid, sim.calls, () => void gdb.quit(), aReply);
      expect(await sim.calls(guid)).toBe(1);
      expectGaveUpAtDeadline(fromA, a.output());
      expect(await withheldTooSlow(a.url)).toBe(0);
      const events = await history(db, guid);
      expect(events.map((e) => e.type)).toEqual(['Claimed', 'Sent', 'TimedOut', 'Resolved', 'Sent', 'Answered']);
    }, 90_000);
  });
});

/** gdb attached to `pid`, driven line by line; `quit` detaches and lets the process run on. */
async function attachGdb(pid: number) {
  const child = spawn('gdb', ['-q', '-nx', '-p', String(pid)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  /** Waits until the output since `from` matches `pattern`. */
  const awaitOutput = (from: number, pattern: RegExp, what: string) =>
    waitFor(() => pattern.test(out.slice(from)), { timeoutMs: 30_000, what }).catch((err: unknown) => {
      throw new Error(`${err instanceof Error ? err.message : String(err)}; gdb said: ${out.slice(from).slice(-2000)}`);
    });
  await awaitOutput(0, /\(gdb\) /, 'gdb to attach');
  let quitting: Promise<void> | null = null;
  return {
    async command(line: string): Promise<void> {
      const from = out.length;
      child.stdin!.write(`${line}\n`);
      await awaitOutput(from, /\(gdb\) /, `gdb: ${line}`);
    },
    /** `continue`, resolved once the process stopped at a breakpoint. */
    continueUntilStop(): Promise<void> {
      const from = out.length;
      child.stdin!.write('continue\n');
      return awaitOutput(from, /hit Breakpoint \d+[\s\S]*\(gdb\) /, 'the breakpoint').then(() => undefined);
    },
    quit(): Promise<void> {
      quitting ??= (async () => {
        if (child.exitCode === null) {
          child.stdin!.write('delete\ndetach\nquit\n');
          child.stdin!.end();
        }
        await gone;
      })();
      return quitting;
    },
  };
}
