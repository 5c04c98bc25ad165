import { spawn, spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from './waitFor.js';

/** python3 (Debian's, when there: it starts faster than a version manager's shim), or null. */
export function python3(): string | null {
  for (const candidate of ['/usr/bin/python3', 'python3']) if (spawnSync(candidate, ['--version']).status === 0) return candidate;
  return null;
}

/** One sd_notify message: its `KEY=value` lines, in order. */
export type NotifyMessage = ReadonlyArray<readonly [string, string]>;

export interface NotifySocket {
  /** NOTIFY_SOCKET for the process under test. */
  readonly path: string;
  /** Every message received so far, in order (systemd-notify's barriers left out). */
  messages(): NotifyMessage[];
  /** The first message with `key` (`READY`, `WATCHDOG`, `STOPPING`, `STATUS`), awaited. */
  awaitKey(key: string, opts?: { timeoutMs?: number }): Promise<NotifyMessage>;
  close(): Promise<void>;
}

const RECEIVER = `
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
print('bound', flush=True)
while True:
    # recv without room for ancillary data: the file descriptor systemd-notify passes for its barrier is closed,
    # which is what tells it that the message was read (as systemd does).
    data = s.recv(65536)
    print(json.dumps(data.decode('utf-8', 'replace')), flush=True)
`;

/**
 * A unix datagram socket of the test's own, bound as systemd binds NOTIFY_SOCKET for a Type=notify unit (python3
 * binds it: Node has no datagram sockets of that family). Resolves once it is bound.
 */
export async function bindNotifySocket(dir: string, python: string): Promise<NotifySocket> {
  const path = join(dir, 'notify.sock');
  const script = join(dir, 'notify-receiver.py');
  writeFileSync(script, RECEIVER);
  const child = spawn(python, ['-u', script, path], { stdio: ['ignore', 'pipe', 'pipe'] });
  const received: NotifyMessage[] = [];
  let out = '';
  let bound = false;
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    let nl: number;
    while ((nl = out.indexOf('\n')) >= 0) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      if (line === 'bound') {
        bound = true;
        continue;
      }
      const text = JSON.parse(line) as string;
      // systemd-notify's barrier (BARRIER=1 with a file descriptor) follows each message: not a message of serve's.
      if (text === 'BARRIER=1') continue;
      received.push(text.split('\n').filter((l) => l !== '').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] as const));
    }
  });
  await waitFor(() => (child.exitCode !== null ? Promise.reject(new Error(`the notify receiver exited: ${stderr}`)) : bound && existsSync(path)), { what: 'the notify socket bound' });
  const find = (key: string) => received.find((m) => m.some(([k]) => k === key));
  return {
    path,
    messages: () => [...received],
    awaitKey: (key, opts = {}) => waitFor(() => find(key), { timeoutMs: opts.timeoutMs ?? 15_000, what: `a notify message with ${key}` }),
    async close() {
      if (child.exitCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await gone;
    },
  };
}

/** The value of `key` in a message, or undefined. */
export const valueOf = (message: NotifyMessage, key: string): string | undefined => message.find(([k]) => k === key)?.[1];
