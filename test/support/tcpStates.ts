import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { waitFor } from './waitFor.js';

/** The kernel's TCP states as /proc/net/tcp numbers them (include/net/tcp_states.h). */
const STATES: Readonly<Record<string, string>> = { '01': 'ESTABLISHED', '02': 'SYN_SENT', '03': 'SYN_RECV', '04': 'FIN_WAIT1', '05': 'FIN_WAIT2', '06': 'TIME_WAIT', '07': 'CLOSE', '08': 'CLOSE_WAIT', '09': 'LAST_ACK', '0A': 'LISTEN', '0B': 'CLOSING' };

/** One TCP socket: its inode, its kernel state, its local port. */
export interface TcpSocket {
  readonly inode: string;
  /** `SYN_SENT` while its SYN goes unanswered, `ESTABLISHED` once the handshake is done (whether or not the process has noticed), … */
  readonly state: string;
  readonly localPort: number;
}

/**
 * The TCP sockets process `pid` holds open to remote port `port`. Read from /proc (Linux) and synchronous, so that a
 * test can ask from inside a blocked event loop.
 */
export function socketsTo(pid: number | 'self', port: number): TcpSocket[] {
  const inodes = new Set<string>();
  const fdDir = `/proc/${pid}/fd`;
  for (const fd of readdirSync(fdDir)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`${fdDir}/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed between the listing and the read
    }
  }
  const found: TcpSocket[] = [];
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'latin1');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      const [local, remote, state, inode] = [cols[1], cols[2], cols[3], cols[9]];
      if (local === undefined || remote === undefined || state === undefined || inode === undefined || !inodes.has(inode)) continue;
      if (portOf(remote) === port) found.push({ inode, state: STATES[state] ?? state, localPort: portOf(local) });
    }
  }
  return found;
}

/** The port of an address as /proc/net/tcp writes it (`0100007F:1F90`). */
const portOf = (address: string): number => Number.parseInt(address.split(':')[1] ?? '', 16);

/**
 * Waits until process `pid` holds no connection to `port` it could still send on: none open, and none the other end
 * closed that the process has not yet noticed (CLOSE_WAIT). After the account system closes idle keep-alive sockets,
 * this is when the relay's pool has seen the close, so that its next call opens a new connection (and is refused)
 * instead of writing to a closed one (a reset, E901).
 */
export const noConnectionLeft = async (pid: number, port: number): Promise<void> => {
  await waitFor(() => !socketsTo(pid, port).some((s) => s.state === 'ESTABLISHED' || s.state === 'CLOSE_WAIT'), {
    what: `process ${pid} to have no connection left to port ${port}`,
  });
};
