/**
 * `npm run bench:tracing`: what tracing costs the relay (#30), as relay CPU µs per request under the same load:
 *  - off: no OTLP endpoint (the trace context is still passed on; nothing of the SDK runs);
 *  - on: OTEL_EXPORTER_OTLP_ENDPOINT naming a local OTLP/HTTP receiver (this process answers 200), every span sampled;
 *  - sampled 10%: the same with OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=0.1;
 *  - with --baseline BIN, a build of guidgate without tracing (its bin/guidgate), for what "off" costs.
 * All relays run at once against one simulator process; each round loads each in turn (the order rotating, so drift
 * on a shared machine hits all alike); the figures are per-round medians. Requests carry the channel's traceparent
 * when --traceparent is given (every request then continues a sampled trace: the 10% relay records them all).
 *
 * Usage: node dist/bench/tracing.js [--rounds 5] [--seconds 5] [--connections 20] [--rate N] [--baseline BIN] [--traceparent] [--json]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './benchArgs.js';
import autocannon from 'autocannon';
import { cpuOf } from './processCpu.js';
import { continuedContext, keptTrace, logIds, propagating, setAttributes, SpanKind, startSpan, startTracing, traceHeaders, type Tracing } from '../src/telemetry/tracing.js';

const { values } = benchArgs({
  run: 'node dist/bench/tracing.js',
  about: 'What tracing costs the relay, as relay CPU µs per request under the same load: off, on (every span), sampled 10%, and optionally a build without tracing; per-round medians.',
  options: {
    rounds: { type: 'string', default: '5', value: 'N', help: 'rounds (the order rotating)' },
    seconds: { type: 'string', default: '5', value: 'N', help: 'seconds per load' },
    connections: { type: 'string', default: '20', value: 'N', help: 'autocannon connections' },
    rate: { type: 'string', default: '0', value: 'N', help: 'requests per second each load offers (0: as many as the relay takes)' },
    baseline: { type: 'string', value: 'BIN', help: "also a build of guidgate without tracing (its bin/guidgate)" },
    traceparent: { type: 'boolean', default: false, help: "requests carry the channel's traceparent" },
    json: { type: 'boolean', default: false, help: 'print the results as JSON' },
  },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const connections = Number(values.connections);
/** Requests per second each load offers (0: as many as the relay takes). A fixed rate gives every relay the same
 * fixed costs per second to spread, so that CPU per request compares like with like on a machine whose disk or
 * cores are shared: at its own saturation rate, a slower relay would spread its timers over fewer requests. */
const rate = Number(values.rate);
const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'guidgate');
const dir = mkdtempSync(join(tmpdir(), 'guidgate-bench-tracing-'));
const children: ChildProcess[] = [];
const log = (line: string) => {
  if (!values.json) process.stderr.write(`${line}\n`);
};

function start(args: string[], env: Record<string, string>, bin = BIN): Promise<{ url: string; pid: number }> {
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve({ url: m[1]!, pid: child.pid! });
    });
    child.on('exit', (code) => reject(new Error(`${args[0]} exited ${code}: ${out}`)));
  });
}

/**
 * A local OTLP/HTTP receiver, a process of its own (so that reading the exports costs neither the relays nor this
 * process): reads each export and answers 200; `bytes` asks it how many it has read.
 */
const RECEIVER = `
  let bytes = 0;
  require('node:http').createServer((req, res) => {
    if (req.url === '/bytes') return res.end(String(bytes));
    req.on('data', (c) => (bytes += c.length));
    // An empty ExportTraceServiceResponse in the request's encoding.
    req.on('end', () => req.headers['content-type'] === 'application/x-protobuf' ? res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end() : res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  }).listen(0, '127.0.0.1', function () { console.log('receiver listening on http://127.0.0.1:' + this.address().port); });
`;
async function startReceiver(): Promise<{ url: string; bytes: () => Promise<number> }> {
  const child = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.on('exit', (code) => reject(new Error(`receiver exited ${code}`)));
  });
  return { url, bytes: async () => Number(await (await fetch(`${url}/bytes`)).text()) };
}

interface Target {
  readonly name: string;
  readonly url: string;
  readonly pid: number;
}

let seq = 0;
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

