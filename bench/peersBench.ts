/**
 * `npm run bench:peers`: guidgate beside the libraries a team would pick instead, side by side in one run (issue #29).
 * The same stub account system (bench/peers/stubAccount.ts: fastify, 0000 at once, its own process) behind each
 * relay in turn, the same load (autocannon, new GUIDs, a 150-character extra field in every body):
 *
 * - the naive relay (`guidgate naive`: fastify → undici, keeps nothing), the yardstick of every ratio;
 * - guidgate on SQLite (`guidgate serve`, its default durable settings) and on PostgreSQL (a throwaway database on
 *   the server of `--db`);
 * - AWS Powertools idempotency, express-idempotency and @node-idempotency/core, each on Redis (`--redis`), each
 *   wired as its README recommends into a small relay doing the same job (bench/peers/*Relay.ts).
 *
 * Rounds alternate the order of the relays (reversed every other round), so drift on a shared machine hits all of
 * them; every ratio is taken within a round, and the figures are the medians of the rounds. Each round loads every
 * relay with new GUIDs and then its replay path (1,000 GUIDs answered before the rounds, resent in a cycle).
 * CPU per request, by process, from /proc: the relay; its store server (Redis's process; the PostgreSQL backends of
 * the benchmark's database and the server's WAL writer, checkpointer and background writer); the stub; this process
 * (the load generator). The stub counts the calls it gets: a relay must forward each new GUID once and no replay.
 *
 * Usage: node dist/bench/peersBench.js --help
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { cpuOf } from './processCpu.js';
import { throwawayDatabase } from './throwawayDatabase.js';
import { cpuBetween, postgresServer, redisServer, type ServerCpu } from './peers/storeServerCpu.js';

const RELAY_KEYS = ['sqlite', 'postgres', 'powertools', 'express-idempotency', 'node-idempotency'] as const;
type RelayKey = (typeof RELAY_KEYS)[number];

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '8' },
    connections: { type: 'string', default: '50' },
    'extra-bytes': { type: 'string', default: '150' },
    relays: { type: 'string', default: RELAY_KEYS.join(',') },
    db: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
    redis: { type: 'string', default: 'redis://127.0.0.1:6379/15' },
    'no-replay': { type: 'boolean', default: false },
    'counter-guids': { type: 'boolean', default: false },
    baseline: { type: 'string' },
    json: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write(`npm run bench:peers -- [options]
  --rounds N          alternating rounds (default 5); each loads every relay with new GUIDs, then its replay path
  --seconds N         seconds per load (default 8)
  --connections N     autocannon connections (default 50)
  --extra-bytes N     an extra field of N characters in every body (default 150)
  --relays LIST       which to load beside the naive relay (default ${RELAY_KEYS.join(',')})
  --db URL            the PostgreSQL server on which guidgate gets a throwaway database (default
                      postgres://postgres@127.0.0.1:5432/postgres); it must run on this machine (its CPU is read)
  --redis URL         the Redis database of the peers (default redis://127.0.0.1:6379/15); it must be empty, and
                      is emptied at the end; the server must run on this machine (its CPU is read)
  --no-replay         no replay loads
  --counter-guids     GUIDs tag-pid-counter instead of random UUIDs
  --baseline DIR      also guidgate from another build (DIR: a checkout with its dist built) beside each guidgate
                      relay of --relays, in the same rounds: before and after from one run
  --json              print the summary as JSON
Prints, per relay, medians of the rounds: req/s, p50/p99, relay CPU µs per request, store server CPU µs per
request, and the ratios to the naive relay of the same round; then the same for the replay path.
`);
  process.exit(0);
}

const relayKeys = values.relays.split(',').filter(Boolean);
for (const k of relayKeys) if (!(RELAY_KEYS as readonly string[]).includes(k)) throw new Error(`--relays: unknown relay ${k} (known: ${RELAY_KEYS.join(', ')})`);
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const connections = Number(values.connections);
const replayToo = !values['no-replay'];
const extraField = Number(values['extra-bytes']) > 0 ? `,"note":"${'x'.repeat(Number(values['extra-bytes']))}"` : '';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(ROOT, 'bin', 'guidgate');
const PEERS = join(ROOT, 'dist', 'bench', 'peers');
const dir = mkdtempSync(join(tmpdir(), 'guidgate-peers-'));
const log = (line: string) => {
  if (!values.json) process.stderr.write(`${line}\n`);
};
const versionOf = (pkg: string) => (JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;

// ---------------------------------------------------------------------------------------------------------------
// Processes

const children: ChildProcess[] = [];

/** Starts `node script args…` and resolves with its URL and pid once it prints `listening on URL`. */
function start(script: string, args: string[]): Promise<{ url: string; pid: number }> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        child.stdout!.off('data', onData);
        child.stdout!.resume(); // keep draining what it prints later
        resolve({ url: m[1]!, pid: child.pid! });
      }
    };
    child.stdout!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`${script} ${args[0] ?? ''} exited ${code}: ${out}`)));
  });
}

