import type { IncomingMessage } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest, FastifyServerOptions } from 'fastify';
import { deferredChildLogger } from './deferredChildLogger.js';
import { continuedContext, logIds, setAttributes, SpanKind, SpanStatusCode, startSpan, type SpanAttributes, type StartedSpan, type Tracing } from '../telemetry/tracing.js';

const SPAN = Symbol('guidgate.requestSpan');
type Traced = IncomingMessage & { [SPAN]?: StartedSpan | undefined };

/**
 * The server span of every request (CONTRACT.md §10), continuing the channel's `traceparent` when it is valid
 * (else a new trace; an invalid header is ignored, never an error). It starts where fastify makes the request's
 * logger (a pino child made when it first writes: `deferredChildLogger`), so that every line that logger writes
 * carries the span's `trace_id` and `span_id` (pino's names), and ends when the reply is sent (or the request aborted).
 */
export function requestSpans(tracing: Tracing): {
  readonly childLoggerFactory: NonNullable<FastifyServerOptions['childLoggerFactory']>;
  register(app: FastifyInstance): void;
} {
  return {
    childLoggerFactory(logger, bindings, opts, raw) {
      const req = raw as Traced;
      const started = startSpan(tracing, req.method ?? 'HTTP', SpanKind.SERVER, continuedContext(req.headers), { 'http.request.method': req.method });
      req[SPAN] = started;
      return deferredChildLogger(logger, () => ({ ...bindings, ...logIds(started.context) }), opts);
    },
    register(app) {
      app.addHook('onResponse', (req, reply, done) => {
        endSpan(req, reply.statusCode);
        done();
      });
      app.addHook('onRequestAbort', (req, done) => {
        endSpan(req, undefined);
        done();
      });
    },
  };
}

/** The request's server span (and the context its children take); undefined before fastify made its logger. */
export function requestSpan(req: FastifyRequest): StartedSpan | undefined {
  return (req.raw as Traced)[SPAN];
}

/** Adds what the route knows (the GUID, the code, the decision) to the request's span. */
export function describeRequest(req: FastifyRequest, attributes: SpanAttributes): void {
  const started = requestSpan(req);
  if (started !== undefined) setAttributes(started.span, attributes);
}

function endSpan(req: FastifyRequest, status: number | undefined): void {
  const raw = req.raw as Traced;
  const started = raw[SPAN];
  if (started === undefined) return;
  raw[SPAN] = undefined;
  const { span } = started;
  if (span.isRecording()) {
    const route = req.routeOptions.url;
    if (route !== undefined) span.updateName(`${req.method} ${route}`);
    setAttributes(span, { 'http.route': route, 'http.response.status_code': status, 'error.type': status === undefined ? 'aborted' : status >= 500 ? String(status) : undefined });
    if (status === undefined || status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}
