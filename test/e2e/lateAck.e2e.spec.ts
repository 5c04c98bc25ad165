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
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BIN, startServe } from '../support/serveProcess.js';
import { runToEnd } from '../support/children.js';
import { sigkillAndWait } from '../support/settle.js';
import { transferBody } from '../support/commandsSeed.js';
import { postgresForTests, useTestDatabases } from '../support/pg.js';
import { startHoldingProxy } from '../support/pgHoldingProxy.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

const { available: pgAvailable } = await postgresForTests();

/** Both relays, as the reproduction runs them: a 10-second scenario. */
const RELAY_FLAGS = ['--timeout', '1s', '--grace', '1s', '--min-age', '2s', '--settle-every', '200ms'];

interface Reply {
  readonly status: number;
  readonly code: string;
}

async function post(url: string, guid: string): Promise<Reply> {
  const res = await fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: transferBody(guid).body });
  return { status: res.status, code: ((await res.json()) as { code: string }).code };
}

async function rowStatus(url: string, guid: string): Promise<string | null> {
  const res = await fetch(`${url}/v1/transfers/${guid}`);
  return res.status === 200 ? ((await res.json()) as { status: string }).status : null;
}

/** The scenario's lines of `guidgate history GUID --json`: each event's type and data. */
async function history(db: string, guid: string): Promise<Array<{ type: string; data: Record<string, unknown> }>> {
  const r = await runToEnd(spawn(process.execPath, [BIN, 'history', guid, '--db', db, '--json'], { stdio: ['ignore', 'pipe', 'pipe'] }));
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Array<{ type: string; data: Record<string, unknown> }>;
}

describe('a claim acknowledged late is not sent (issue #24)', () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    while (cleanup.length) await cleanup.pop()!().catch(() => undefined);
  });

  /** The bundled simulator as its own process, shared by both relays: `GET /stats` counts POSTs per GUID. */
  const simulator = async (): Promise<{ url: string; calls: (guid: string) => Promise<number> }> => {
    const child = spawn(process.execPath, [BIN, 'simulator', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    cleanup.push(() => sigkillAndWait(child));
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /simulator listening on (http:\/\/\S+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.once('exit', (code) => reject(new Error(`simulator exited ${code}: ${out}`)));
    });
    const calls = async (guid: string) => ((await (await fetch(`${url}/stats`)).json()) as { calls: Record<string, number> }).calls[guid] ?? 0;
    return { url, calls };
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
    await waitFor(async () => (await rowStatus(b, guid)) === 'FAILED', { timeoutMs: 30_000, what: 'B to settle the row FAILED' });
    const resend = await post(b, guid);
    expect(resend.code).toBe('0000');
    expect(await calls(guid)).toBe(1);
    letAGo();
    // A's own reply to the channel: E503 (its claim's deadline) or E901 (acknowledged past the send window), never a call.
    const fromA = await aReply;
    return { resend, fromA };
  }

  describe.skipIf(!pgAvailable)('PostgreSQL: A\'s COMMIT reaches the server, its acknowledgement is held by a proxy', () => {
    const dbs = useTestDatabases();

    it('B settles and sends attempt 2; A, once its acknowledgement arrives, does not call: the GUID is POSTed exactly once', async () => {
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
        const reply = post(a.url, guid);
        if ((await Promise.race([armed.holding.then(() => 'held' as const), reply.then(() => 'answered' as const)])) === 'held') {
          [aReply, hold] = [reply, armed];
        } else armed.release();
      }
      if (aReply === null || hold === null) throw new Error('A never reached the COMMIT of its claim in 5 tries');
      const held = hold;
      const { fromA } = await whileAIsInTheDark(b.url, guid, sim.calls, () => held.release(), aReply);
      // Whatever A still had in flight has ended by now (its reply came after it); nothing called attempt 1.
      expect(await sim.calls(guid)).toBe(1);
      expect(['E503', 'E901']).toContain(fromA.code);
      expect((await history(db, guid)).map((e) => e.type)).toEqual(['Claimed', 'Sent', 'TimedOut', 'Resolved', 'Sent', 'Answered']);
      expect(await rowStatus(b.url, guid)).toBe('DONE');
    }, 90_000);
  });

  describe('SQLite: A stopped (gdb) at the fdatasync of its claim\'s commit', () => {
    const tmp = useTempDir();

    it('B settles and sends attempt 2; A, once it runs again, does not call: the GUID is POSTed exactly once', async () => {
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
      const aReply = post(a.url, guid);
      for (;;) {
        await stopped.then(() => undefined);
        if ((await rowStatus(b.url, guid)) === 'SENT') break;
        await gdb.continueUntilStop();
      }
      // A is stopped with its claim committed (B reads it) and not yet acknowledged to it.
      const { fromA } = await whileAIsInTheDark(b.url, guid, sim.calls, () => void gdb.quit(), aReply);
      expect(await sim.calls(guid)).toBe(1);
      expect(['E503', 'E901']).toContain(fromA.code);
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
