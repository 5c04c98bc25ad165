/**
 * One `serve` on a new SQLite ledger (or a throwaway PostgreSQL database, `--db`) in front of the peers benchmark's
 * stub account system, loaded by autocannon with new random-UUID GUIDs or with replays (1,000 GUIDs made DONE first,
 * resent in a cycle), as fast as it goes or at a fixed rate; prints req/s and the latency percentiles. With `--profile`, `serve` runs under `node --cpu-prof`
 * and the profile's main thread is summed up: its busy time, and the share of it spent in each function and each
 * file (self time; a function V8 inlined counts in its caller). What docs/performance.md's profiles come from.
 * With `--bytes`, the ledger's bytes per transfer after the load, table by table (SQLite's dbstat: the rows' payload
 * and the pages that hold them), over the ledger rows it holds.
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import { benchArgs } from './benchArgs.js';
import { startListening } from './listening.js';
import { throwawayDatabase } from './throwawayDatabase.js';

const { values } = benchArgs({
  run: 'node dist/bench/serveProfile.js',
  about: "One serve (SQLite, or PostgreSQL with --db) in front of the stub account system under autocannon: req/s and latency percentiles; with --profile, where its event loop's busy time goes.",
  options: {
    mode: { type: 'string', default: 'new', value: 'new|replay', help: 'new GUIDs, or replays of 1,000 GUIDs answered before' },
    seconds: { type: 'string', default: '10', value: 'N', help: 'seconds of load' },
    connections: { type: 'string', default: '50', value: 'N', help: 'autocannon connections' },
    rate: { type: 'string', default: '0', value: 'N', help: 'requests per second in all (0: as fast as it answers)' },
    'extra-bytes': { type: 'string', default: '150', value: 'N', help: 'an extra field of N characters in every body' },
    build: { type: 'string', default: '', value: 'DIR', help: "another checkout of guidgate (its dist built) to run instead of this one's" },
    profile: { type: 'boolean', default: false, help: 'run serve under node --cpu-prof and print where its busy time went' },
    top: { type: 'string', default: '20', value: 'N', help: 'rows of each profile table' },
    db: { type: 'string', value: 'postgres://…', help: 'a PostgreSQL server on which serve gets a throwaway database, instead of a new SQLite file' },
    bytes: { type: 'boolean', default: false, help: "after the load, the ledger's bytes per transfer, table by table (payload and pages)" },
  },
});

const ROOT = resolve(import.meta.dirname, '..', '..');
const build = values.build === '' ? ROOT : resolve(values.build);
const dir = mkdtempSync(join(tmpdir(), 'guidgate-serve-profile-'));
const children: ChildProcess[] = [];
let pgDb: Awaited<ReturnType<typeof throwawayDatabase>> | undefined;

async function start(args: string[]): Promise<{ url: string; child: ChildProcess }> {
  const { child, listening } = startListening(args);
  children.push(child);
  return { url: await listening, child };
}

const extra = Number(values['extra-bytes']) > 0 ? `,"note":"${'x'.repeat(Number(values['extra-bytes']))}"` : '';
const body = (guid: string) => `{"guid":"${guid}","from":"ACC-1001","to":"ACC-2002","amount":100,"currency":"CNY"${extra}}`;

try {
  const stub = await start([join(ROOT, 'dist', 'bench', 'peers', 'stubAccount.js')]);
  const prof = values.profile ? ['--cpu-prof', '--cpu-prof-dir', dir] : [];
  pgDb = values.db === undefined ? undefined : await throwawayDatabase(values.db, 'profile');
  const serve = await start([...prof, join(build, 'bin', 'guidgate'), 'serve', '--port', '0', '--db', pgDb?.url ?? join(dir, 'ledger.db'), '--account-url', stub.url, '--log-level', 'warn']);
  const replayed: string[] = [];
  if (values.mode === 'replay') {
    for (let i = 0; i < 1000; i++) {
      const guid = randomUUID();
      const r = await fetch(`${serve.url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(guid) });
      if (r.status !== 200) throw new Error(`the replays' GUID ${guid} was answered ${r.status}`);
      replayed.push(guid);
    }
  }
  let i = 0;
  const rate = Number(values.rate);
  const r = await autocannon({
    url: `${serve.url}/v1/transfers`,
    connections: Number(values.connections),
    duration: Number(values.seconds),
    ...(rate > 0 ? { overallRate: rate } : {}),
    requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, headers: { 'content-type': 'application/json' }, body: body(values.mode === 'replay' ? replayed[i++ % replayed.length]! : randomUUID()) }) }],
  });
  console.log(`${values.mode}: ${Math.round(r.requests.average)} req/s; latency p50 ${r.latency.p50}, p90 ${r.latency.p90}, p99 ${r.latency.p99}, max ${r.latency.max} ms; not 200: ${r.non2xx}`);
  serve.child.kill('SIGTERM');
  await new Promise((done) => serve.child.once('exit', done));
  if (values.profile) {
    // The main thread's profile is the first one written (the threads' own follow with higher sequence numbers).
    const file = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).sort()[0];
    if (file === undefined) throw new Error('serve wrote no CPU profile');
    console.log(summarise(JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile, Number(values.top)));
  }
  if (values.bytes && pgDb === undefined) console.log(bytesPerTransfer(join(dir, 'ledger.db')));
} finally {
  for (const c of children) c.kill('SIGKILL');
  await pgDb?.drop();
  rmSync(dir, { recursive: true, force: true });
}

interface CpuProfile {
  readonly nodes: ReadonlyArray<{ readonly id: number; readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number } }>;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** Busy time, and the share of it each function and each file spent itself (idle and `(program)` left out). */
