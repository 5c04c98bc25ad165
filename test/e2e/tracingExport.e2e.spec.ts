import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli } from '../support/commandsSeed.js';
import { describe, expect, it } from 'vitest';
import { startOtlpReceiver, type ReceivedSpan } from '../support/otlpReceiver.js';
import { httpRequest, transfer } from '../support/relayHarness.js';
import { closed, startServe } from '../support/serveProcess.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

const CHANNEL_TRACE = '0af7651916cd43dd8448eb211c80319c';
const CHANNEL_SPAN = 'b7ad6b7169203331';
/** Account numbers no span may carry (CONTRACT.md §10): searched for in the exported bytes. */
const FROM = '6222021001234567';
const TO = '6222029876543210';

/** `serve` (the built command, a process) with the bundled simulator, its OTLP variables in `env`. */
function serveProcess(dir: string, env: Record<string, string>, cleanup: ReturnType<typeof useCleanup>) {
  const s = startServe(['--db', join(dir, 'ledger.db'), '--log-level', 'info', '--settle-every', '0'], env);
  cleanup.add(async () => {
    s.child.kill('SIGTERM');
    await closed(s.child);
  });
  return s;
}

/** The relay's own time for each transfer it answered, from its request log lines (`ms`). */
function replyTimes(output: string): number[] {
  return output.split('\n').filter((l) => l.includes('"msg":"transfer"')).map((l) => (JSON.parse(l) as { ms: number }).ms);
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Export over OTLP/HTTP (CONTRACT.md §10) from the real relay process to a collector on loopback that decodes the
 * payloads the exporter sends, in either encoding.
 */
describe('spans exported over OTLP/HTTP', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  it.each([
    { encoding: 'protobuf (the default)', protocol: undefined, contentType: 'application/x-protobuf' },
    { encoding: 'JSON (OTEL_EXPORTER_OTLP_PROTOCOL=http/json)', protocol: 'http/json', contentType: 'application/json' },
  ])('in $encoding: exports the server span with what the relay decided, its children, and no account number anywhere; the log line names the trace', async ({ protocol, contentType }) => {
    const receiver = cleanup.use(await startOtlpReceiver('ok'));
    const relay = serveProcess(tmp(), {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test,team=payments',
      ...(protocol === undefined ? {} : { OTEL_EXPORTER_OTLP_PROTOCOL: protocol }),
    }, cleanup);
    const url = await relay.ready;
    const body = transfer({ from: FROM, to: TO });
    const guid = String(body.guid);
    const r = await httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(body), headers: { traceparent: `00-${CHANNEL_TRACE}-${CHANNEL_SPAN}-01` } });
    expect(r.json().code).toBe('0000');
    // A resend: answered from the ledger.
    const again = await httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(body), headers: { traceparent: `00-${CHANNEL_TRACE}-${CHANNEL_SPAN}-01` } });
    expect(again.headers['idempotent-replayed']).toBe('true');

    const byName = (spans: ReceivedSpan[], name: string) => spans.filter((s) => s.name === name && s.traceId === CHANNEL_TRACE);
    const spans = await waitFor(() => {
      const all = receiver.spans();
      return byName(all, 'POST /v1/transfers').length === 2 && byName(all, 'ledger record outcome').length === 1 ? all : null;
    }, { timeoutMs: 10_000 });

    const [first, second] = byName(spans, 'POST /v1/transfers').sort((a, b) => a.startTimeUnixNano.localeCompare(b.startTimeUnixNano));
    expect(first!.parentSpanId).toBe(CHANNEL_SPAN);
    expect(first!.kind).toBe(2); // SERVER
    expect(first!.attributes).toMatchObject({
      'http.request.method': 'POST', 'http.route': '/v1/transfers', 'http.response.status_code': 200,
      'guidgate.guid': guid, 'guidgate.code': '0000', 'guidgate.decision': 'claimed',
    });
    expect(second!.attributes).toMatchObject({ 'guidgate.guid': guid, 'guidgate.code': '0000', 'guidgate.decision': 'replayed' });
    expect(first!.resource).toMatchObject({ 'service.name': 'guidgate', 'deployment.environment.name': 'test', team: 'payments' });

    // The ledger write and the account call are the server span's children; the call is a client span.
    const [claim] = byName(spans, 'ledger claim');
    expect(claim!.parentSpanId).toBe(first!.spanId);
    const [call] = byName(spans, 'POST /transfer');
    expect(call!.parentSpanId).toBe(first!.spanId);
    expect(call!.kind).toBe(3); // CLIENT
    expect(call!.attributes).toMatchObject({ 'http.request.method': 'POST', 'server.address': '127.0.0.1', 'http.response.status_code': 200, 'guidgate.outcome': 'definite', 'guidgate.attempt': 1 });
    expect(byName(spans, 'ledger record outcome')[0]!.parentSpanId).toBe(first!.spanId);

    expect(new Set(receiver.contentTypes)).toEqual(new Set([contentType]));
    // Nothing of the request but its GUID: no account number, no amount, in any byte of any payload.
    const bytes = Buffer.concat(receiver.payloads).toString('utf8');
    expect(bytes).toContain(guid);
    for (const secret of [FROM, TO, JSON.stringify(body)]) expect(bytes.includes(secret), secret).toBe(false);

    // The request's log line carries the trace (pino's trace_id and span_id: the server span's).
    const line = relay.output().split('\n').map((l) => (l.startsWith('{') ? (JSON.parse(l) as Record<string, unknown>) : {})).find((l) => l.msg === 'transfer' && l.guid === guid);
    expect(line).toMatchObject({ trace_id: CHANNEL_TRACE, span_id: first!.spanId });
  });

  it('a collector that accepts and never answers does not slow the replies: the relay reply time against tracing off, and the drops counted', async () => {
    const silent = cleanup.use(await startOtlpReceiver('never'));
    // A small queue, so that it is full soon while the first export hangs.
    const on = serveProcess(tmp(), { OTEL_EXPORTER_OTLP_ENDPOINT: silent.url, OTEL_BSP_SCHEDULE_DELAY: '10', OTEL_BSP_MAX_QUEUE_SIZE: '64', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '16' }, cleanup);
    const off = serveProcess(tmp(), {}, cleanup);
    const [onUrl, offUrl] = await Promise.all([on.ready, off.ready]);
    // Turn about, so that whatever else loads the machine loads both alike; each reply timed from the request's
    // first byte to the reply's last, on loopback.
    const took = new Map<string, number[]>([[onUrl, []], [offUrl, []]]);
    for (let i = 0; i < 150; i++) {
      for (const url of [onUrl, offUrl]) {
        const t0 = performance.now();
        const r = await httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(transfer()), headers: { traceparent: `00-${CHANNEL_TRACE}-${CHANNEL_SPAN}-01` } });
        took.get(url)!.push(performance.now() - t0);
        expect(r.status).toBe(200);
      }
    }

    // The reply times, median of 150: unchanged within the noise of a shared machine; and the relay's own (its log
    // line's `ms`, from the request to its reply) alike.
    const [rOn, rOff] = [took.get(onUrl)!, took.get(offUrl)!];
    expect(median(rOn) / median(rOff), `median reply ${median(rOn).toFixed(1)} ms with a silent collector, ${median(rOff).toFixed(1)} ms with tracing off`).toBeLessThan(1.5);
    const tOn = await waitFor(() => (replyTimes(on.output()).length >= 150 ? replyTimes(on.output()) : null));
    const tOff = await waitFor(() => (replyTimes(off.output()).length >= 150 ? replyTimes(off.output()) : null));
    expect(median(tOn) / median(tOff), `median relay time ${median(tOn)} ms with a silent collector, ${median(tOff)} ms with tracing off`).toBeLessThan(1.5);
    // The collector took the exports and never answered: the queue filled and what did not fit was dropped, counted.
    expect(silent.connections()).toBeGreaterThan(0);
    const metrics = await httpRequest(`${onUrl}/metrics`, { method: 'GET' });
    const dropped = Number(/guidgate_trace_spans_dropped_total\{reason="queue-full"\} (\d+)/.exec(metrics.body)?.[1]);
    expect(dropped).toBeGreaterThan(0);
  });
});

describe('an export guidgate cannot make', () => {
  const under = useTempDir();
  it('an OTLP protocol other than http/protobuf or http/json is exit 2 naming the variable, for the commands that export; nothing opened', async () => {
    const tmp = under();
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' };
    const runs = await Promise.all([['serve'], ['resolve', '--account-url', 'http://127.0.0.1:9'], ['reprocess', '--account-url', 'http://127.0.0.1:9']].map((c) => cli([...c, '--db', join(tmp, `${c[0]}.db`)], env, { killAfterMs: 20_000 })));
    for (const r of runs) {
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain("OTEL_EXPORTER_OTLP_PROTOCOL='grpc' is not an OTLP protocol guidgate exports with (http/protobuf, http/json)");
    }
    expect(readdirSync(tmp)).toEqual([]);
    // A command that exports nothing is not held up by it: it goes on to say there is no ledger.
    const stats = await cli(['stats', '--db', join(tmp, 'stats.db')], env);
    expect([stats.code, stats.stderr.trim()]).toEqual([1, `guidgate stats: no ledger at ${join(tmp, 'stats.db')} (only guidgate serve creates a ledger: check --db, or start serve on it first)`]);
  });
});