interface Relay {
  readonly key: RelayKey | 'naive' | 'sqlite@baseline' | 'postgres@baseline';
  readonly name: string;
  /** What survives a crash of the store, in a few words. */
  readonly durable: string;
  readonly url: string;
  readonly pid: number;
  readonly server: ServerCpu | null;
}

// ---------------------------------------------------------------------------------------------------------------
// Load

interface Transfer {
  readonly guid: string;
  readonly body: string;
}
let counter = 0;
const newTransfer = (tag: string): Transfer => {
  const guid = values['counter-guids'] ? `${tag}-${process.pid}-${counter++}` : randomUUID();
  return { guid, body: `{"guid":"${guid}","from":"ACC-1001","to":"ACC-2002","amount":100,"currency":"CNY"${extraField}}` };
};

interface Load {
  rps: number;
  p50: number;
  p99: number;
  /** CPU µs per request by process; server null for a relay with no store server. */
  relayUs: number | null;
  serverUs: number | null;
  stubUs: number | null;
  loadGeneratorUs: number;
  /** Calls the stub got per request sent (those in flight when the load stopped included). */
  forwards: number;
  /** Requests not answered 200 (errors, timeouts, other statuses). */
  failed: number;
}

let stub: { url: string; pid: number };
const stubPosts = async () => ((await (await fetch(`${stub.url}/stats`)).json()) as { posts: number }).posts;
/** The stub's count once the calls of requests still in flight when a load stopped have come in (3 s at most). */
async function settledStubPosts(): Promise<number> {
  let last = await stubPosts();
  for (const deadline = Date.now() + 3000; Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 100));
    const now = await stubPosts();
    if (now === last) return now;
    last = now;
  }
  return last;
}