async function load(t: Target, durationS: number): Promise<{ rps: number; cpuUs: number; p99: number; non2xx: number }> {
  const before = cpuOf(t.pid);
  const r = await autocannon({
    url: t.url,
    connections,
    duration: durationS,
    ...(rate > 0 ? { overallRate: rate } : {}),
    timeout: 10,
    requests: [{
      method: 'POST', path: '/v1/transfers',
      headers: { 'content-type': 'application/json', ...(values.traceparent ? { traceparent: TRACEPARENT } : {}) },
      setupRequest: (req) => ({ ...req, body: `{"guid":"${t.name.replace(/\W/g, '')}-${process.pid}-${seq++}","from":"ACC-1001","to":"ACC-2002","amount":100,"currency":"CNY"}` }),
    }],
  });
  const after = cpuOf(t.pid);
  const n = Math.max(1, r.requests.total);
  return { rps: r.requests.average, cpuUs: before === null || after === null ? Number.NaN : (after - before) / n, p99: r.latency.p99, non2xx: r.non2xx + r.errors + r.timeouts };
}

let micro: { offUs: number; onUs: number; sampledUs: number } | null = null;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/**
 * The tracing work of one relayed transfer, alone, in this process: the server span continuing the channel's header
 * (and the log ids), the claim's span and kept context, the account call's client span and its header, the outcome
 * write's span, the attributes and the ends. CPU µs per transfer, for a figure the load of a shared machine moves less.
 */
async function tracingWork(tracing: Tracing, n: number): Promise<number> {
  const headers = values.traceparent ? { traceparent: TRACEPARENT } : {};
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    // Exported every 300 transfers (1,500 spans, under the queue's 2,048), so that no span is dropped and the export's
    // own work (encoding, sending) is counted too, with the local receiver's reading of it.
    if (i % 300 === 299) await tracing.flush();
    const server = startSpan(tracing, 'POST', SpanKind.SERVER, continuedContext(headers), { 'http.request.method': 'POST' });
    const ids = logIds(server.context);
    const claim = startSpan(tracing, 'ledger claim', SpanKind.INTERNAL, server.context, { 'guidgate.guid': `g-${i}`, 'guidgate.resend': false });
    const kept = keptTrace(server.context);
    claim.span.end();
    const call = startSpan(tracing, 'POST /transfer', SpanKind.CLIENT, server.context, { 'http.request.method': 'POST', 'server.address': '127.0.0.1', 'server.port': 8080, 'url.template': '/transfer', 'guidgate.guid': `g-${i}`, 'guidgate.attempt': 1 });
    const sent = traceHeaders(call.context, { 'content-type': 'application/json' });
    setAttributes(call.span, { 'http.response.status_code': 200, 'guidgate.outcome': 'definite' });
    call.span.end();
    const write = startSpan(tracing, 'ledger record outcome', SpanKind.INTERNAL, server.context, { 'guidgate.guid': `g-${i}`, 'guidgate.attempt': 1 });
    write.span.end();
    setAttributes(server.span, { 'guidgate.guid': `g-${i}`, 'guidgate.code': '0000', 'guidgate.decision': 'claimed', 'http.route': '/v1/transfers', 'http.response.status_code': 200 });
    server.span.end();
    if (ids === undefined || kept === undefined || sent.traceparent === undefined) throw new Error('no trace');
  }
  await tracing.flush();
  const used = process.cpuUsage(t0);
  return (used.user + used.system) / n;
}

