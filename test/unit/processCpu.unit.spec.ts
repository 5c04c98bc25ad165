import { spawn } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cpuOf, cpuOfProcessesNamed } from '../../bench/processCpu.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

/** The benchmark's CPU figures per process come from these readings of /proc: they must follow real work. */
describe('bench CPU readings from /proc', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  /** Spins the CPU for about `ms` of wall time in this process. */
  const spin = (ms: number) => {
    const end = performance.now() + ms;
    let x = 0;
    while (performance.now() < end) x += Math.sqrt(x + 1);
    return x;
  };

  it('cpuOf a process grows by the CPU it spent, as the process itself counts it', () => {
    const before = cpuOf(process.pid)!;
    const own0 = process.cpuUsage();
    spin(300);
    const own = process.cpuUsage(own0);
    const spent = cpuOf(process.pid)! - before;
    // /proc counts in 10 ms ticks, and other threads of this process run meanwhile: within 60 ms of its own count.
    expect(spent).toBeGreaterThanOrEqual(own.user + own.system - 60_000);
    expect(spent).toBeLessThanOrEqual(own.user + own.system + 60_000);
    expect(cpuOf(undefined)).toBeNull();
    expect(cpuOf(2 ** 30)).toBeNull(); // no such process
  });

  it('cpuOfProcessesNamed sums the processes of that name, a busy child among them, and no others', async () => {
    // A shell started through a link of an unusual name: the kernel names the process after it (at most 15
    // characters), so it and nothing else on the machine is named so.
    const probe = join(tmp(), 'ggcpuprobe');
    symlinkSync('/bin/sh', probe);
    const child = spawn(probe, ['-c', 'while :; do :; done'], { stdio: 'ignore' });
    cleanup.add(() => child.kill('SIGKILL'));
    // Running (it has used a tick of CPU), then its CPU keeps growing: 50 ms more of it is read.
    const start = await waitFor(() => cpuOfProcessesNamed('ggcpuprobe'), { what: 'the probe spinning' });
    await waitFor(() => cpuOfProcessesNamed('ggcpuprobe') - start > 50_000, { what: 'the probe using 50 ms more CPU' });
    expect(cpuOfProcessesNamed('no-such-process-name-here')).toBe(0);
  });
});
