/**
 * `npm run bench`: the naive relay and guidgate (default, durable configuration: synchronous=FULL) under the
 * same load, in one run on one machine, against the bundled simulator answering at once. Rounds alternate
 * which target goes first, so drift on a shared machine hits both; ratios are per round and their median.
 * Each round also loads the replay path (every GUID already DONE); then the duplicate storm (E903) and raw appends/s.
 *
 * With `--db postgres://…` each round also loads 1, 2 and 3 relay processes sharing that PostgreSQL database
 * (the connections split across them, as a load balancer would), beside the SQLite single process.
 * It writes its transfers into that database (GUIDs unique to the run); use a throwaway one.
 *
 * CPU per request is the primary figure: user + system CPU of each relay process (all threads, from
 * /proc/<pid>/stat) divided by the requests it served, per round, beside the naive relay in the same round.
 * It moves far less than req/s when other work shares the cores.
 *
 * Usage: node dist/bench/bench.js --help
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import { orThrow } from '../src/events/storeResult.js';
import { openSqliteStore } from '../src/store/sqlite/sqliteStore.js';
import { fillLedger, ledgerRows } from './fillLedger.js';
import { cpuOf } from './processCpu.js';
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
    'extra-bytes': { type: 'string', default: '150' },
    fill: { type: 'string', default: '0' },
    filled: { type: 'string' },
    baseline: { type: 'string' },
    'random-guids': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write(`npm run bench -- [options]
  --rounds N          alternating rounds (default 5); each round loads naive, guidgate (new GUIDs) and the replay
                      path (every GUID DONE), the order reversed every other round
  --seconds N         seconds per load (default 5)
  --connections N     autocannon connections (default 50)
  --extra-bytes N     an extra field of N characters in every body, forwarded untouched (default 150)
  --relay-flags=...   flags passed to guidgate serve (e.g. "--relay-flags=--writer inline")
  --db postgres://... also load 1, 2 and 3 relays sharing that PostgreSQL database (a throwaway one); their CPU
                      is the relays' only: the PostgreSQL server's own CPU is not counted
  --fill N            also a guidgate on a ledger pre-filled with N DONE transfers (random UUID GUIDs, written
                      through the store's write path in big batches), loaded with new GUIDs in every round beside
                      the one on an empty ledger (growth)
  --filled PATH       as --fill, on a ledger file filled before (node dist/bench/fillLedger.js N PATH); it is written to
  --baseline BIN      also another build of guidgate (path to its bin/guidgate), new GUIDs and replay in every
                      round: before/after figures from one run
  --random-guids      every new GUID a random UUID (as many channels make them; with --fill, the growth the issue
                      asks about: keys that land all over the B-trees) instead of tag-pid-counter
  --json              print the summary as JSON
Prints per round and as the median: req/s, p99 and relay CPU µs per request (user + system of the relay process,
all threads, from /proc/<pid>/stat, divided by the requests it served).
`);
  process.exit(0);
}
const pgUrl = values.db;
if (pgUrl !== undefined && !isPostgresUrl(pgUrl)) throw new Error('--db takes a postgres:// URL (the SQLite run is always there)');
/** Relay processes behind the load on PostgreSQL, one setup per count. */
const PG_RELAYS = [1, 2, 3] as const;
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const connections = Number(values.connections);
const extraRelayFlags = values['relay-flags'].split(' ').filter(Boolean);
/** `,"note":"xxx…"` in every body: channels send more than the contract fields, and it is forwarded. */
const extraField = Number(values['extra-bytes']) > 0 ? `,"note":"${'x'.repeat(Number(values['extra-bytes']))}"` : '';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'guidgate');
const fill = Number(values.fill);
const dir = mkdtempSync(join(tmpdir(), 'guidgate-bench-'));
const children: ChildProcess[] = [];
const log = (line: string) => {
  if (!values.json) process.stderr.write(`${line}\n`);
};

