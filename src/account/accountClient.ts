/**
 * HTTP client for the account system (contract section 3).
 *
 * The account system applies every POST /transfer it receives, so this client must never send one twice:
 *  - a dedicated undici Pool, no RetryAgent, no retry/redirect interceptors;
 *  - pipelining 1 (a POST never queues behind another in-flight request on the same socket; undici re-dispatches
 *    the pipelined requests behind a failed head, so pipelining > 1 would be a hidden resend);
 *  - the handler refuses a second `onRequestStart` for the same call (aborts before writing), as a last guard;
 *  - every failure goes through classifyFailure; only "certainly never written" becomes `failed`.
 *
 * We talk to undici through `dispatch` with our own handler rather than `request()`, because the handler's
 * `onRequestStart` tells us exactly when the request is handed to a socket: undici's HTTP/1 writer calls it
 * synchronously right before its first write, on a new socket or a kept-alive one, and writes nothing once it
 * aborted. Before that nothing of the request can have left, which lets the overall deadline classify a call still
 * queued or connecting as failed/connect-timeout instead of unknown, and it is where the deadline is kept: the
 * monotonic clock is read there, since the deadline's timer may not have run (a loop stalled inside a callback
 * polls I/O before timers when it comes back, so a connect completed meanwhile would be written first).
 */
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'node:http';
import type { CallFailedReason, CallUnknownReason } from '../events/codecs.js';
import { decodeDefinite, namesGuid } from './accountAnswer.js';
import { classifyFailure } from './classifyFailure.js';
import { createInquiryPacer, type InquiryPacerOptions, type InquiryTurn } from './inquiryPacer.js';
import { propagating, ROOT_CONTEXT, SpanKind, SpanStatusCode, setAttributes, startSpan, traceHeaders, type Context, type Tracing } from '../telemetry/tracing.js';

export type CallOutcome =
  | { kind: 'definite'; code: string; body: string; status: 200; latencyMs: number } // decodeDefinite: HTTP 200, a definite code, no other GUID
  | { kind: 'unknown'; reason: CallUnknownReason; detail: string; latencyMs: number }
  | { kind: 'failed'; reason: CallFailedReason; detail: string; latencyMs: number };

export type InquiryOutcome =
  | { kind: 'processed'; code: string; body: string } // decodeDefinite, as for a POST
  | { kind: 'absent' } // 404
  /** Anything else. `reached`: the account system answered (with something we cannot use), or no answer came at all. */
  | { kind: 'unknown'; reached: boolean; detail: string; status?: number }
  /**
   * Not asked: the inquiry budget (`--inquiry-rate`) had no turn for it, a channel's request over the budget (it may
   * come back in `retryAfterMs`) or a wait given up (the run stopped, the client closed).
   */
  | { kind: 'deferred'; retryAfterMs: number };

/** The HTTP status an inquiry got (for the audit trail), or null when no answer came (or it was not asked). */
export function inquiryHttpStatus(a: InquiryOutcome): number | null {
  return a.kind === 'processed' ? 200 : a.kind === 'absent' ? 404 : a.kind === 'unknown' ? (a.status ?? null) : null;
}

export interface AccountClientOptions {
  baseUrl: string;
  /** Header AND body timeout for POST, and the overall deadline of one call. */
  timeoutMs: number;
  /** Default min(timeoutMs, 3000). */
  connectTimeoutMs?: number;
  /** Overall deadline of one inquiry; default timeoutMs. */
  inquiryTimeoutMs?: number;
  /** Pool size; default 128. */
  connections?: number;
  /** CA certificates (PEM) an `https://` account system's certificate must chain to, instead of the system's. */
  ca?: string | Buffer;
  /** Where the calls' client spans go (CONTRACT.md §10); default: none recorded, the trace context still passed on. */
  tracing?: Tracing;
  /** The process's inquiry budget (`--inquiry-rate`, CONTRACT.md §7): every inquiry takes a turn; none: no cap. */
  inquiryPacing?: InquiryPacerOptions | undefined;
}

/**
 * The trace a call belongs to: its span is a child of `parent`'s (a channel request's, a settle run's for a row),
 * and the account system gets a `traceparent` naming it. `attempt`: the POST's attempt, 1 for the first send.
 */
export interface CallTrace {
  readonly parent?: Context | undefined;
  readonly attempt?: number | undefined;
}

