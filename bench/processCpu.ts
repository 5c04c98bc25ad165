/**
 * CPU time of processes on this machine, from `/proc` (Linux): what a benchmark reads of processes it did not start
 * in its own address space (a relay, the simulator, the PostgreSQL server).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** user + system clock ticks and the command name of one process, from `/proc/PID/stat`; null if it is gone. */
function stat(pid: number | string): { name: string; ticks: number } | null {
  try {
    const line = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The name is in parentheses and may hold spaces or ')' itself: the fields start after the last ')'.
    const fields = line.slice(line.lastIndexOf(')') + 2).split(' ');
    return { name: line.slice(line.indexOf('(') + 1, line.lastIndexOf(')')), ticks: Number(fields[11]) + Number(fields[12]) };
  } catch {
    return null;
  }
}

const US_PER_TICK = 10_000; // USER_HZ = 100

/** CPU time (user + system) a process has used so far, in µs; null where it is gone or /proc is not there. */
export function cpuOf(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  const s = stat(pid);
  return s === null ? null : s.ticks * US_PER_TICK;
}

/** CPU time (µs) used so far by every process whose name starts with `prefix` (e.g. `postgres`: the server's). */
export function cpuOfProcessesNamed(prefix: string): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    const s = stat(pid);
    if (s !== null && s.name.startsWith(prefix)) ticks += s.ticks;
  }
  return ticks * US_PER_TICK;
}
