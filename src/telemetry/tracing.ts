/**
 * Trace context and spans (CONTRACT.md §10): the one module that knows the OpenTelemetry SDK.
 *
 * Propagation is always on: a valid `traceparent` (and `tracestate`) from the channel is continued, and every call
 * to the account system carries a `traceparent` with the same trace id and a span id of guidgate's own; without a
 * valid one guidgate starts a trace. Recording and export are on only when an OTLP endpoint is set
 * (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`): then the SDK's tracer (sampler from
 * `OTEL_TRACES_SAMPLER`, default parent-based always-on), its batch processor (a bounded queue: a collector that is
 * down or slow drops spans, counted, and never holds a reply) and the OTLP/HTTP exporter. Without one nothing of the
 * SDK is started: `propagating` makes non-recording spans (the API's own, whose methods do nothing), only to give
 * each hop a span id of its own.
 *
 * Contexts are passed by hand (a `Context` argument), never through AsyncLocalStorage: no context manager runs.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  context as contextApi,
  createNoopMeter,
  isSpanContextValid,
  trace,
  type Context,
  type Counter,
  type Meter,
  type MeterProvider,
  type Span,
  type SpanOptions,
  type TextMapGetter,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, BatchSpanProcessor, RandomIdGenerator } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { packageRoot } from '../shared/packageRoot.js';
import { exportRequested, otlpProtocol } from './otlpSettings.js';

export { ROOT_CONTEXT, SpanKind, SpanStatusCode, type Context, type Span };

/** What a span of ours may say. Never an account number, a body or a token (CONTRACT.md §10). */
export type SpanAttributes = Readonly<Record<string, string | number | boolean | undefined>>;

/** Why exported spans were lost: the queue was full (a collector slower than the relay), or an export failed. */
export type SpanLoss = 'queue-full' | 'export-failed';

export interface Tracing {
  /** True when spans are recorded and exported (an OTLP endpoint is set). */
  readonly exporting: boolean;
  readonly tracer: Tracer;
  /** Exports what is queued now (best effort); nothing to do when not exporting. */
  flush(): Promise<void>;
  /** Exports what is queued (best effort) and stops the exporter; nothing to do when not exporting. */
  shutdown(): Promise<void>;
}

/**
 * The trace context kept with a claim (the Claimed event), so that the calls made later for the same transfer
 * (the settler, `resolve`, `reprocess`) continue its trace: the W3C headers of guidgate's span for its first request.
 */
export interface KeptTrace {
  readonly traceparent: string;
  readonly tracestate?: string;
}

const propagator = new W3CTraceContextPropagator();
const ids = new RandomIdGenerator();

/**
 * Spans that are not recorded, with a span id of their own: the trace id and flags of their parent, or a new trace
 * (flags 00: nothing of it is recorded here) when there is none. What runs when nothing is exported.
 */
class PropagatingTracer implements Tracer {
  startSpan(_name: string, options?: SpanOptions, ctx: Context = contextApi.active()): Span {
    const parent = options?.root === true ? undefined : trace.getSpanContext(ctx);
    const continued = parent !== undefined && isSpanContextValid(parent);
    return trace.wrapSpanContext({
      traceId: continued ? parent.traceId : ids.generateTraceId(),
      spanId: ids.generateSpanId(),
      traceFlags: continued ? parent.traceFlags : TraceFlags.NONE,
      ...(continued && parent.traceState !== undefined ? { traceState: parent.traceState } : {}),
    });
  }

  startActiveSpan<F extends (span: Span) => unknown>(name: string, ...rest: unknown[]): ReturnType<F> {
    const fn = rest[rest.length - 1] as (span: Span) => ReturnType<F>;
    const options = (rest.length > 1 ? rest[0] : undefined) as SpanOptions | undefined;
    const ctx = (rest.length > 2 ? rest[1] : contextApi.active()) as Context;
    const span = this.startSpan(name, options, ctx);
    return contextApi.with(trace.setSpan(ctx, span), fn, undefined, span) as ReturnType<F>;
  }
}

/** Tracing off: propagation only. The default of every part that is handed no `Tracing`. */
export const propagating: Tracing = {
  exporting: false,
  tracer: new PropagatingTracer(),
  flush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
};

export interface TracingOptions {
  /** The environment the OpenTelemetry variables are read from (default `process.env`). */
  readonly env?: NodeJS.ProcessEnv;
  /** Told how many spans were lost and why (`guidgate_trace_spans_dropped_total`). */
  readonly onLoss?: (why: SpanLoss, spans: number) => void;
}

/**
 * Tracing as the OpenTelemetry variables say: `propagating` (nothing started) without an OTLP endpoint, else the
 * SDK exporting over OTLP/HTTP, in protobuf unless `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` says `http/json`
 * (otlpSettings.ts; the command line refuses another value before this runs). The SDK reads its own variables
 * (endpoint, headers, timeout, `OTEL_BSP_*`, `OTEL_TRACES_SAMPLER(_ARG)`); `OTEL_SERVICE_NAME` defaults to guidgate,
 * `OTEL_RESOURCE_ATTRIBUTES` adds to it.
 */
