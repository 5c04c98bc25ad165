import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from './children.js';
import { transferBody } from './commandsSeed.js';

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

/** The bundled simulator as its own process (`guidgate simulator --port 0`); `ready` resolves once it listens. */
export function startSimulatorProcess(): { child: ChildProcess; ready: Promise<{ url: string; port: number; stats: (guid: string) => Promise<{ calls: number; applied: number }> }> } {
  const child = spawn(process.execPath, [BIN, 'simulator', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const ready = new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /simulator listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`simulator exited ${code}: ${out}`)));
  }).then((url) => ({
    url,
    port: Number(new URL(url).port),
    /** Its `GET /stats` for one GUID: the POSTs it received and the times it applied the transfer. */
    stats: async (guid: string) => {
      const s = (await (await fetch(`${url}/stats`)).json()) as { calls: Record<string, number>; applied: Record<string, number> };
      return { calls: s.calls[guid] ?? 0, applied: s.applied[guid] ?? 0 };
    },
  }));
  return { child, ready };
}

/** A channel's `POST /v1/transfers` of `guid` (the seed's body) to the relay at `url`: its status and code. */
export async function postTransfer(url: string, guid: string): Promise<{ readonly status: number; readonly code: string }> {
  const res = await fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: transferBody(guid).body });
  return { status: res.status, code: ((await res.json()) as { code: string }).code };
}

/** The row's status as the relay at `url` shows it (`GET /v1/transfers/{guid}`), or null when it has none. */
export async function transferStatus(url: string, guid: string): Promise<string | null> {
  const res = await fetch(`${url}/v1/transfers/${guid}`);
  return res.status === 200 ? ((await res.json()) as { status: string }).status : null;
}
