import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from './children.js';

export const BIN = join(REPO_ROOT, 'bin', 'guidgate');

/** `./bin/guidgate serve --port 0 --log-level warn ARGS`; `ready` resolves with its URL once it listens. */
export function startServe(args: string[], env: Record<string, string> = {}): { child: ChildProcess; ready: Promise<string>; output: () => string } {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--log-level', 'warn', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let out = '';
  const ready = new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)));
  });
  return { child, ready, output: () => out };
}

export const exited = (child: ChildProcess) => new Promise<number | null>((r) => (child.exitCode !== null ? r(child.exitCode) : child.on('exit', (code) => r(code))));

/** Resolves with the exit code once `child` has ended and all it printed has been read (its output closed). */
export const closed = (child: ChildProcess) =>
  new Promise<number | null>((r) => (child.exitCode !== null && (child.stdout?.closed ?? true) ? r(child.exitCode) : child.once('close', (code) => r(code))));