export function startTracing(options: TracingOptions = {}): Tracing {
  const env = options.env ?? process.env;
  if (!exportRequested(env)) return propagating;
  const resource = defaultResource()
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: 'guidgate', [ATTR_SERVICE_VERSION]: packageRoot()?.version ?? 'unknown' }))
    .merge(detectResources({ detectors: [envDetector] }));
  const protocol = otlpProtocol(env);
  if ('problem' in protocol) throw new Error(protocol.problem);
  // The exporters read the endpoint, headers and timeout from process.env themselves.
  const exporter = protocol.protocol === 'http/json' ? new OtlpJsonExporter() : new OtlpProtobufExporter();
  const processor = new BatchSpanProcessor(exporter, {
    // The batch processor reports what it drops (a full queue) and what an export lost through its self-observability
    // meter: only that counter is listened to.
    selfObsMeterProvider: lossMeter(options.onLoss),
  } as ConstructorParameters<typeof BatchSpanProcessor>[1]);
  const provider = new BasicTracerProvider({ resource, spanProcessors: [processor] });
  return {
    exporting: true,
    tracer: provider.getTracer('guidgate', packageRoot()?.version),
    flush: () => provider.forceFlush().catch(() => undefined),
    shutdown: () => provider.shutdown().catch(() => undefined),
  };
}

/** The counter of spans the batch processor handled; a loss is one with an `error.type` (queue_full, or an export error). */
const PROCESSED = 'otel.sdk.processor.span.processed';

function lossMeter(onLoss: TracingOptions['onLoss']): MeterProvider {
  const noop = createNoopMeter();
  const meter: Meter = Object.create(noop) as Meter;
  meter.createCounter = (name, opts) => {
    if (name !== PROCESSED || onLoss === undefined) return noop.createCounter(name, opts);
    const counter: Counter = {
      add(value, attributes) {
        const error = attributes?.['error.type'];
        if (error === undefined || value <= 0) return;
        onLoss(error === 'queue_full' ? 'queue-full' : 'export-failed', value);
      },
    };
    return counter;
  };
  return { getMeter: () => meter };
}

const headerGetter: TextMapGetter<Readonly<Record<string, string | string[] | undefined>>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};

/** The context a channel's request continues: its `traceparent`/`tracestate` when valid, else none (a new trace). */
export function continuedContext(headers: Readonly<Record<string, string | string[] | undefined>>): Context {
  return headers.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, headers, headerGetter);
}

/** The context of a claim's kept trace (none kept, or not valid: none). */
export function keptContext(kept: KeptTrace | undefined): Context {
  if (kept === undefined) return ROOT_CONTEXT;
  return propagator.extract(ROOT_CONTEXT, { traceparent: kept.traceparent, ...(kept.tracestate === undefined ? {} : { tracestate: kept.tracestate }) }, headerGetter);
}

/** The W3C headers naming the span of `ctx` as the parent: what a call to the account system carries. */
export function traceHeaders(ctx: Context, into: Record<string, string> = {}): Record<string, string> {
  propagator.inject(ctx, into, { set: (carrier, key, value) => { carrier[key] = value; } });
  return into;
}

/**
 * The span of `ctx` as a claim keeps it; undefined when there is none. Its `tracestate` is at most 512 characters
 * (the propagator's parser keeps no more of the channel's header, as W3C Trace Context allows).
 */
export function keptTrace(ctx: Context): KeptTrace | undefined {
  const headers = traceHeaders(ctx);
  if (headers.traceparent === undefined) return undefined;
  return { traceparent: headers.traceparent, ...(headers.tracestate === undefined ? {} : { tracestate: headers.tracestate }) };
}

/** A span started under `parent`, and the context whose children it parents. */
export interface StartedSpan {
  readonly span: Span;
  readonly context: Context;
}

/**
 * Starts a span. Attributes that are undefined are left out; on a span that is not recorded none is even looked at
 * (so the caller may build them cheaply, but should not compute costly ones: use `span.isRecording()`).
 */
export function startSpan(tracing: Tracing, name: string, kind: SpanKind, parent: Context, attributes?: SpanAttributes): StartedSpan {
  const span = tracing.tracer.startSpan(name, { kind }, parent);
  if (attributes !== undefined && span.isRecording()) setAttributes(span, attributes);
  return { span, context: trace.setSpan(parent, span) };
}

/** Sets the attributes that are defined (a span not recorded: nothing). */
export function setAttributes(span: Span, attributes: SpanAttributes): void {
  if (!span.isRecording()) return;
  for (const key in attributes) {
    const value = attributes[key];
    if (value !== undefined) span.setAttribute(key, value);
  }
}

/** The trace id and span id of `ctx`'s span for a log line (pino's names), or nothing. */
export function logIds(ctx: Context): { trace_id: string; span_id: string } | Record<string, never> {
  const sc = trace.getSpanContext(ctx);
  return sc === undefined ? {} : { trace_id: sc.traceId, span_id: sc.spanId };
}
