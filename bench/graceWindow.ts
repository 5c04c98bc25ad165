/**
 * How many claims miss their send window (half of --grace) under load: the bundled simulator and two `serve`
 * processes on one ledger (a SQLite file of its own, or a database of its own on the PostgreSQL server `--db` names),
 * `--inflight` channels sending new GUIDs to either relay for `--seconds`. Prints, per grace, the replies by code:
 * a claim that missed its window is E503 (its write's deadline) or E901 (acknowledged late: `withheld`, not called).
 *
 * Usage: node dist/bench/graceWindow.js [--grace 200ms,1s] [--seconds 15] [--inflight 50] [--db postgres://…]
 */
import type { ChildProcess } from 'node:child_process';
import { startListening } from './listening.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchArgs } from './benchArgs.js';
import { Agent, request } from 'undici';
import { throwawayDatabase } from './throwawayDatabase.js';

const { values } = benchArgs({
  run: 'node dist/bench/graceWindow.js',
  about: 'How many claims miss their send window (half of --grace) under load: two serve processes on one ledger, channels sending new GUIDs to either; the replies by code, per grace.',
  options: {
    grace: { type: 'string', default: '200ms,1s', value: 'LIST', help: 'the --grace values to try, separated by commas' },
    seconds: { type: 'string', default: '15', value: 'N', help: 'seconds of load per grace' },
    inflight: { type: 'string', default: '50', value: 'N', help: 'channels sending at once' },
    db: { type: 'string', value: 'postgres://…', help: 'a PostgreSQL server to make a throwaway ledger database on (default: a SQLite file of its own)' },
  },
});

const BIN = resolve(import.meta.dirname, '..', '..', 'bin', 'guidgate');

/** `guidgate ARGS`, resolved with the URL it prints once it listens. */
function start(args: string[], children: ChildProcess[]): Promise<string> {
  const { child, listening } = startListening([BIN, ...args]);
  children.push(child);
  return listening;
}

async function drive(urls: readonly string[], seconds: number, inflight: number): Promise<Record<string, number>> {
  const agent = new Agent({ connections: inflight, pipelining: 1 });
  const codes: Record<string, number> = {};
  const end = performance.now() + seconds * 1000;
  let n = 0;
  await Promise.all(Array.from({ length: inflight }, async (_, w) => {
    while (performance.now() < end) {
      const i = n++;
      const res = await request(`${urls[i % urls.length]}/v1/transfers`, {
        dispatcher: agent, method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ guid: `GW-${process.pid}-${w}-${i}`, from: 'ACC-1', to: 'ACC-2', amount: 1 }),
      });
      const { code } = (await res.body.json()) as { code: string };
      codes[code] = (codes[code] ?? 0) + 1;
    }
  }));
  await agent.close();
  return codes;
}

for (const grace of values.grace.split(',')) {
  const children: ChildProcess[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'guidgate-grace-'));
  const pgDb = values.db === undefined ? null : await throwawayDatabase(values.db, 'grace');
  try {
    const db = pgDb?.url ?? join(dir, 'ledger.db');
    const sim = (await start(['simulator', '--port', '0'], children)).replace(/\/$/, '');
    const relay = ['serve', '--port', '0', '--db', db, '--account-url', sim, '--grace', grace, '--log-level', 'error'];
    // One after the other: the first creates the ledger.
    const urls = [await start(relay, children)];
    urls.push(await start(relay, children));
    const codes = await drive(urls, Number(values.seconds), Number(values.inflight));
    const total = Object.values(codes).reduce((a, b) => a + b, 0);
    const missed = (codes['E503'] ?? 0) + (codes['E901'] ?? 0);
    console.log(`--grace ${grace} (${pgDb === null ? 'SQLite' : 'PostgreSQL'}): ${total} transfers, ${JSON.stringify(codes)}; missed the window: ${((100 * missed) / total).toFixed(2)}%`);
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.once('exit', r)))));
    await pgDb?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