export interface AccountClient {
  /**
   * POST {base}/transfer with `body` byte for byte (a string is sent as its UTF-8 bytes). `guid` is the
   * transfer's GUID: an answer naming another GUID is not definite. `latestStart` (on `performance.now()`'s
   * clock): the call's deadline counts from it when the call starts later, so that a delay before the call does not
   * move its deadline past what the send window allows.
   */
  transfer(body: string | Uint8Array, guid: string, trace?: CallTrace, latestStart?: number): Promise<CallOutcome>;
  /**
   * GET {base}/transfer/{guid}. Never `failed`: a GET is harmless, so every doubt is `unknown`. Under the inquiry
   * budget, `turn` says how it waits: background work waits (oldest row first) and is `deferred` only if it gives up;
   * a channel's request is `deferred` at once when the budget has no room. Default: waits, after every older row.
   */
  inquire(guid: string, trace?: CallTrace, turn?: InquiryTurn): Promise<InquiryOutcome>;
  close(): Promise<void>;
}

/** The turn of an inquiry whose caller names none: it waits, after every row that waits. */
const AFTER_EVERY_ROW: InquiryTurn = { waits: true, rowSentAt: Number.MAX_SAFE_INTEGER };

/** Larger answers are not an account-system answer we understand; the call is then unknown. */
const MAX_RESPONSE_BYTES = 1024 * 1024;

/*
 * Keep-alive trade-off. Reusing sockets saves a TCP (and TLS) handshake per transfer, which matters at volume.
 * The price is the stale-socket race: the server may close an idle socket just as we write a request to it.
 * We then see ECONNRESET / EPIPE / "other side closed" and must report UNKNOWN (E901, resolved later by
 * inquiry), never FAILED and never a silent retry, because we cannot prove the server did not read it.
 * To keep that window small we drop idle sockets early: 4 s without a server hint, and a server's advertised
 * `Keep-Alive: timeout=N` minus a 2 s threshold (capped at 4 s). undici 7 additionally checks an idle socket
 * for a pending FIN/RST for one event-loop turn before reusing it.
 */
const KEEP_ALIVE_TIMEOUT_MS = 4_000;
const KEEP_ALIVE_MAX_TIMEOUT_MS = 4_000;
const KEEP_ALIVE_THRESHOLD_MS = 2_000;

type Exchange =
  | { type: 'response'; status: number; bytes: Buffer }
  /** `written`: onRequestStart ran, so bytes of the request may have left. */
  | { type: 'error'; written: boolean; error: unknown }
  /** `atWrite`: found past the deadline by the clock when undici was about to write, before the timer ran. */
  | { type: 'deadline'; written: boolean; atWrite: boolean }
  | { type: 'local-abort'; detail: string }
  | { type: 'redispatch' };

interface ExchangeSpec {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer | null;
  /** undici's header and body timeouts. */
  readonly timeoutMs: number;
  /** The overall deadline, on `performance.now()`'s clock: no byte of the request is written at or after it. */
  readonly deadlineAt: number;
}

class LocalAbort extends Error {
  override readonly name = 'LocalAbort';
}

/** One request/response over the pool, with an overall deadline; never rejects. */
function exchange(pool: Dispatcher, spec: ExchangeSpec): Promise<Exchange> {
  return new Promise<Exchange>((resolve) => {
    let settled = false;
    let started = false;
    let controller: Dispatcher.DispatchController | undefined;
    let status = 0;
    let size = 0;
    const chunks: Buffer[] = [];

    const finish = (result: Exchange): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };

    const timer = setTimeout(() => {
      // Not started: the request is still queued or its socket still connecting. onRequestStart will abort it
      // before a byte is written (undici checks `aborted` right after onRequestStart), so this call is over.
      finish({ type: 'deadline', written: started, atWrite: false }); // first: the abort below reports an error we must not classify
      controller?.abort(new LocalAbort('deadline'));
    }, Math.max(0, spec.deadlineAt - performance.now()));

    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c: Dispatcher.DispatchController): void {
        if (settled) {
          c.abort(new LocalAbort('call already over'));
          return;
        }
        if (!started && performance.now() >= spec.deadlineAt) {
          finish({ type: 'deadline', written: false, atWrite: true });
          c.abort(new LocalAbort('deadline passed before the request was written'));
          return;
        }
        if (started) {
          // undici wants to hand the same request to a socket a second time: that would be a resend.
          finish({ type: 'redispatch' });
          c.abort(new LocalAbort('refusing to re-dispatch a request'));
          return;
        }
        started = true;
        controller = c;
      },
      onResponseStart(_c: Dispatcher.DispatchController, statusCode: number, _headers: IncomingHttpHeaders): void {
        if (statusCode >= 200) status = statusCode; // 1xx informational answers are not the answer
      },
      onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
        size += chunk.length;
        if (size > MAX_RESPONSE_BYTES) {
          const detail = `response body over ${MAX_RESPONSE_BYTES} bytes`;
          finish({ type: 'local-abort', detail });
          c.abort(new LocalAbort(detail));
          return;
        }
        chunks.push(chunk);
      },
      onResponseEnd(): void {
        finish({ type: 'response', status, bytes: Buffer.concat(chunks, size) });
      },
      onResponseError(_c: Dispatcher.DispatchController, error: Error): void {
        finish({ type: 'error', written: started, error });
      },
    };

    try {
      pool.dispatch(
        {
          method: spec.method,
          path: spec.path,
          headers: spec.headers,
          body: spec.body,
          idempotent: spec.method === 'GET',
          headersTimeout: spec.timeoutMs,
          bodyTimeout: spec.timeoutMs,
        },
        handler,
      );
    } catch (error) {
      finish({ type: 'error', written: started, error });
    }
  });
}

