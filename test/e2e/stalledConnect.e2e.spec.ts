/**
 * A pending connect must not be written after the call's deadline. Two relays on one SQLite ledger, the bundled
 * simulator they share, all real processes. The account system accepts nothing (stopped, its accept queue filled),
 * so relay A's connect for a transfer waits on a SYN the kernel dropped. A's event loop is then held inside a timer
 * callback (a preload, test/support/children/stallPreload.ts: a VM pause or a long GC as the process sees it) and
 * the account system let go: A's SYN is retransmitted and its connect completes in the kernel, A not looking. Past
 * the timeout plus the grace B's sweep makes the row UNKNOWN, B's settler finds it absent (FAILED), and the channel's
 * resend reaches B, which inquires again and sends attempt 2. Then A's loop comes back: libuv polls I/O before it
 * runs the timers due meanwhile, so A sees its connect completed before its deadline's timer runs. With the
 * deadline kept only by that timer, A wrote attempt 1 then: applied twice.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { BIN, postTransfer, startServe, startSimulatorProcess, transferStatus } from '../support/serveProcess.js';
import { childScript, runToEnd } from '../support/children.js';
import { sigkillAndWait } from '../support/settle.js';
import { socketsTo } from '../support/tcpStates.js';
import { useTempDir } from '../support/tmp.js';
import { sleep, waitFor } from '../support/waitFor.js';

/** Both relays: the sweep may take a row 4 s after its Sent, and the settler asks about it at once. */
const RELAY_FLAGS = ['--timeout', '3s', '--grace', '1s', '--min-age', '1s', '--settle-every', '200ms'];

describe('a connect completed while the relay\'s loop was held is not written after the deadline', () => {
  const tmp = useTempDir();
  const cleanup: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    while (cleanup.length) await cleanup.pop()!().catch(() => undefined);
  });

  const simulator = async () => {
    const { child, ready } = startSimulatorProcess();
    cleanup.push(() => sigkillAndWait(child));
    return { child, ...(await ready) };
  };

  /**
   * Stops `child` (SIGSTOP: it accepts nothing) and fills its listening socket's accept queue with connections of
   * our own, one at a time, until one's SYN is dropped (the queue is full; 512 with Node's backlog of 511).
   * `release` lets it run again (SIGCONT) and closes them.
   */
  const stopAndFill = async (child: ChildProcess, port: number) => {
    child.kill('SIGSTOP');
    const fillers: net.Socket[] = [];
    const release = () => {
      child.kill('SIGCONT');
      for (const s of fillers) s.destroy();
    };
    cleanup.push(async () => release());
    for (;;) {
      const sock = net.connect({ port, host: '127.0.0.1' });
      sock.on('error', () => undefined);
      fillers.push(sock);
      const connected = await Promise.race([new Promise<boolean>((r) => sock.once('connect', () => r(true))), sleep(300).then(() => false)]);
      // Not connected in 300 ms on loopback: its SYN dropped, as the kernel's own view must confirm.
      if (!connected && socketsTo('self', port).some((t) => t.localPort === sock.localPort && t.state === 'SYN_SENT')) break;
      if (fillers.length > 10_000) throw new Error('the accept queue never filled');
    }
    return release;
  };

  it('B settles and sends attempt 2; A, once its loop comes back to a completed connect, writes nothing: applied once', async () => {
    const sim = await simulator();
    const db = join(tmp(), 'ledger.db');
    const unstall = join(tmp(), 'unstall');
    const preload = pathToFileURL(childScript('stallPreload')).href;
    const a = startServe(['--db', db, '--account-url', sim.url, ...RELAY_FLAGS], {
      NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --import=${preload}`,
      GUIDGATE_TEST_STALL_UNTIL: unstall,
    });
    cleanup.push(() => sigkillAndWait(a.child));
    let aErr = '';
    a.child.stderr!.on('data', (d: Buffer) => (aErr += d.toString()));
    const b = startServe(['--db', db, '--account-url', sim.url, ...RELAY_FLAGS]);
    cleanup.push(() => sigkillAndWait(b.child));
    const [aUrl, bUrl] = await Promise.all([a.ready, b.ready]);

    const letSimGo = await stopAndFill(sim.child, sim.port);
    const guid = 'STALLED-CONNECT-1';
    const aReply = postTransfer(aUrl, guid);
    await waitFor(async () => (await transferStatus(bUrl, guid)) === 'SENT', { what: 'A to claim the transfer' });
    const aToSim = () => socketsTo(a.child.pid!, sim.port);
    await waitFor(() => aToSim().some((t) => t.state === 'SYN_SENT'), { what: 'A connecting, its SYN dropped' });
    a.child.kill('SIGUSR2');
    await waitFor(() => aErr.includes('stall: begin'), { what: 'A\'s loop held' });
    // Held before its deadline's timer ran: A's call is still connecting.
    expect(aToSim().map((t) => t.state), 'A must be held while its call is still connecting').toContain('SYN_SENT');
    letSimGo();
    // The next retransmission of A's SYN (~1 s, 3 s or 7 s after it connected) completes the connect; A does not look.
    const { localPort } = await waitFor(() => aToSim().find((t) => t.state === 'ESTABLISHED'), { timeoutMs: 20_000, what: 'A\'s connect completed in the kernel' });

    await waitFor(async () => (await transferStatus(bUrl, guid)) === 'FAILED', { timeoutMs: 30_000, what: 'B to sweep and settle the row FAILED' });
    expect(await sim.stats(guid)).toEqual({ calls: 0, applied: 0 });
    const resend = await postTransfer(bUrl, guid);
    expect(resend.code).toBe('0000');
    expect(await sim.stats(guid)).toEqual({ calls: 1, applied: 1 });

    await waitFor(() => socketsTo(sim.child.pid!, localPort).length === 1, { what: 'the simulator to accept A\'s connection' });
    writeFileSync(unstall, '');
    await waitFor(() => aErr.includes('stall: end'), { what: 'A\'s loop back' });
    const fromA = await aReply;
    // The simulator closes its end of A's connection once it has read all of it (and answered what it read).
    await waitFor(() => socketsTo(sim.child.pid!, localPort).length === 0, { what: 'the simulator done with A\'s connection' });
    expect(await sim.stats(guid), `A replied ${fromA.status} ${fromA.code}`).toEqual({ calls: 1, applied: 1 });
    const history = await runToEnd(spawn(process.execPath, [BIN, 'history', guid, '--db', db, '--json'], { stdio: ['ignore', 'pipe', 'pipe'] }));
    expect(history.code, history.stderr).toBe(0);
    const events = JSON.parse(history.stdout) as Array<{ type: string }>;
    expect(events.map((e) => e.type)).toEqual(['Claimed', 'Sent', 'TimedOut', 'Resolved', 'Sent', 'Answered']);
  }, 90_000);
});