/** One load of `durationS` seconds against one relay, the GUIDs and bodies from `next`. */
async function load(relay: Relay, next: () => Transfer, durationS = seconds): Promise<Load> {
  const postsBefore = await settledStubPosts();
  const before = { relay: cpuOf(relay.pid), server: await relay.server?.read(), stub: cpuOf(stub.pid), self: process.cpuUsage() };
  const r = await autocannon({
    url: relay.url,
    connections,
    duration: durationS,
    timeout: 10,
    requests: [
      {
        method: 'POST',
        path: '/v1/transfers',
        setupRequest: (req) => {
          const t = next();
          // The GUID in the body (guidgate, Powertools) and as the Idempotency-Key header (express-idempotency,
          // node-idempotency): every relay gets the same request.
          return { ...req, headers: { 'content-type': 'application/json', 'idempotency-key': t.guid }, body: t.body };
        },
      },
    ],
  });
  const self = process.cpuUsage(before.self);
  const after = { relay: cpuOf(relay.pid), server: await relay.server?.read(), stub: cpuOf(stub.pid) };
  const posts = await settledStubPosts();
  const n = Math.max(1, r.requests.total);
  const per = (a: number | null, b: number | null) => (a === null || b === null ? null : (a - b) / n);
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    relayUs: per(after.relay, before.relay),
    serverUs: before.server === undefined || after.server === undefined ? null : cpuBetween(before.server, after.server) / n,
    stubUs: per(after.stub, before.stub),
    loadGeneratorUs: (self.user + self.system) / n,
    forwards: (posts - postsBefore) / Math.max(1, r.requests.sent),
    failed: r.errors + r.timeouts + (r.requests.total - r['2xx']),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Figures

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
/** The median of the values that are there; null when any is missing. */
const medianOf = (xs: ReadonlyArray<number | null>): number | null => (xs.some((x) => x === null) || xs.length === 0 ? null : median(xs as number[]));

/** A load's figures as medians over the rounds, and their ratios to the naive relay's. */
interface Figures extends Load {
  /** Medians of the ratios to the naive relay's new-GUID load of the same round. */
  rpsRatio: number;
  p99Ratio: number;
  cpuRatio: number | null;
}

function figures(loads: readonly Load[], naive: readonly Load[]): Figures {
  const ratios = (f: (l: Load, n: Load) => number | null) => medianOf(loads.map((l, i) => f(l, naive[i]!)));
  return {
    rps: median(loads.map((l) => l.rps)),
    p50: median(loads.map((l) => l.p50)),
    p99: median(loads.map((l) => l.p99)),
    relayUs: medianOf(loads.map((l) => l.relayUs)),
    serverUs: medianOf(loads.map((l) => l.serverUs)),
    stubUs: medianOf(loads.map((l) => l.stubUs)),
    loadGeneratorUs: median(loads.map((l) => l.loadGeneratorUs)),
    forwards: median(loads.map((l) => l.forwards)),
    failed: loads.reduce((a, l) => a + l.failed, 0),
    rpsRatio: ratios((l, n) => l.rps / n.rps)!,
    p99Ratio: ratios((l, n) => l.p99 / Math.max(1, n.p99))!,
    cpuRatio: ratios((l, n) => (l.relayUs === null || n.relayUs === null ? null : l.relayUs / n.relayUs)),
  };
}

const us = (x: number | null) => (x === null ? 'n/a' : x.toFixed(0));
const times = (x: number | null) => (x === null ? 'n/a' : `${x.toFixed(2)}`);
const thousands = (x: number) => Math.round(x).toLocaleString('en-US');
/** Cores busy per 1,000 requests per second: the relay's and its store server's CPU µs per request ÷ 1,000. */
const coresPer1000 = (f: Figures) => (f.relayUs === null ? null : (f.relayUs + (f.serverUs ?? 0)) / 1000);

// ---------------------------------------------------------------------------------------------------------------
// The run

let redis: Awaited<ReturnType<typeof redisServer>> | null = null;
const pgDbs: Array<Awaited<ReturnType<typeof throwawayDatabase>>> = [];
const servers: ServerCpu[] = [];
try {
  const loadAtStart = loadavg();
  stub = await start(join(PEERS, 'stubAccount.js'), ['--port', '0']);
  const relays: Relay[] = [];
  const naive = await start(BIN, ['naive', '--port', '0', '--account-url', stub.url]);
  relays.push({ key: 'naive', name: 'naive fastify → undici', durable: '— (keeps nothing)', ...naive, server: null });

  const peerLibraries: Partial<Record<RelayKey, { name: string; script: string }>> = {
    powertools: { name: `AWS Powertools idempotency ${versionOf('@aws-lambda-powertools/idempotency')} on Redis`, script: 'powertoolsRelay.js' },
    'express-idempotency': { name: `express-idempotency ${versionOf('express-idempotency')} on Redis`, script: 'expressIdempotencyRelay.js' },
    'node-idempotency': { name: `@node-idempotency/core ${versionOf('@node-idempotency/core')} on Redis`, script: 'nodeIdempotencyRelay.js' },
  };
  for (const key of relayKeys as RelayKey[]) {
    if (key === 'sqlite' || key === 'postgres') {
      for (const [bin, suffix] of [[BIN, ''], ...(values.baseline === undefined ? [] : [[join(values.baseline, 'bin', 'guidgate'), ' (baseline)']])] as Array<[string, string]>) {
        const tag = suffix === '' ? key : (`${key}@baseline` as const);
        if (key === 'sqlite') {
          const p = await start(bin, ['serve', '--port', '0', '--db', join(dir, `${tag}.db`), '--account-url', stub.url, '--log-level', 'warn']);
          relays.push({ key: tag, name: `guidgate, SQLite${suffix}`, durable: 'yes: a claim synced before its call, an outcome by the next sync (default --synchronous FULL)', ...p, server: null });
        } else {
          const db = await throwawayDatabase(values.db, suffix === '' ? 'peers' : 'peersbase');
          pgDbs.push(db);
          const server = await postgresServer(values.db, new URL(db.url).pathname.slice(1));
          servers.push(server);
          const p = await start(bin, ['serve', '--port', '0', '--db', db.url, '--account-url', stub.url, '--log-level', 'warn']);
          relays.push({ key: tag, name: `guidgate, PostgreSQL ${server.version.split(' ')[0]}${suffix}`, durable: `yes: ${server.settings}`, ...p, server });
        }
      }
    } else {
      if (redis === null) {
        const server = await redisServer(values.redis);
        servers.push(server);
        const keys = await server.dbSize();
        if (keys > 0) {
          const db = new URL(values.redis).pathname.slice(1) || '0';
          throw new Error(`the Redis database of --redis ${values.redis} holds ${keys} keys: pass --redis with an empty one, or empty it (redis-cli -n ${db} flushdb)`);
        }
        redis = server; // empty: the benchmark's own from now on, emptied at the end
      }
      const lib = peerLibraries[key]!;
      const p = await start(join(PEERS, lib.script), ['--port', '0', '--account-url', stub.url, '--redis', values.redis]);
      relays.push({ key, name: lib.name, durable: `no: Redis ${redis.version}, ${redis.persistence}`, ...p, server: redis });
    }
  }
  log(`stub ${stub.url}; ${relays.map((r) => `${r.key} ${r.url}`).join(', ')}`);
  log(`${rounds} rounds of ${seconds} s at ${connections} connections; load average ${loadAtStart.map((x) => x.toFixed(2)).join(' ')}`);

  // The replay path: 1,000 GUIDs answered before the rounds, then resent in a cycle.
  const replaySets = new Map<Relay, Transfer[]>();
  if (replayToo) {
    for (const relay of relays.filter((r) => r.key !== 'naive')) {
      const set = Array.from({ length: 1000 }, () => newTransfer(`replay-${relay.key}`));
      for (let i = 0; i < set.length; i += 50) {
        await Promise.all(
          set.slice(i, i + 50).map(async (t) => {
            const res = await fetch(`${relay.url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': t.guid }, body: t.body });
            await res.text();
            if (res.status !== 200) throw new Error(`${relay.name} answered ${res.status} to a new transfer`);
          }),
        );
      }
      replaySets.set(relay, set);
    }
  }
  const replayOf = (relay: Relay) => {
    const set = replaySets.get(relay)!;
    let i = 0;
    return () => set[i++ % set.length]!;
  };

  // Warm every path up (JIT, pools, connections) before measuring.
  for (const relay of relays) {
    await load(relay, () => newTransfer('warm'), 2);
    if (replaySets.has(relay)) await load(relay, replayOf(relay), 1);
  }

  const fresh = new Map<Relay, Load[]>(relays.map((r) => [r, []]));
  const replays = new Map<Relay, Load[]>(relays.map((r) => [r, []]));
  for (let round = 1; round <= rounds; round++) {
    for (const relay of round % 2 === 1 ? relays : [...relays].reverse()) {
      const l = await load(relay, () => newTransfer(`r${round}`));
      fresh.get(relay)!.push(l);
      let line = `round ${round}: ${relay.name}: ${l.rps.toFixed(0)} req/s, p50 ${l.p50} p99 ${l.p99} ms, relay ${us(l.relayUs)} µs, server ${us(l.serverUs)} µs, stub ${us(l.stubUs)} µs, forwards ${l.forwards.toFixed(3)}`;
      if (replaySets.has(relay)) {
        const r = await load(relay, replayOf(relay));
        replays.get(relay)!.push(r);
        line += `; replay ${r.rps.toFixed(0)} req/s, p99 ${r.p99} ms, relay ${us(r.relayUs)} µs, server ${us(r.serverUs)} µs, forwards ${r.forwards.toFixed(3)}`;
      }
      log(line);
    }
  }
  const loadAtEnd = loadavg();

  const naiveLoads = fresh.get(relays[0]!)!;
  const summary = {
    cores: availableParallelism(),
    loadAverage: { start: loadAtStart, end: loadAtEnd },
    node: process.version,
    rounds,
    seconds,
    connections,
    extraBytes: Number(values['extra-bytes']),
    guids: values['counter-guids'] ? 'tag-pid-counter' : 'random UUIDs',
    relays: relays.map((r) => ({
      key: r.key,
      name: r.name,
      durable: r.durable,
      new: figures(fresh.get(r)!, naiveLoads),
      replay: replaySets.has(r) ? figures(replays.get(r)!, naiveLoads) : null,
    })),
  };
  if (values.json) {
    process.stdout.write(JSON.stringify(summary, null, 2) + '\n');
  } else {
    const la = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(' ');
    const out = [
      `New GUIDs (${summary.guids}), ${summary.extraBytes} extra bytes per body, ${connections} connections; medians of ${rounds} alternating rounds of ${seconds} s; ` +
        `ratios to the naive relay of the same round; ${summary.cores} cores shared by every process; load average ${la(loadAtStart)} at the start, ${la(loadAtEnd)} at the end:`,
      '',
      '| relay | durable | req/s | × naive | p50 / p99 | relay CPU µs/req | × naive | store server CPU µs/req | cores per 1,000 req/s (relay + store) |',
      '|---|---|---|---|---|---|---|---|---|',
      ...summary.relays.map(({ name, durable, new: f }) =>
        `| ${name} | ${durable} | ${thousands(f.rps)} | ${times(f.rpsRatio)} | ${f.p50} / ${f.p99} ms | ${us(f.relayUs)} | ${times(f.cpuRatio)} | ${f.serverUs === null ? '—' : us(f.serverUs)} | ${times(coresPer1000(f))} |`),
      ...(replayToo
        ? [
            '',
            'Replay (every request a GUID answered before, resent):',
            '',
            '| relay | req/s | × naive (new GUIDs) | p50 / p99 | relay CPU µs/req | store server CPU µs/req |',
            '|---|---|---|---|---|---|',
            ...summary.relays.flatMap(({ name, replay: f }) =>
              f === null ? [] : [`| ${name} | ${thousands(f.rps)} | ${times(f.rpsRatio)} | ${f.p50} / ${f.p99} ms | ${us(f.relayUs)} | ${f.serverUs === null ? '—' : us(f.serverUs)} |`]),
          ]
        : []),
      '',
      `Stub CPU µs/req: ${summary.relays.map((r) => `${r.key} ${us(r.new.stubUs)}`).join(', ')}. Load generator µs/req: ${summary.relays.map((r) => `${r.key} ${us(r.new.loadGeneratorUs)}`).join(', ')}.`,
      `Calls to the stub per request sent (median): new ${summary.relays.map((r) => `${r.key} ${r.new.forwards.toFixed(2)}`).join(', ')}` +
        (replayToo ? `; replay ${summary.relays.flatMap((r) => (r.replay === null ? [] : [`${r.key} ${r.replay.forwards.toFixed(2)}`])).join(', ')}` : '') + '.',
      `Requests not answered 200: ${summary.relays.reduce((a, r) => a + r.new.failed + (r.replay?.failed ?? 0), 0)}.`,
    ];
    process.stdout.write(out.join('\n') + '\n');
  }
} finally {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          const stubborn = setTimeout(() => c.kill('SIGKILL'), 5000);
          c.once('exit', () => {
            clearTimeout(stubborn);
            resolve();
          });
          c.kill('SIGTERM');
        }),
    ),
  );
  if (redis !== null) await redis.flushDb();
  for (const s of servers) await s.close();
  for (const db of pgDbs) await db.drop();
  rmSync(dir, { recursive: true, force: true });
}
