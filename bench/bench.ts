/**
 * `npm run bench`: the naive relay and guidgate (default, durable configuration: synchronous=FULL) under the
 * same load, in one run on one machine, against the bundled simulator answering at once. Rounds alternate
 * which target goes first, so drift on a shared machine hits both; ratios are per round and their median.
 * Also: the replay path (every GUID already DONE), the duplicate storm (E903) and raw appends/s.
 *
 * With `--db postgres://…` each round also loads 1, 2 and 3 relay processes sharing that PostgreSQL database
 * (the connections split across them, as a load balancer would), beside the SQLite single process.
 * It writes its transfers into that database (GUIDs unique to the run); use a throwaway one.
 *
 * Usage: node dist/bench/bench.js [--rounds 5] [--seconds 5] [--connections 50] [--db postgres://…] [--json]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { orThrow } from '../src/events/storeResult.js';
import { openSqliteStore } from '../src/store/sqlite/sqliteStore.js';
import { isPostgresUrl } from '../src/store/postgres/postgresStore.js';
import { ledgerProjection } from '../src/projections/ledgerProjection.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    json: { type: 'boolean', default: false },
    'relay-flags': { type: 'string', default: '' },
    db: { type: 'string' },
  },
});
const pgUrl = values.db;
if (pgUrl !== undefined && !isPostgresUrl(pgUrl)) throw new Error('--db takes a postgres:// URL (the SQLite run is always there)');
/** Relay processes behind the load on PostgreSQL, one setup per count. */
const PG_RELAYS = [1, 2, 3] as const;
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const connections = Number(values.connections);
const extraRelayFlags = values['relay-flags'].split(' ').filter(Boolean);

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'guidgate');
const dir = mkdtempSync(join(tmpdir(), 'guidgate-bench-'));
const children: ChildProcess[] = [];
const log = (line: string) => {
  if (!values.json) process.stderr.write(`${line}\n`);
};

function start(args: string[], marker: RegExp): Promise<string> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = marker.exec(out);
      if (m) {
        pids.set(args[0] === 'simulator' ? 'simulator' : m[1]!, child.pid!);
        resolve(m[1]!);
      }
    });
    child.on('exit', (code) => reject(new Error(`${args[0]} exited ${code}: ${out}`)));
  });
}

/** CPU time (user + system) a process has used so far, in µs; null where /proc is not there (not Linux). */
function cpuOf(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) / 100) * 1e6; // clock ticks (USER_HZ = 100)
  } catch {
    return null;
  }
}

interface Load {
  rps: number;
  /** CPU µs per request, by process: the relay under test, the simulator, and this process (autocannon). */
  cpu?: { relay: number | null; simulator: number | null; loadGenerator: number };
  p50: number;
  p99: number;
  errors: number;
  unexpected: number;
}

let seq = 0;
const pids = new Map<string, number>();
/** The relays' CPU so far, summed; null if any cannot be read. */
function relaysCpu(urls: readonly string[]): number | null {
  const each = urls.map((u) => cpuOf(pids.get(u)));
  return each.some((c) => c === null) ? null : each.reduce<number>((a, c) => a + c!, 0);
}

/**
 * One load of `durationS` against one relay, or split across several (the connections divided among them,
 * one load generator each, all at once): req/s summed, p99 the worst of them, p50 their mean.
 */
async function load(target: string | readonly string[], body: () => string, expectStatus: number, durationS = seconds): Promise<Load> {
  const urls = typeof target === 'string' ? [target] : target;
  const simPid = pids.get('simulator');
  const before = { relay: relaysCpu(urls), sim: cpuOf(simPid), self: process.cpuUsage() };
  const results = await Promise.all(
    urls.map((url, i) =>
      autocannon({
        url,
        connections: Math.floor(connections / urls.length) + (i < connections % urls.length ? 1 : 0),
        duration: durationS,
        timeout: 10,
        requests: [{ method: 'POST', path: '/v1/transfers', headers: { 'content-type': 'application/json' }, setupRequest: (req) => ({ ...req, body: body() }) }],
      }),
    ),
  );
  const sum = (f: (r: (typeof results)[number]) => number) => results.reduce((a, r) => a + f(r), 0);
  const statusCount = sum((r) => (expectStatus === 200 ? r['2xx'] : expectStatus === 409 ? r['4xx'] : r['5xx']));
  const total = sum((r) => r.requests.total);
  const n = Math.max(1, total);
  const self = process.cpuUsage(before.self);
  const per = (now: number | null, then: number | null) => (now === null || then === null ? null : (now - then) / n);
  return {
    rps: sum((r) => r.requests.average),
    cpu: { relay: per(relaysCpu(urls), before.relay), simulator: per(cpuOf(simPid), before.sim), loadGenerator: (self.user + self.system) / n },
    p50: sum((r) => r.latency.p50) / results.length,
    p99: Math.max(...results.map((r) => r.latency.p99)),
    errors: sum((r) => r.errors + r.timeouts),
    unexpected: total - statusCount,
  };
}