function start(args: string[], marker: RegExp, bin = BIN): Promise<string> {
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
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

const newGuid = (tag: string): string => (values['random-guids'] ? randomUUID() : `${tag}-${process.pid}-${seq++}`);
const uniqueBody = (tag: string) => () =>
  `{"guid":"${newGuid(tag)}","from":"ACC-1001","to":"ACC-2002","amount":100,"currency":"CNY"${extraField}}`;

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

type Target = 'naive' | 'guidgate' | 'replay';
interface Round {
  round: number;
  naive: Load;
  guidgate: Load;
  replay: Load;
  /** guidgate ÷ naive, same round: req/s, p99, relay CPU per request; and the replay path's. */
  ratio: number;
  p99Ratio: number;
  cpuRatio: number | null;
  replayRatio: number;
  replayCpuRatio: number | null;
  /** The --baseline and --fill relays, by name. */
  extras: Record<string, Load>;
}
/** A relay loaded beside the main ones in every round, compared with one of them (`versus`) of the same round. */
interface Extra {
  name: string;
  url: string;
  body: () => string;
  versus: 'guidgate' | 'replay';
}
const cpuRatio = (a: Load, b: Load) => (a.cpu?.relay == null || b.cpu?.relay == null ? null : a.cpu.relay / b.cpu.relay);
const us = (x: number | null | undefined) => (x == null ? 'n/a' : x.toFixed(0));
const times = (x: number | null) => (x === null ? 'n/a' : `${x.toFixed(2)}x`);
/** The median of the values that are there; null when none is. */
const medianOf = (xs: Array<number | null | undefined>) => {
  const present = xs.filter((x): x is number => typeof x === 'number');
  return present.length === 0 ? null : median(present);
};

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

  // The replay path: 1,000 GUIDs made DONE before the rounds, then resent in a cycle (one point read each).
  // The naive relay has no memory: for it these are forwards like any other, so its round figure stands beside.
  const replaySet = Array.from({ length: 1000 }, (_, i) => `{"guid":"replay-${process.pid}-${i}","from":"ACC-1001","to":"ACC-2002","amount":100${extraField}}`);
  const makeDone = async (url: string) => {
    for (let i = 0; i < replaySet.length; i += 50) {
      await Promise.all(
        replaySet.slice(i, i + 50).map((body) =>
          fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then((r) => r.text()),
        ),
      );
    }
  };
  await makeDone(gg);
  let k = 0;
  const replayBody = () => replaySet[k++ % replaySet.length]!;

  const extras: Extra[] = [];
  if (values.baseline !== undefined) {
    const base = await start(
      ['serve', '--port', '0', '--db', join(dir, 'baseline.db'), '--account-url', sim, '--log-level', 'warn', ...extraRelayFlags],
      /listening on (http:\/\/\S+)/,
      values.baseline,
    );
    await makeDone(base);
    extras.push({ name: 'baseline', url: base, body: uniqueBody('baseline'), versus: 'guidgate' }, { name: 'baseline replay', url: base, body: replayBody, versus: 'replay' });
    log(`baseline ${values.baseline}: ${base}`);
  }
  if (fill > 0 || values.filled !== undefined) {
    const filled = values.filled ?? join(dir, 'filled.db');
    if (values.filled === undefined) {
      const t = performance.now();
      fillLedger(filled, fill, { extraField, onProgress: (done) => done % 100_000 === 0 && log(`filled ${done} of ${fill}`) });
      log(`filled ${fill} transfers in ${((performance.now() - t) / 1000).toFixed(0)} s`);
    }
    const rows = ledgerRows(filled);
    log(`filled ledger ${filled}: ${rows} rows, ${(statSync(filled).size / 1e6).toFixed(0)} MB, ${(statSync(filled).size / rows).toFixed(0)} bytes per transfer`);
    // The filled ledger was written beside serve, with no continuity mark: serve would judge its standing unknown and
    // inquire about every new GUID for an hour (CONTRACT.md §9). It is ours, so it is trusted (`--continuity-window 0`).
    const url = await start(['serve', '--port', '0', '--db', filled, '--account-url', sim, '--log-level', 'warn', '--continuity-window', '0', ...extraRelayFlags], /listening on (http:\/\/\S+)/);
    extras.push({ name: `ledger of ${rows}`, url, body: uniqueBody('filled'), versus: 'guidgate' });
  }

  // Warm every path up (JIT, connection pools) before measuring.
  await load(naive, uniqueBody('warm'), 200, 1);
  await load(gg, uniqueBody('warm'), 200, 1);
  await load(gg, replayBody, 200, 1);
  for (const e of extras) await load(e.url, e.body, 200, 1);
  if (pgRelays.length > 0) await load(pgRelays, uniqueBody('warm'), 200, 1);
  const perRoundPg: Array<{ round: number; relays: number; load: Load; ratio: number; cpuRatio: number | null }> = [];

  const perRound: Round[] = [];
  for (let round = 1; round <= rounds; round++) {
    const order: readonly Target[] = round % 2 === 1 ? ['naive', 'guidgate', 'replay'] : ['replay', 'guidgate', 'naive'];
    const results: Partial<Record<Target, Load>> = {};
    const extraLoads: Record<string, Load> = {};
    const runExtras = async () => {
      for (const e of round % 2 === 1 ? extras : [...extras].reverse()) extraLoads[e.name] = await load(e.url, e.body, 200);
    };
    if (round % 2 === 0) await runExtras();
    for (const target of order) {
      results[target] = await load(target === 'naive' ? naive : gg, target === 'replay' ? replayBody : uniqueBody(`r${round}${target}`), 200);
    }
    if (round % 2 === 1) await runExtras();
    const n = results.naive!;
    const g = results.guidgate!;
    const r = results.replay!;
    perRound.push({
      round, naive: n, guidgate: g, replay: r,
      ratio: g.rps / n.rps, p99Ratio: g.p99 / Math.max(n.p99, 1), cpuRatio: cpuRatio(g, n),
      replayRatio: r.rps / n.rps, replayCpuRatio: cpuRatio(r, n), extras: extraLoads,
    });
    for (const e of extras) {
      const l = extraLoads[e.name]!;
      log(`round ${round}: ${e.name} ${l.rps.toFixed(0)} req/s p99 ${l.p99} ms ${us(l.cpu?.relay)} µs/req`);
    }
    log(
      `round ${round}: naive ${n.rps.toFixed(0)} req/s p99 ${n.p99} ms ${us(n.cpu?.relay)} µs/req; ` +
        `guidgate ${g.rps.toFixed(0)} req/s p99 ${g.p99} ms ${us(g.cpu?.relay)} µs/req; replay ${r.rps.toFixed(0)} req/s ${us(r.cpu?.relay)} µs/req`,
    );
    if (pgRelays.length > 0) {
      for (const relays of PG_RELAYS) {
        const l = await load(pgRelays.slice(0, relays), uniqueBody(`r${round}pg${relays}`), 200);
        perRoundPg.push({ round, relays, load: l, ratio: l.rps / n.rps, cpuRatio: cpuRatio(l, n) });
        log(`round ${round}: PostgreSQL, ${relays} relay${relays > 1 ? 's' : ''}: ${l.rps.toFixed(0)} req/s p99 ${l.p99} ms ${us(l.cpu?.relay)} µs/req (relays only)`);
      }
    }
  }

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
    medianCpuRatio: medianOf(perRound.map((r) => r.cpuRatio)),
    replay: { ratio: median(perRound.map((r) => r.replayRatio)), cpuRatio: medianOf(perRound.map((r) => r.replayCpuRatio)) },
    storm,
    appendsPerSec,
    postgres:
      pgRelays.length === 0
        ? null
        : PG_RELAYS.map((relays) => {
            const rs = perRoundPg.filter((r) => r.relays === relays);
            return {
              relays, rps: median(rs.map((r) => r.load.rps)), p99: median(rs.map((r) => r.load.p99)), ratio: median(rs.map((r) => r.ratio)),
              cpu: cpuMedians(rs.map((r) => r.load)), cpuRatio: medianOf(rs.map((r) => r.cpuRatio)), rounds: rs,
            };
          }),
    extras: extras.map((e) => {
      const of = (r: Round) => r.extras[e.name]!;
      return {
        name: e.name, versus: e.versus,
        rps: median(perRound.map((r) => of(r).rps)), p99: median(perRound.map((r) => of(r).p99)), cpu: cpuMedians(perRound.map(of)),
        ratio: median(perRound.map((r) => of(r).rps / r[e.versus].rps)), cpuRatio: medianOf(perRound.map((r) => cpuRatio(of(r), r[e.versus]))),
      };
    }),
    cores: availableParallelism(),
    extraBytes: Number(values['extra-bytes']),
    randomGuids: values['random-guids'],
    cpuPerRequest: {
      naive: cpuMedians(perRound.map((r) => r.naive)),
      guidgate: cpuMedians(perRound.map((r) => r.guidgate)),
      replay: cpuMedians(perRound.map((r) => r.replay)),
    },
  };
  if (values.json) {
    process.stdout.write(JSON.stringify(summary, null, 2) + '\n');
  } else {
    const f = (x: number) => x.toFixed(0).padStart(7);
    const m = (pick: (r: Round) => number | null | undefined) => medianOf(perRound.map(pick));
    const out = [
      `Relay CPU µs per request (user + system, all threads, ÷ requests served), req/s and p99; new GUIDs${summary.randomGuids ? ' (random UUIDs)' : ''} and the replay path; bodies carry ${summary.extraBytes} extra bytes:`,
      '',
      '| round | naive req/s | naive p99 | naive CPU µs | guidgate req/s | guidgate p99 | guidgate CPU µs | replay req/s | replay p99 | replay CPU µs | ratio req/s | ratio p99 | ratio CPU | replay ratio req/s | replay ratio CPU |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
      ...perRound.map(
        (r) =>
          `| ${r.round} | ${f(r.naive.rps)} | ${r.naive.p99} ms | ${us(r.naive.cpu?.relay)} | ${f(r.guidgate.rps)} | ${r.guidgate.p99} ms | ${us(r.guidgate.cpu?.relay)} | ` +
          `${f(r.replay.rps)} | ${r.replay.p99} ms | ${us(r.replay.cpu?.relay)} | ${r.ratio.toFixed(2)}x | ${r.p99Ratio.toFixed(2)}x | ${times(r.cpuRatio)} | ${r.replayRatio.toFixed(2)}x | ${times(r.replayCpuRatio)} |`,
      ),
      `| **median** | ${f(m((r) => r.naive.rps)!)} | ${m((r) => r.naive.p99)} ms | ${us(m((r) => r.naive.cpu?.relay))} | ${f(m((r) => r.guidgate.rps)!)} | ${m((r) => r.guidgate.p99)} ms | ${us(m((r) => r.guidgate.cpu?.relay))} | ` +
        `${f(m((r) => r.replay.rps)!)} | ${m((r) => r.replay.p99)} ms | ${us(m((r) => r.replay.cpu?.relay))} | **${summary.medianRatio.toFixed(2)}x** | **${summary.medianP99Ratio.toFixed(2)}x** | **${times(summary.medianCpuRatio)}** | **${summary.replay.ratio.toFixed(2)}x** | **${times(summary.replay.cpuRatio)}** |`,
      '',
      ...(summary.extras.length === 0
        ? []
        : [
            'Beside them in the same rounds (medians; ratios to the named relay of the same round):',
            '',
            '| relay | req/s | p99 | relay CPU µs | versus | ratio req/s | ratio CPU |',
            '|---|---|---|---|---|---|---|',
            ...summary.extras.map((e) => `| ${e.name} | ${f(e.rps)} | ${e.p99} ms | ${us(e.cpu.relay)} | ${e.versus} | ${e.ratio.toFixed(2)}x | ${times(e.cpuRatio)} |`),
            '',
          ]),
      '| path | guidgate req/s | guidgate p99 | relay CPU µs |',
      '|---|---|---|---|',
      `| duplicate storm (E903) | ${f(storm.rps)} | ${storm.p99} ms | ${us(storm.cpu?.relay)} |`,
      `| raw claims (Claimed+Sent), 50 in flight, FULL | ${f(appendsPerSec)} /s | | |`,
      '',
      `CPU per request by process (median of the rounds, µs; ${summary.cores} cores shared by every process below):`,
      '',
      '| | relay | simulator | load generator | total | requests/s the cores allow |',
      '|---|---|---|---|---|---|',
      ...(['naive', 'guidgate', 'replay'] as const).map((key) => {
        const c = summary.cpuPerRequest[key];
        return `| ${key} | ${us(c.relay)} | ${us(c.simulator)} | ${us(c.loadGenerator)} | ${us(c.total)} | ${c.total === null ? 'n/a' : f((summary.cores * 1e6) / c.total)} |`;
      }),
      ...(summary.postgres === null
        ? []
        : [
            '',
            `Several relays on one PostgreSQL database (connections split across them), beside the SQLite single process (medians of the rounds):`,
            '',
            '| setup | req/s | p99 | ratio to naive | relays\' CPU µs/request (PostgreSQL server not counted) | ratio CPU |',
            '|---|---|---|---|---|---|',
            `| SQLite, 1 relay | ${f(median(perRound.map((r) => r.guidgate.rps)))} | ${median(perRound.map((r) => r.guidgate.p99))} ms | ${summary.medianRatio.toFixed(2)}x | ${us(summary.cpuPerRequest.guidgate.relay)} | ${times(summary.medianCpuRatio)} |`,
            ...summary.postgres.map((p) => `| PostgreSQL, ${p.relays} relay${p.relays > 1 ? 's' : ''} | ${f(p.rps)} | ${p.p99} ms | ${p.ratio.toFixed(2)}x | ${us(p.cpu.relay)} | ${times(p.cpuRatio)} |`),
          ]),
      '',
      `errors or unexpected statuses: ${[...perRound.flatMap((r) => [r.naive, r.guidgate, r.replay, ...Object.values(r.extras)]), ...perRoundPg.map((r) => r.load), storm].reduce((a, l) => a + l.errors + l.unexpected, 0)}`,
    ];
    process.stdout.write(out.join('\n') + '\n');
  }
} finally {
  for (const c of children) c.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  rmSync(dir, { recursive: true, force: true });
}
