/**
 * Preloaded into a process (`node --import`, or `NODE_OPTIONS=--import=…`): on SIGUSR2 its event loop is held inside
 * a timer callback, as a VM pause or a long GC holds it, until the file named by GUIDGATE_TEST_STALL_UNTIL exists
 * (at most GUIDGATE_TEST_STALL_MAX_MS, default 60 s). It prints "stall: begin" and "stall: end" on stderr (a pipe:
 * written before the loop stops). When the loop comes back it polls I/O before it runs the timers due meanwhile.
 */
import { existsSync } from 'node:fs';

const until = process.env['GUIDGATE_TEST_STALL_UNTIL'];
const maxMs = Number(process.env['GUIDGATE_TEST_STALL_MAX_MS'] ?? 60_000);
if (until === undefined) throw new Error('stallPreload: GUIDGATE_TEST_STALL_UNTIL is not set');

process.on('SIGUSR2', () => {
  setTimeout(() => {
    process.stderr.write('stall: begin\n');
    const giveUp = performance.now() + maxMs;
    // Blocked, not spinning: the loop is held all the same, and the shared machine keeps its CPU.
    const pause = new Int32Array(new SharedArrayBuffer(4));
    while (!existsSync(until) && performance.now() < giveUp) Atomics.wait(pause, 0, 0, 5);
    process.stderr.write('stall: end\n');
  }, 0);
});