const uniqueBody = (tag: string) => () =>
  `{"guid":"${tag}-${process.pid}-${seq++}","from":"ACC-1001","to":"ACC-2002","amount":100,"currency":"CNY"}`;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

function cpuMedians(loads: Load[]): { relay: number | null; simulator: number | null; loadGenerator: number; total: number | null } {
  const pick = (f: (l: Load) => number | null | undefined) => {
    const xs = loads.map(f).filter((x): x is number => typeof x === 'number');
    return xs.length === loads.length && xs.length > 0 ? median(xs) : null;
  };
  const relay = pick((l) => l.cpu?.relay);
  const simulator = pick((l) => l.cpu?.simulator);
  const loadGenerator = pick((l) => l.cpu?.loadGenerator) ?? 0;
  return { relay, simulator, loadGenerator, total: relay === null || simulator === null ? null : relay + simulator + loadGenerator };
}

try {
  const sim = await start(['simulator', '--port', '0'], /simulator listening on (http:\/\/\S+)/);
  const naive = await start(['naive', '--port', '0', '--account-url', sim], /listening on (http:\/\/\S+)/);
  const gg = await start(
    ['serve', '--port', '0', '--db', join(dir, 'bench.db'), '--account-url', sim, '--log-level', 'warn', ...extraRelayFlags],
    /listening on (http:\/\/\S+)/,
  );
  log(`simulator ${sim}, naive ${naive}, guidgate ${gg}; ${rounds} rounds of ${seconds}s at ${connections} connections`);
  const pgRelays: string[] = [];
  if (pgUrl !== undefined) {
    for (let i = 0; i < Math.max(...PG_RELAYS); i++) {
      pgRelays.push(await start(['serve', '--port', '0', '--db', pgUrl, '--account-url', sim, '--log-level', 'warn', ...extraRelayFlags], /listening on (http:\/\/\S+)/));
    }
    log(`PostgreSQL relays: ${pgRelays.join(', ')}`);
  }

  // Warm both up (JIT, connection pools) before measuring.
  await load(naive, uniqueBody('warm'), 200, 1);
  await load(gg, uniqueBody('warm'), 200, 1);
  if (pgRelays.length > 0) await load(pgRelays, uniqueBody('warm'), 200, 1);
  const perRoundPg: Array<{ round: number; relays: number; load: Load; ratio: number }> = [];

  const perRound: Array<{ round: number; naive: Load; guidgate: Load; ratio: number; p99Ratio: number }> = [];
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? (['naive', 'guidgate'] as const) : (['guidgate', 'naive'] as const);
    const results: Partial<Record<'naive' | 'guidgate', Load>> = {};
    for (const target of order) results[target] = await load(target === 'naive' ? naive : gg, uniqueBody(`r${round}${target}`), 200);
    const n = results.naive!;
    const g = results.guidgate!;
    perRound.push({ round, naive: n, guidgate: g, ratio: g.rps / n.rps, p99Ratio: g.p99 / Math.max(n.p99, 1) });
    log(`round ${round}: naive ${n.rps.toFixed(0)} req/s p99 ${n.p99} ms; guidgate ${g.rps.toFixed(0)} req/s p99 ${g.p99} ms; ratio ${(g.rps / n.rps).toFixed(2)}`);
    if (pgRelays.length > 0) {
      for (const k of PG_RELAYS) {
        const l = await load(pgRelays.slice(0, k), uniqueBody(`r${round}pg${k}`), 200);
        perRoundPg.push({ round, relays: k, load: l, ratio: l.rps / n.rps });
        log(`round ${round}: PostgreSQL, ${k} relay${k > 1 ? 's' : ''}: ${l.rps.toFixed(0)} req/s p99 ${l.p99} ms; ratio ${(l.rps / n.rps).toFixed(2)}`);
      }
    }
  }

  // Replay: a fixed set of GUIDs already DONE; naive forwards each again (it has no memory).
  const replaySet = Array.from({ length: 2000 }, (_, i) => `{"guid":"replay-${process.pid}-${i}","from":"ACC-1001","to":"ACC-2002","amount":100}`);
  let k = 0;
  const replayBody = () => replaySet[k++ % replaySet.length]!;
  await load(gg, replayBody, 200, 2);
  const replayG = await load(gg, replayBody, 200);
  const replayN = await load(naive, replayBody, 200);
  log(`replay: guidgate ${replayG.rps.toFixed(0)} req/s, naive ${replayN.rps.toFixed(0)} req/s`);

  // Duplicate storm: one GUID held in flight at the account system; every duplicate gets E903 at once.
  await fetch(`${sim}/control/faults`, { method: 'POST', body: JSON.stringify({ byGuid: { 'storm-1': 'hold' } }) });
  const stormBody = '{"guid":"storm-1","from":"ACC-1001","to":"ACC-2002","amount":1}';
  void fetch(`${gg}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: stormBody }).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 200));
  const storm = await load(gg, () => stormBody, 409, Math.min(seconds, 2));

  // Raw appends: claims (Claimed+Sent) with 50 in flight, FULL, in this process.
  const store = openSqliteStore({ projection: ledgerProjection, path: join(dir, 'raw.db') });
  let n = 0;
  const deadline = performance.now() + 2000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (performance.now() < deadline) {
        const g = `raw-${n++}`;
        await orThrow(store.execute(g, { type: 'Submit', request: '{}', fingerprint: g, timeoutMs: 3000, maxAttempts: 5 }));
      }
    }),
  );
  const appendsPerSec = n / ((performance.now() - t0) / 1000);
  await store.close();

  const summary = {
    rounds: perRound,
    medianRatio: median(perRound.map((r) => r.ratio)),
    medianP99Ratio: median(perRound.map((r) => r.p99Ratio)),
    replay: { guidgate: replayG, naive: replayN, ratio: replayG.rps / replayN.rps },
    storm,
    appendsPerSec,
    postgres:
      pgRelays.length === 0
        ? null
        : PG_RELAYS.map((k) => {
            const rs = perRoundPg.filter((r) => r.relays === k);
            return { relays: k, rps: median(rs.map((r) => r.load.rps)), p99: median(rs.map((r) => r.load.p99)), ratio: median(rs.map((r) => r.ratio)), cpu: cpuMedians(rs.map((r) => r.load)), rounds: rs };
          }),
    cores: availableParallelism(),
    cpuPerRequest: {
      naive: cpuMedians(perRound.map((r) => r.naive)),
      guidgate: cpuMedians(perRound.map((r) => r.guidgate)),
    },
  };
  if (values.json) {
    process.stdout.write(JSON.stringify(summary, null, 2) + '\n');
  } else {
    const f = (x: number) => x.toFixed(0).padStart(7);
    const out = [
      '| round | naive req/s | naive p50 | naive p99 | guidgate req/s | guidgate p50 | guidgate p99 | ratio req/s | ratio p99 |',
      '|---|---|---|---|---|---|---|---|---|',
      ...perRound.map(
        (r) =>
          `| ${r.round} | ${f(r.naive.rps)} | ${r.naive.p50} ms | ${r.naive.p99} ms | ${f(r.guidgate.rps)} | ${r.guidgate.p50} ms | ${r.guidgate.p99} ms | ${r.ratio.toFixed(2)}x | ${r.p99Ratio.toFixed(2)}x |`,
      ),
      `| **median** | | | | | | | **${summary.medianRatio.toFixed(2)}x** | **${summary.medianP99Ratio.toFixed(2)}x** |`,
      '',
      '| path | guidgate req/s | naive req/s | ratio | guidgate p99 |',
      '|---|---|---|---|---|',
      `| replay (every GUID DONE) | ${f(replayG.rps)} | ${f(replayN.rps)} | ${summary.replay.ratio.toFixed(2)}x | ${replayG.p99} ms |`,
      `| duplicate storm (E903) | ${f(storm.rps)} | | | ${storm.p99} ms |`,
      `| raw claims (Claimed+Sent), 50 in flight, FULL | ${f(appendsPerSec)} /s | | | |`,
      '',
      `CPU per request (median of the rounds, µs; ${summary.cores} cores shared by every process below):`,
      '',
      '| | relay | simulator | load generator | total | requests/s the cores allow |',
      '|---|---|---|---|---|---|',
      ...(['naive', 'guidgate'] as const).map((k) => {
        const c = summary.cpuPerRequest[k];
        const u = (x: number | null) => (x === null ? 'n/a' : x.toFixed(0));
        return `| ${k} | ${u(c.relay)} | ${u(c.simulator)} | ${u(c.loadGenerator)} | ${u(c.total)} | ${c.total === null ? 'n/a' : f((summary.cores * 1e6) / c.total)} |`;
      }),
      ...(summary.postgres === null
        ? []
        : [
            '',
            `Several relays on one PostgreSQL database (connections split across them), beside the SQLite single process (medians of the rounds):`,
            '',
            '| setup | req/s | p99 | ratio to naive | relays\' CPU µs/request (PostgreSQL server not counted) |',
            '|---|---|---|---|---|',
            `| SQLite, 1 relay | ${f(median(perRound.map((r) => r.guidgate.rps)))} | ${median(perRound.map((r) => r.guidgate.p99))} ms | ${summary.medianRatio.toFixed(2)}x | ${summary.cpuPerRequest.guidgate.relay?.toFixed(0) ?? 'n/a'} |`,
            ...summary.postgres.map((p) => `| PostgreSQL, ${p.relays} relay${p.relays > 1 ? 's' : ''} | ${f(p.rps)} | ${p.p99} ms | ${p.ratio.toFixed(2)}x | ${p.cpu.relay?.toFixed(0) ?? 'n/a'} |`),
          ]),
      '',
      `errors or unexpected statuses: ${[...perRound.flatMap((r) => [r.naive, r.guidgate]), ...perRoundPg.map((r) => r.load), replayG, replayN, storm].reduce((a, l) => a + l.errors + l.unexpected, 0)}`,
    ];
    process.stdout.write(out.join('\n') + '\n');
  }
} finally {
  for (const c of children) c.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  rmSync(dir, { recursive: true, force: true });
}
