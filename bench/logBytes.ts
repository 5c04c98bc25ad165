/**
 * How many bytes of log `serve` writes per transfer, per `--log-level`: a `serve` process (its stdout and stderr,
 * where its JSON log lines go) in front of the bundled simulator started in this process, `--transfers` new GUIDs
 * sent by `--inflight` channels, first while the account system answers (every transfer 0000), then while it refuses
 * connections (E902, the breaker opening after its failures in a row): what an operator reads in a healthy hour and
 * in an outage. Prints bytes per transfer and lines per transfer, per level and case, and the day's bytes at 3,000
 * transfers/s.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Agent, request } from 'undici';
import { startSimulator } from '../src/simulator/index.js';
import { benchArgs } from './benchArgs.js';

const { values } = benchArgs({
  run: 'node dist/bench/logBytes.js',
  about: "Bytes and lines of serve's log per transfer, per --log-level: healthy (every transfer 0000) and in an outage (the account system refusing connections: E902).",
  options: {
    levels: { type: 'string', default: 'info,warn', value: 'LIST', help: 'the --log-level values to measure, separated by commas' },
    transfers: { type: 'string', default: '2000', value: 'N', help: 'transfers per case' },
    inflight: { type: 'string', default: '20', value: 'N', help: 'channels sending at once' },
    json: { type: 'boolean', default: false, help: 'print the results as JSON' },
  },
});

const BIN = resolve(import.meta.dirname, '..', '..', 'bin', 'guidgate');

interface Relay {
  readonly url: string;
  readonly child: ChildProcess;
  /** Bytes and lines written so far to stdout and stderr. */
  written(): { bytes: number; lines: number };
}

function startRelay(args: string[]): Promise<Relay> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let bytes = 0;
  let lines = 0;
  let head = '';
  let ready = false;
  const count = (d: Buffer) => {
    bytes += d.length;
    for (const b of d) if (b === 10) lines++;
  };
  child.stderr!.on('data', count);
  return new Promise((ok, fail) => {
    child.stdout!.on('data', (d: Buffer) => {
      count(d);
      if (ready) return;
      head += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(head);
      if (m === null) return;
      ready = true;
      ok({ url: m[1]!, child, written: () => ({ bytes, lines }) });
    });
    child.once('exit', (code) => fail(new Error(`serve exited ${code}: ${head}`)));
  });
}

async function send(url: string, transfers: number, inflight: number, tag: string): Promise<Record<string, number>> {
  const agent = new Agent({ connections: inflight, pipelining: 1 });
  const codes: Record<string, number> = {};
  let n = 0;
  await Promise.all(Array.from({ length: inflight }, async () => {
    for (let i = n++; i < transfers; i = n++) {
      const res = await request(`${url}/v1/transfers`, {
        dispatcher: agent, method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ guid: `LB-${tag}-${process.pid}-${i}`, from: '6222021001', to: '6222021002', amount: 1500, currency: 'CNY' }),
      });
      const { code } = (await res.body.json()) as { code: string };
      codes[code] = (codes[code] ?? 0) + 1;
    }
  }));
  await agent.close();
  return codes;
}

/** Waits until nothing more is written for a moment (the lines of the last replies). */
async function settled(relay: Relay): Promise<{ bytes: number; lines: number }> {
  let last = relay.written();
  for (;;) {
    await new Promise((r) => setTimeout(r, 300));
    const now = relay.written();
    if (now.bytes === last.bytes) return now;
    last = now;
  }
}

const transfers = Number(values.transfers);
const inflight = Number(values.inflight);
const results: Array<{ level: string; case: string; codes: Record<string, number>; bytesPerTransfer: number; linesPerTransfer: number; gbPerDayAt3000: number }> = [];
for (const level of values.levels.split(',')) {
  const sim = await startSimulator({ port: 0 });
  const dir = mkdtempSync(join(tmpdir(), 'guidgate-logbytes-'));
  const relay = await startRelay(['--db', join(dir, 'ledger.db'), '--account-url', sim.url, '--log-level', level, '--settle-every', '0']);
  try {
    for (const [name, setUp] of [['healthy', () => undefined], ['refused', () => void sim.refuseConnections(3_600_000)]] as const) {
      setUp();
      const before = await settled(relay);
      const codes = await send(relay.url, transfers, inflight, `${level}-${name}`);
      const after = await settled(relay);
      const bytesPerTransfer = (after.bytes - before.bytes) / transfers;
      results.push({ level, case: name, codes, bytesPerTransfer, linesPerTransfer: (after.lines - before.lines) / transfers, gbPerDayAt3000: (bytesPerTransfer * 3000 * 86_400) / 1e9 });
    }
  } finally {
    relay.child.kill('SIGKILL');
    await sim.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}
if (values.json) process.stdout.write(`${JSON.stringify(results)}\n`);
else {
  for (const r of results) {
    process.stdout.write(`--log-level ${r.level.padEnd(5)} ${r.case.padEnd(8)} ${r.bytesPerTransfer.toFixed(1).padStart(7)} bytes/transfer  ${r.linesPerTransfer.toFixed(2)} lines/transfer  ${r.gbPerDayAt3000.toFixed(1)} GB/day at 3,000/s  (${Object.entries(r.codes).map(([c, n]) => `${c} ${n}`).join(', ')})\n`);
  }
}