function summarise(p: CpuProfile, top: number): string {
  const frames = new Map(p.nodes.map((n) => [n.id, n.callFrame]));
  const byFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  let busy = 0;
  let total = 0;
  p.samples.forEach((id, k) => {
    const dt = p.timeDeltas[k] ?? 0;
    total += dt;
    const f = frames.get(id)!;
    if (f.functionName === '(idle)' || f.functionName === '(program)') return;
    busy += dt;
    const file = f.url.replace(/.*node_modules\/((@[^/]+\/)?[^/]+).*/, '$1').replace(/.*\/dist\//, '') || f.functionName;
    const fn = f.url === '' ? f.functionName : `${f.functionName || '(anonymous)'} ${file}:${f.lineNumber + 1}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + dt);
    byFile.set(file, (byFile.get(file) ?? 0) + dt);
  });
  const table = (m: Map<string, number>) =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, t]) => `  ${((100 * t) / busy).toFixed(1).padStart(5)}%  ${name}`).join('\n');
  return `main thread busy ${(busy / 1e6).toFixed(2)} s of ${(total / 1e6).toFixed(2)} s\nby function (self):\n${table(byFunction)}\nby file (self):\n${table(byFile)}`;
}

/** The ledger's bytes per transfer (per ledger row), each table and index: its rows' payload, and its pages. */
function bytesPerTransfer(file: string): string {
  const db = new Database(file, { readonly: true });
  try {
    const transfers = (db.prepare('SELECT count(*) AS n FROM ledger').get() as { n: number }).n;
    const rows = db.prepare('SELECT name, sum(payload) AS payload, sum(pgsize) AS pages FROM dbstat GROUP BY name ORDER BY sum(pgsize) DESC').all() as Array<{ name: string; payload: number; pages: number }>;
    const per = (n: number) => (n / Math.max(1, transfers)).toFixed(0).padStart(7);
    const total = rows.reduce((t, r) => ({ payload: t.payload + r.payload, pages: t.pages + r.pages }), { payload: 0, pages: 0 });
    return [
      `ledger bytes per transfer (${transfers} transfers): payload, pages`,
      ...rows.filter((r) => r.pages > 0).map((r) => `${per(r.payload)} ${per(r.pages)}  ${r.name}`),
      `${per(total.payload)} ${per(total.pages)}  all`,
    ].join('\n');
  } finally {
    db.close();
  }
}
