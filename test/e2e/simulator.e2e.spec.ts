import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useTempDir } from '../support/tmp.js';

// Drives `guidgate simulator` as a user would: the ready line, real HTTP, and a clean exit on SIGTERM.
const root = resolve(import.meta.dirname, '..', '..');
const tmp = useTempDir();

describe('guidgate simulator', () => {
  it('prints the ready line, serves, persists to --db, and exits 0 on SIGTERM', async () => {
    const db = join(tmp(), 'sim.db');
    const child = spawn(process.execPath, [join(root, 'bin', 'guidgate'), 'simulator', '--port', '0', '--db', db], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));

    const url = await new Promise<string>((res, rej) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /^simulator listening on (http:\/\/127\.0\.0\.1:\d+)\n/m.exec(out);
        if (m?.[1] !== undefined) res(m[1]);
      });
      void exited.then((code) => rej(new Error(`exited early (${code}): ${stderr}`)));
    });

    const body = JSON.stringify({ guid: 'cli-1', from: 'A', to: 'B', amount: 7 });
    const r1 = await fetch(`${url}/transfer`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    expect(((await r1.json()) as { code: string }).code).toBe('0000');
    await fetch(`${url}/transfer`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    const stats = (await (await fetch(`${url}/stats/cli-1`)).json()) as { calls: number; applied: number };
    expect(stats).toEqual({ guid: 'cli-1', calls: 2, applied: 2 });

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(existsSync(db)).toBe(true);
  }, 30_000);
});
