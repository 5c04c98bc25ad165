import { describe, expect, it } from 'vitest';
import { exportRequested, otlpProtocol, tracingSettingsProblem } from '../../src/telemetry/otlpSettings.js';
import { continuedContext, keptContext, keptTrace, propagating, SpanKind, startSpan, startTracing, traceHeaders } from '../../src/telemetry/tracing.js';

const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('tracing off: propagation without the SDK (src/telemetry/tracing.ts)', () => {
  it('exports only when an OTLP endpoint is set and the SDK is not disabled', () => {
    expect(exportRequested({})).toBe(false);
    expect(exportRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: ' ' })).toBe(false);
    expect(exportRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBe(true);
    expect(exportRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' })).toBe(true);
    expect(exportRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
    expect(exportRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
    // Nothing started without one: the propagating tracing itself.
    expect(startTracing({ env: {} })).toBe(propagating);
  });

  it('exports in protobuf unless OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL says http/json; another value is a problem naming the variable, only when exporting', () => {
    expect(otlpProtocol({})).toEqual({ protocol: 'http/protobuf' });
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toEqual({ protocol: 'http/json' });
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: ' http/protobuf ' })).toEqual({ protocol: 'http/protobuf' });
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toEqual({ problem: expect.stringContaining("OTEL_EXPORTER_OTLP_PROTOCOL='grpc'") as unknown });
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'json', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toEqual({ problem: expect.stringContaining('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') as unknown });
    expect(tracingSettingsProblem({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toBeNull();
    expect(tracingSettingsProblem({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toMatch(/OTEL_EXPORTER_OTLP_PROTOCOL='grpc' is not an OTLP protocol guidgate exports with \(http\/protobuf, http\/json\)/);
    expect(() => startTracing({ env: { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' } })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL/);
  });

  it('a span continues the header it is given under an id of its own, keeps its flags and tracestate; none or an invalid one: a new trace', () => {
    const child = startSpan(propagating, 'x', SpanKind.SERVER, continuedContext({ traceparent: PARENT, tracestate: 'a=1' }));
    expect(child.span.isRecording()).toBe(false);
    const sent = traceHeaders(child.context);
    expect(sent.traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    expect(sent.traceparent).not.toBe(PARENT);
    expect(sent.tracestate).toBe('a=1');
    for (const headers of [{}, { traceparent: 'nonsense' }, { traceparent: PARENT.replace('4bf9', 'XXXX') }]) {
      const fresh = traceHeaders(startSpan(propagating, 'x', SpanKind.SERVER, continuedContext(headers)).context).traceparent;
      expect(fresh).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
      expect(fresh).not.toContain('4bf92f3577b34da6a3ce929d0e0e4736');
    }
  });

  it("a claim's kept trace is its span's headers, and continues as such later", () => {
    const server = startSpan(propagating, 'x', SpanKind.SERVER, continuedContext({ traceparent: PARENT }));
    const kept = keptTrace(server.context)!;
    expect(kept.traceparent).toBe(traceHeaders(server.context).traceparent);
    const later = traceHeaders(startSpan(propagating, 'y', SpanKind.CLIENT, keptContext(kept)).context).traceparent!;
    expect(later.slice(0, 36)).toBe(PARENT.slice(0, 36));
    expect(later).not.toBe(kept.traceparent);
    expect(traceHeaders(startSpan(propagating, 'z', SpanKind.CLIENT, keptContext({ traceparent: 'bad' })).context).traceparent).not.toContain('4bf92f35');
  });

  it('a claim keeps at most 512 characters of tracestate, however long the channel sends it', () => {
    const members = (n: number) => Array.from({ length: n }, (_, i) => `k${i}=${'v'.repeat(40)}`).join(',');
    const short = continuedContext({ traceparent: PARENT, tracestate: members(5) });
    expect(keptTrace(short)!.tracestate).toBe(members(5));
    const long = continuedContext({ traceparent: PARENT, tracestate: members(30) });
    expect(members(30).length).toBeGreaterThan(1000);
    expect(keptTrace(long)!.tracestate!.length).toBeLessThanOrEqual(512);
  });
});