function joinPath(prefix: string, suffix: string): string {
  return `${prefix.replace(/\/+$/, '')}${suffix}`;
}

export function createAccountClient(opts: AccountClientOptions): AccountClient {
  const base = new URL(opts.baseUrl);
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    throw new Error(`account url must be http(s): ${opts.baseUrl}`);
  }
  if (!(opts.timeoutMs > 0)) throw new Error(`timeoutMs must be > 0, got ${opts.timeoutMs}`);
  const timeoutMs = opts.timeoutMs;
  const connectTimeoutMs = opts.connectTimeoutMs ?? Math.min(timeoutMs, 3_000);
  const inquiryTimeoutMs = opts.inquiryTimeoutMs ?? timeoutMs;

  const pool = new Pool(base.origin, {
    connections: opts.connections ?? 128,
    pipelining: 1,
    allowH2: false,
    connect: { timeout: connectTimeoutMs, ...(opts.ca === undefined ? {} : { ca: opts.ca }) },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    keepAliveMaxTimeout: KEEP_ALIVE_MAX_TIMEOUT_MS,
    keepAliveTimeoutThreshold: KEEP_ALIVE_THRESHOLD_MS,
  });

  const transferPath = joinPath(base.pathname, '/transfer');
  const tracing = opts.tracing ?? propagating;
  const server = { 'server.address': base.hostname.replace(/^\[|\]$/g, ''), 'server.port': Number(base.port || (base.protocol === 'https:' ? 443 : 80)) };

  /** The call's client span (child of the caller's), and the headers that name it to the account system. */
  const callSpan = (method: 'GET' | 'POST', template: string, guid: string, trace: CallTrace | undefined, headers: Record<string, string>) => {
    const attempt = trace?.attempt;
    const started = startSpan(tracing, `${method} ${template}`, SpanKind.CLIENT, trace?.parent ?? ROOT_CONTEXT, {
      'http.request.method': method,
      ...server,
      'url.template': template,
      'guidgate.guid': guid,
      'guidgate.attempt': attempt,
      // OpenTelemetry's HTTP conventions: the ordinal of a resend, set only on one.
      'http.request.resend_count': attempt !== undefined && attempt > 1 ? attempt - 1 : undefined,
    });
    traceHeaders(started.context, headers);
    return started.span;
  };

  /** Ends a call's span with what it came to (`status`: the HTTP status, when an answer came). */
  const endCall = (span: ReturnType<typeof callSpan>, outcome: string, status: number | undefined, errorType?: string): void => {
    if (span.isRecording()) {
      setAttributes(span, { 'http.response.status_code': status, 'guidgate.outcome': outcome, 'error.type': errorType });
      if (errorType !== undefined) span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  };

  async function transfer(body: string | Uint8Array, guid: string, trace?: CallTrace, latestStart?: number): Promise<CallOutcome> {
    const t0 = performance.now();
    const deadlineAt = Math.min(t0, latestStart ?? t0) + timeoutMs;
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    const span = callSpan('POST', '/transfer', guid, trace, headers);
    const result = await exchange(pool, {
      method: 'POST',
      path: transferPath,
      headers,
      body: bytes,
      timeoutMs,
      deadlineAt,
    });
    const outcome = classifyTransfer(result, guid, performance.now() - t0, deadlineAt - t0);
    endCall(span, outcome.kind, result.type === 'response' ? result.status : undefined, outcome.kind === 'definite' ? undefined : outcome.reason);
    return outcome;
  }

  /** `budgetMs`: how long the call had from its start to its deadline. */
  function classifyTransfer(result: Exchange, guid: string, latencyMs: number, budgetMs: number): CallOutcome {
    switch (result.type) {
      case 'response': {
        const d = decodeDefinite(result.status, result.bytes, guid);
        if (d.ok) return { kind: 'definite', code: d.code, body: d.text, status: 200, latencyMs };
        return { kind: 'unknown', reason: 'non-definite', detail: d.detail, latencyMs };
      }
      case 'deadline': {
        const budget = Math.round(budgetMs);
        if (result.written) return { kind: 'unknown', reason: 'timeout', detail: `no complete answer within ${budget}ms`, latencyMs };
        const detail = result.atWrite
          ? `not written: its ${budget}ms deadline had passed when the request could be written (the event loop was held up); no byte of it left`
          : `not handed to a socket within ${budget}ms (queued or connecting)`;
        return { kind: 'failed', reason: 'connect-timeout', detail, latencyMs };
      }
      case 'local-abort':
        return { kind: 'unknown', reason: 'non-definite', detail: result.detail, latencyMs };
      case 'redispatch':
        return { kind: 'unknown', reason: 'non-definite', detail: 'client tried to re-dispatch the request; refused', latencyMs };
      case 'error': {
        const c = classifyFailure(result.error, { requestWritten: result.written });
        return c.outcome === 'FAILED'
          ? { kind: 'failed', reason: c.reason, detail: c.detail, latencyMs }
          : { kind: 'unknown', reason: c.reason, detail: c.detail, latencyMs };
      }
    }
  }

  const pacer = opts.inquiryPacing === undefined ? null : createInquiryPacer(opts.inquiryPacing);

  async function inquire(guid: string, trace?: CallTrace, turn: InquiryTurn = AFTER_EVERY_ROW): Promise<InquiryOutcome> {
    if (pacer !== null) {
      const given = await pacer.turn(turn);
      if (!given.go) return { kind: 'deferred', retryAfterMs: given.retryAfterMs };
    }
    const deadlineAt = performance.now() + inquiryTimeoutMs;
    const headers: Record<string, string> = { accept: 'application/json' };
    const span = callSpan('GET', '/transfer/{guid}', guid, trace, headers);
    const result = await exchange(pool, {
      method: 'GET',
      path: joinPath(base.pathname, `/transfer/${encodeURIComponent(guid)}`),
      headers,
      body: null,
      timeoutMs: inquiryTimeoutMs,
      deadlineAt,
    });
    const answer = classifyInquiry(result, guid);
    endCall(span, answer.kind, result.type === 'response' ? result.status : undefined, answer.kind === 'unknown' ? (answer.reached ? 'non-definite' : 'unreachable') : undefined);
    return answer;
  }

  function classifyInquiry(result: Exchange, guid: string): InquiryOutcome {
    switch (result.type) {
      case 'response': {
        if (result.status === 404) return namesGuid(result.bytes, guid) ? { kind: 'absent' } : { kind: 'unknown', reached: true, detail: 'HTTP 404 without a JSON body naming the GUID', status: 404 };
        const d = decodeDefinite(result.status, result.bytes, guid);
        return d.ok ? { kind: 'processed', code: d.code, body: d.text } : { kind: 'unknown', reached: true, detail: d.detail, status: result.status };
      }
      case 'deadline':
        return { kind: 'unknown', reached: false, detail: `no complete answer within ${inquiryTimeoutMs}ms` };
      case 'local-abort':
        // Only an answer we stopped reading (too large) aborts locally: the other side did answer.
        return { kind: 'unknown', reached: true, detail: result.detail };
      case 'redispatch':
        return { kind: 'unknown', reached: false, detail: 'client tried to re-dispatch the request; refused' };
      case 'error':
        return { kind: 'unknown', reached: false, detail: classifyFailure(result.error).detail };
    }
  }

  return {
    transfer,
    inquire,
    async close(): Promise<void> {
      pacer?.close();
      await pool.close();
    },
  };
}