try {
  const receiver = await startReceiver();
  {
    const N = 30_000;
    const thrice = async (t: Tracing) => median([await tracingWork(t, N), await tracingWork(t, N), await tracingWork(t, N)]);
    await tracingWork(propagating, N); // warm-up
    const offUs = await thrice(propagating);
    const saved = { ...process.env };
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
    const on = startTracing();
    process.env.OTEL_EXPORTER_OTLP_PROTOCOL = 'http/json';
    const onJson = startTracing();
    delete process.env.OTEL_EXPORTER_OTLP_PROTOCOL;
    process.env.OTEL_TRACES_SAMPLER = 'parentbased_traceidratio';
    process.env.OTEL_TRACES_SAMPLER_ARG = '0.1';
    const sampled = startTracing();
    process.env = saved;
    await tracingWork(on, N);
    await tracingWork(onJson, N);
    // The two encodings in turns, so that a moment's load weighs on both alike.
    const [onRuns, onJsonRuns]: [number[], number[]] = [[], []];
    for (let i = 0; i < 3; i++) {
      onRuns.push(await tracingWork(on, N));
      onJsonRuns.push(await tracingWork(onJson, N));
    }
    const [onUs, onJsonUs] = [median(onRuns), median(onJsonRuns)];
    const sampledUs = await thrice(sampled);
    await on.shutdown();
    await onJson.shutdown();
    await sampled.shutdown();
    log(`tracing work alone, per transfer (this process, ${N} transfers, median of 3; "on" with its export to the local receiver):`);
    log(`  off ${offUs.toFixed(2)} µs, on ${onUs.toFixed(2)} µs (protobuf; in JSON ${onJsonUs.toFixed(2)} µs), sampled 10% ${sampledUs.toFixed(2)} µs`);
    micro = { offUs, onUs, sampledUs };
  }
  const sim = await start(['simulator', '--port', '0'], {});
  const serveArgs = (db: string) => ['serve', '--port', '0', '--db', join(dir, db), '--account-url', sim.url, '--log-level', 'warn', '--settle-every', '0'];
  const targets: Target[] = [];
  if (values.baseline !== undefined) targets.push({ name: 'baseline (no tracing)', ...(await start(serveArgs('baseline.db'), {}, values.baseline)) });
  targets.push({ name: 'off', ...(await start(serveArgs('off.db'), {})) });
  targets.push({ name: 'on', ...(await start(serveArgs('on.db'), { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url })) });
  targets.push({
    name: 'sampled 10%',
    ...(await start(serveArgs('sampled.db'), { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' })),
  });
  log(`${targets.map((t) => `${t.name} ${t.url}`).join(', ')}; ${rounds} rounds of ${seconds}s at ${connections} connections${rate > 0 ? `, ${rate} req/s offered` : ''}${values.traceparent ? ', every request with a sampled traceparent' : ''}`);
  for (const t of targets) await load(t, 1); // warm-up: JIT, pools

  const perRound: Array<Record<string, { rps: number; cpuUs: number; p99: number; non2xx: number }>> = [];
  for (let round = 0; round < rounds; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length]!);
    const results: Record<string, { rps: number; cpuUs: number; p99: number; non2xx: number }> = {};
    for (const t of order) results[t.name] = await load(t, seconds);
    perRound.push(results);
    log(`round ${round + 1}: ${targets.map((t) => `${t.name} ${results[t.name]!.cpuUs.toFixed(0)} µs/req ${results[t.name]!.rps.toFixed(0)} req/s`).join('; ')}`);
  }
  const off = median(perRound.map((r) => r.off!.cpuUs));
  const summary = Object.fromEntries(targets.map((t) => {
    const cpu = median(perRound.map((r) => r[t.name]!.cpuUs));
    return [t.name, {
      cpuUsPerRequest: Math.round(cpu * 10) / 10,
      overOffUs: Math.round((cpu - off) * 10) / 10,
      // Per round, against "off" in the same round: the median ratio.
      cpuRatioToOff: Math.round(median(perRound.map((r) => r[t.name]!.cpuUs / r.off!.cpuUs)) * 1000) / 1000,
      rps: Math.round(median(perRound.map((r) => r[t.name]!.rps))),
      p99Ms: median(perRound.map((r) => r[t.name]!.p99)),
      non2xx: perRound.reduce((a, r) => a + r[t.name]!.non2xx, 0),
    }];
  }));
  const out = { rounds, seconds, connections, rate, traceparent: values.traceparent, exportedBytes: await receiver.bytes(), tracingWorkAlone: micro, summary };
  if (values.json) process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  else {
    log('\n| relay | CPU µs/req | over off | ratio to off | req/s | p99 |');
    log('|---|---|---|---|---|---|');
    for (const [name, s] of Object.entries(summary)) log(`| ${name} | ${s.cpuUsPerRequest} | ${s.overOffUs} | ${s.cpuRatioToOff} | ${s.rps} | ${s.p99Ms} ms |`);
    log(`exported ${((await receiver.bytes()) / 1e6).toFixed(1)} MB of OTLP (the micro part in both encodings, the relays in protobuf)`);
  }
} finally {
  for (const c of children) c.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}
