/**
 * An inquiry storm (CONTRACT.md §7, `--inquiry-rate`): after an outage, `--rows` UNKNOWN rows all due at once (last
 * sent ten minutes ago, half of them applied by the account system, half never arrived). A `guidgate serve` process
 * settles them in the background (`--settle-every 1s`, default `--min-age`) under each `--rate`; the bundled
 * simulator, in this process, counts the inquiries it receives, and the most within any one second.
 * Prints, per rate: the time from `listening` until no row is UNKNOWN, the inquiries the account system received,
 * their peak per second, and the mean rate.
 *
 * Usage: node dist/bench/inquiryStorm.js [--rows 10000] [--rate 50/s,0]
 */
import type { ChildProcess } from 'node:child_process';
import { startListening } from './listening.js';
import { hostname } from 'node:os';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Agent, request } from 'undici';
import { createWriteEngine, type WriteOp } from '../src/store/sqlite/writeEngine.js';
import { openDatabase } from '../src/store/sqlite/openDatabase.js';
import { fingerprintOf } from '../src/contract/transferRequest.js';
import { ledgerProjection } from '../src/projections/ledgerProjection.js';
import { benchArgs } from './benchArgs.js';
import { startSimulator, type Simulator } from '../src/simulator/index.js';

const { values } = benchArgs({
  run: 'node dist/bench/inquiryStorm.js',
  about: 'An inquiry storm: UNKNOWN rows all due at once, settled by `guidgate serve` under each --inquiry-rate; per rate the time until none is UNKNOWN, the inquiries the account system received, their peak per second and mean rate.',
  options: {
    rows: { type: 'string', default: '10000', value: 'N', help: 'UNKNOWN rows, all due at once' },
    rate: { type: 'string', default: '50/s,0', value: 'LIST', help: "the --inquiry-rate values to run, separated by commas (0: no limit)" },
  },
});
const ROWS = Number(values.rows);
const BIN = resolve(import.meta.dirname, '..', '..', 'bin', 'guidgate');
/** The rows' last Sent: long enough ago that every one is past the default --min-age (60s) when serve starts. */
const SENT_AGO_MS = 10 * 60_000;

const body = (guid: string) => `{"guid":"${guid}","from":"ACC-1001","to":"ACC-2002","amount":100,"currency":"CNY"}`;

/** `rows` UNKNOWN rows, written through the store's own write path (as fillLedger.ts does), sent SENT_AGO_MS ago. */
function seedUnknownRows(path: string, guids: readonly string[]): void {
  const db = openDatabase({ path, synchronous: 'NORMAL', busyTimeoutMs: 5000 });
  db.pragma('synchronous = OFF'); // a throwaway file
  const engine = createWriteEngine(db, ledgerProjection, 5000);
  const actor = { by: 'serve', host: hostname(), pid: process.pid, params: { timeoutMs: 3000, maxAttempts: 5, minAgeMs: 60_000 } };
  const run = (ops: WriteOp[]): void => {
    for (const o of engine.run(ops)) if (!o.ok || (o.value as { kind?: string }).kind !== 'applied') throw new Error(`seed refused: ${JSON.stringify(o)}`);
  };
  const now = Date.now() - SENT_AGO_MS;
  for (let i = 0; i < guids.length; i += 5000) {
    const batch = guids.slice(i, i + 5000);
    run(batch.map((guid) => ({ op: 'execute', guid, now, actor, command: { type: 'Submit', request: body(guid), fingerprint: fingerprintOf({ guid, from: 'ACC-1001', to: 'ACC-2002', amount: 100, currency: 'CNY' }), timeoutMs: 3000, maxAttempts: 5 } })));
    run(batch.map((guid) => ({ op: 'execute', guid, now, actor, command: { type: 'RecordTimeout', attempt: 1, reason: 'timeout' } })));
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

/** The account system applies every other transfer (their answers were lost in the outage). */
async function applyHalf(sim: Simulator, guids: readonly string[]): Promise<void> {
  const agent = new Agent({ connections: 16 });
  let next = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < guids.length) {
      const guid = guids[next]!;
      next += 2;
      await (await request(`${sim.url}/transfer`, { dispatcher: agent, method: 'POST', body: body(guid), headers: { 'content-type': 'application/json' } })).body.text();
    }
  }));
  await agent.close();
}

const startServe = (args: string[]): { child: ChildProcess; listening: Promise<string> } => startListening([BIN, 'serve', ...args]);

async function unknownRows(url: string): Promise<number> {
  const res = await request(`${url}/v1/stats`);
  return ((await res.body.json()) as { statuses: { UNKNOWN: { count: number } } }).statuses.UNKNOWN.count;
}

async function storm(rate: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'guidgate-storm-'));
  const sim = await startSimulator({ port: 0 });
  try {
    const guids = Array.from({ length: ROWS }, (_, i) => `storm-${String(i).padStart(6, '0')}`);
    seedUnknownRows(join(dir, 'ledger.db'), guids);
    await applyHalf(sim, guids);
    const before = sim.inquiryLoad().total;
    const serve = startServe(['--db', join(dir, 'ledger.db'), '--account-url', sim.url, '--port', '0', '--settle-every', '1s', '--inquiry-rate', rate, '--log-level', 'warn']);
    const url = await serve.listening;
    const started = performance.now();
    let left = ROWS;
    while (left > 0) {
      await new Promise((r) => setTimeout(r, 250));
      left = await unknownRows(url);
    }
    const seconds = (performance.now() - started) / 1000;
    serve.child.kill('SIGTERM');
    await new Promise((r) => serve.child.once('exit', r));
    const load = sim.inquiryLoad();
    const inquiries = load.total - before;
    console.log(
      `--inquiry-rate ${rate}: ${ROWS} due UNKNOWN rows settled in ${seconds.toFixed(1)} s (from listening; the first settle run starts 1 s in); ` +
        `the account system received ${inquiries} inquiries, at most ${load.peakPerSecond} in any one second, ${(inquiries / seconds).toFixed(1)}/s on average`,
    );
  } finally {
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const rate of values.rate.split(',')) await storm(rate.trim());
