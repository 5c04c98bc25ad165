import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The compiled child script (npm test builds first). */
export function childScript(name: string): string {
  const p = join(REPO_ROOT, 'dist', 'test', 'support', 'children', `${name}.js`);
  if (!existsSync(p)) throw new Error(`${p} is missing: run \`npm run build\` (npm test does it)`);
  return p;
}

export function runToEnd(child: ChildProcess): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export function spawnNode(script: string, args: string[]): ChildProcess {
  return spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Resolves when the child prints a line containing `marker`. */
export function waitForLine(child: ChildProcess, marker: string, timeoutMs = 20_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`no "${marker}" within ${timeoutMs} ms; got: ${buf}`)), timeoutMs);
    const onData = (d: Buffer) => {
      buf += d.toString();
      if (buf.includes(marker)) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (!buf.includes(marker)) reject(new Error(`child exited (${code}) before "${marker}"`));
    });
  });
}

/** A loopback port that nothing listens on right now. */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/**
 * The cross-process claim race: one child per argument list (`claimer`), all opened first and
 * started together on "go"; resolves with the GUIDs each child won. A child that fails rejects with its stderr;
 * children still running when it ends are killed.
 */
export async function claimRace(script: string, argsPerChild: readonly string[][]): Promise<string[][]> {
  const children = argsPerChild.map((args) => spawn(process.execPath, [childScript(script), ...args], { stdio: ['pipe', 'pipe', 'pipe'] }));
  try {
    await Promise.all(children.map((c) => waitForLine(c, 'ready')));
    const done = children.map((c) => runToEnd(c));
    for (const c of children) c.stdin!.write('go\n');
    return (await Promise.all(done)).map((r) => {
      if (r.code !== 0) throw new Error(`${script} exited ${r.code}: ${r.stderr}`);
      return (JSON.parse(r.stdout.split('\n').find((l) => l.startsWith('{'))!) as { won: string[] }).won;
    });
  } finally {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
}
