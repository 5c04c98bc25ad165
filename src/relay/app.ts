import { STATUS_CODES, type ServerOptions as HttpServerOptions } from 'node:http';
import type { ServerOptions as HttpsServerOptions } from 'node:https';
import type { Socket } from 'node:net';
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import { isStoreError } from '../events/errors.js';
import type { EventStore } from '../events/store.js';
import { registerAuth, requestKey, seesDetails } from './auth/authHook.js';
import { createKeyUseRecorder } from './auth/keyUses.js';
import type { Key } from './auth/keysFile.js';
import { guardConnections, OTHER_KEEP_ALIVE_MS, type ConnectionGuard } from './connections.js';
import { defaultConsoleDir, registerConsole } from './console.js';
import type { Metrics } from '../telemetry/metrics.js';
import { registerOpenApi, type RouteDoc } from './openapi.js';
import { operatorRoutes } from './operator/routes.js';
import * as S from './operator/schemas.js';
import type { CommandLineSettings } from './operator/reprocessCommand.js';
import { relayTransfer, type RelayDeps } from './relayTransfer.js';
import { createOutcomeWaiters, watchOutcomes, type OutcomeWaiters } from './outcomeWaiters.js';
import { preferredWait } from '../contract/preferWait.js';
import { waitForOutcome } from './waitForOutcome.js';
import type { ContinuityGate, ContinuityView } from '../send/continuityGuard.js';
import { DEFAULTS } from '../shared/defaults.js';
import { maskAccount } from '../shared/maskAccount.js';
import { codeReply, ledgerLog, ledgerUnavailableReply, needsAttention, replyRoute, withRetryAfter, type Reply } from './replies.js';
import { createRequestRecorder, type RequestRecorder } from './requestRecorder.js';
import { describeRequest, requestSpan, requestSpans } from './requestSpans.js';
import { propagating } from '../telemetry/tracing.js';
import { transferView } from '../events/policy.js';
import { GUID_PATTERN, isJsonMediaType } from '../contract/transferRequest.js';
import { REPLY_CODES } from '../contract/codes.js';

export const BODY_LIMIT = 64 * 1024;
/** A GUID is at most 128 characters; percent-encoded, each may take three. Longer is 414. */
const MAX_PARAM_LENGTH = 3 * 128;

/**
 * What the relay's routes run on: the channel's POST's own (`graceMs` is also the grace of the operator API's
 * resolve, `minAgeMs` its floor) and the HTTP server's.
 */
export interface AppDeps extends Pick<RelayDeps, 'account' | 'metrics' | 'timeoutMs' | 'maxAttempts' | 'minAgeMs' | 'graceMs' | 'monotonicNow' | 'breaker' | 'tracing'> {
  /** The continuity guard (CONTRACT.md §9): the send path asks it, `/v1/stats` shows it. None: not watched. */
  readonly continuity?: (ContinuityGate & { view(): ContinuityView }) | undefined;
  readonly store: EventStore;
  readonly logger?: FastifyServerOptions['logger'];
  /** Keys on (CONTRACT.md §6): the keys in force now. Absent: open mode. */
  readonly keys?: () => readonly Key[];
  /** Serve HTTPS (and mutual TLS with `requestCert`) instead of HTTP. */
  readonly https?: HttpsServerOptions;
  /** A request (headers and body) not received in full within this gets 408/E400 and its connection closed. */
  readonly bodyTimeoutMs?: number;
  /** Connections held at most; a new one over it takes an idle one's slot, or is closed if none is idle. */
  readonly maxConnections?: number;
  /** Connections held at most from one address (an IPv6 /64), the same way. */
  readonly maxConnectionsPerAddress?: number;
  /**
   * Why a new transfer would get E503 right now, or null when it would not: what /healthz reports.
   * Default: the store's ping (a rejection's message is the reason).
   */
  readonly readiness?: () => Promise<string | null>;
  /** Where the channel's requests are recorded; default: one writing to `store`, flushed when the app closes. */
  readonly requests?: RequestRecorder;
  /** The built console's folder (default: the package's `dist/console`); null: not built, /console answers E404. */
  readonly consoleDir?: string | null;
  /** serve's ledger and account system, for the command the overview gives for dead letters. */
  readonly commandLine?: CommandLineSettings;
  /** How often the keys' last uses are written to the ledger (default once a minute). */
  readonly keyUsesEveryMs?: number;
  /**
   * The resends waiting for an outcome (`Prefer: wait`), when the caller made them and wrapped its store with
   * `watchOutcomes` (serve: so that the sweep's and the settler's writes wake them too). Absent: the app makes its
   * own, with `maxWaiters`, and wraps `store` for its own writes.
   */
  readonly waiters?: OutcomeWaiters;
  /** Requests waiting at once at most (`--max-waiters`), for the waiters the app makes itself. */
  readonly maxWaiters?: number;
}

const reasonOf = (err: unknown): string => (err instanceof Error && err.message !== '' ? err.message : 'ledger unavailable');

/** The store's ping as a readiness check: its Left's message says why. */
export function storeReadiness(store: EventStore): () => Promise<string | null> {
  return async () => {
    const pinged = await store.ping();
    return E.isLeft(pinged) ? reasonOf(pinged.left) : null;
  };
}

/** The contract's shape for a request refused before it is read as a transfer: E400 with the fitting status. */
function refusal(status: number, code?: string): Reply {
  const e400 = (s: number, field: string, message: string): Reply => ({ ...codeReply('E400', undefined, { message, field }), status: s });
  switch (status) {
    case 408:
      return e400(status, 'body', 'the request was not received in full in time');
    case 413:
      return e400(status, 'body', `body is over the limit of ${BODY_LIMIT} bytes`);
    case 414:
      return e400(status, 'guid', 'a path parameter is too long');
    case 415:
      return e400(status, 'Content-Type', 'Content-Type must be application/json');
    case 431:
      return e400(status, 'headers', 'request headers are too large');
    default:
      return code === 'FST_ERR_BAD_URL' ? e400(400, 'url', 'the URL is malformed') : e400(400, 'body', 'malformed request');
  }
}

/** Node's HTTP parser errors, raised before any route: the status Node itself would answer. */
function clientErrorStatus(code: string | undefined): number {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  if (code === 'HPE_HEADER_OVERFLOW') return 431;
  return 400;
}

/** Sends a reply in the contract's shape and counts it (`guidgate_replies_total`). */
export type SendReply = (reply: FastifyReply, r: Reply) => FastifyReply;

function replySender(metrics: Pick<Metrics, 'reply'>): SendReply {
  return (reply, r) => {
    metrics.reply(r.code, replyRoute(reply.request));
    reply.code(r.status).header('content-type', 'application/json; charset=utf-8');
    if (r.replayed) reply.header('idempotent-replayed', 'true');
    if (r.retryAfterS !== undefined) reply.header('retry-after', String(r.retryAfterS));
    return reply.send(r.body);
  };
}

/** The relay's HTTP surface, separate from the process that listens (tests use it with real sockets too). */
export function buildApp(given: AppDeps): FastifyInstance {
  const waiters = given.waiters ?? createOutcomeWaiters({ store: given.store, maxWaiters: given.maxWaiters ?? DEFAULTS.maxWaiters });
  const deps: AppDeps & { readonly waiters: OutcomeWaiters } = { ...given, waiters, store: given.waiters === undefined ? watchOutcomes(given.store, waiters) : given.store };
  deps.metrics.waitingRequests(() => waiters.waiting);
  // B2xx is a family: its codes are counted as they come.
  deps.metrics.knownReplyCodes([...Object.keys(REPLY_CODES), '0000', 'E500']);
  const send = replySender(deps.metrics);
  // Every request's server span, continuing the channel's trace context; its ids in every line of its logger.
  const spans = requestSpans(deps.tracing ?? propagating);
  const app = createServer(deps, send, spans.childLoggerFactory);
  spans.register(app);
  refuseWhileClosing(app, send);
  const connections = guardConnections(app.server, {
    maxConnections: deps.maxConnections ?? DEFAULTS.maxConnections,
    maxPerAddress: deps.maxConnectionsPerAddress ?? DEFAULTS.maxConnectionsPerAddress,
    onClosed: (reason) => deps.metrics.connectionClosed(reason),
  });

  // The body is taken as raw bytes, whatever the content type: it is forwarded byte for byte.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_req, body, done) => done(null, body));

  if (deps.keys !== undefined) {
    const keyUses = createKeyUseRecorder({ store: deps.store, ...(deps.keyUsesEveryMs === undefined ? {} : { everyMs: deps.keyUsesEveryMs }), onError: (why) => app.log.warn({ reason: why }, 'key uses not written; tried again with the next') });
    // After the last request was answered, before whoever owns the store closes it.
    app.addHook('onClose', () => keyUses.close());
    registerAuth(app, { keys: deps.keys, store: deps.store, send, used: (key) => keyUses.used(key) });
  }
  // Before any route: every route registered with `config.openapi` is described in /openapi.json.
  registerOpenApi(app);
  registerErrorReplies(app, send);
  registerConsole(app, deps.consoleDir === undefined ? defaultConsoleDir() : deps.consoleDir, send);

  const requests = deps.requests ?? createRequestRecorder({
    store: deps.store,
    onLoss: (lost, why) => {
      deps.metrics.requestRecordsLost(lost);
      app.log.error({ lost, reason: why }, 'request records lost');
    },
  });
  // After the last request was answered (app.close waits for them), before whoever owns the store closes it.
  app.addHook('onClose', () => requests.close());

  // Shutdown answers every waiting resend at once, before the server waits for the requests in flight.
  app.addHook('preClose', async () => waiters.close());
  registerChannelRoutes(app, deps, { send, connections, requests });
  registerProbes(app, deps, send);
  void app.register(operatorRoutes({
    store: deps.store,
    account: deps.account,
    metrics: deps.metrics,
    breaker: deps.breaker,
    continuity: deps.continuity,
    timeoutMs: deps.timeoutMs,
    maxAttempts: deps.maxAttempts,
    minAgeMs: deps.minAgeMs ?? DEFAULTS.minAgeMs,
    graceMs: deps.graceMs ?? DEFAULTS.graceMs,
    monotonicNow: deps.monotonicNow,
    tracing: deps.tracing,
    send,
    commandLine: deps.commandLine,
  }));
  return app;
}

/**
 * Once the server is closing (SIGTERM), a request that still arrives whole on an open connection is refused in the
 * contract's shape, before any other hook runs for it: E503, nothing stored, nothing sent (fastify adds
 * `Connection: close`). In place of fastify's own 503, whose body has no `code`.
 */
function refuseWhileClosing(app: FastifyInstance, send: SendReply): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', (_req, reply, done) => {
    if (!closing) return done();
    void send(reply, withRetryAfter(codeReply('E503', undefined, { message: 'the relay is shutting down: nothing stored, nothing sent; send it again' }), 1));
  });
}

/** Fastify with the contract's limits and time limits, and the contract's shape for what is refused below the routes. */
function createServer(deps: AppDeps, send: SendReply, childLoggerFactory: NonNullable<FastifyServerOptions['childLoggerFactory']>): FastifyInstance {
  const bodyTimeoutMs = deps.bodyTimeoutMs ?? DEFAULTS.bodyTimeoutMs;
  // The HTTPS server has the same request API; fastify's types only tell them apart by a type parameter.
  const serverTimeouts = {
    requestTimeout: bodyTimeoutMs, // also here: Node refuses a headersTimeout over the requestTimeout it is built with
    headersTimeout: bodyTimeoutMs,
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(bodyTimeoutMs / 4))),
  };
  return (Fastify as (o: FastifyServerOptions & { https?: HttpsServerOptions; http?: HttpServerOptions }) => FastifyInstance)({
    logger: deps.logger ?? false,
    // One line per transfer is written by the route itself (guid, code, latency, masked accounts).
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory,
    bodyLimit: BODY_LIMIT,
    // Let SIGTERM finish in-flight calls, but not wait on idle keep-alive sockets.
    forceCloseConnections: 'idle',
    // Refused in the contract's shape instead (refuseWhileClosing).
    return503OnClosing: false,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // The operator routes' schemas (the channel API has none): no type coercion, no silent removal of unknown
    // fields; a value of the wrong type or an unknown field is E400 naming it.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
    // Node measures the request from its first byte to its last; the headers get no longer than the whole.
    requestTimeout: bodyTimeoutMs,
    // Every connection's idle keep-alive until it carries a channel's request (connections.ts).
    keepAliveTimeout: OTHER_KEEP_ALIVE_MS,
    // Fastify hands `http` to http.createServer, or only `https` to https.createServer: the limits go in whichever is used.
    ...(deps.https === undefined ? { http: serverTimeouts } : { https: { ...deps.https, ...serverTimeouts } }),
    frameworkErrors: (err, _req, reply) => send(reply, refusal(err.statusCode ?? 400, err.code)),
    clientErrorHandler: answerClientError(deps.metrics),
  });
}

/** Node's HTTP parser errors (before any request object exists): answered on the socket in the contract's shape. */
function answerClientError(metrics: Pick<Metrics, 'reply'>) {
  return (err: Error & { code?: string }, socket: Socket): void => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    // As Node does: answer only when no response of ours has started on this socket.
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (socket.writable && inFlight?.headersSent !== true) {
      const r = refusal(clientErrorStatus(err.code));
      metrics.reply(r.code, 'unmatched');
      socket.write(
        `HTTP/1.1 ${r.status} ${STATUS_CODES[r.status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\n` +
          `Content-Length: ${Buffer.byteLength(r.body)}\r\nConnection: close\r\n\r\n${r.body}`,
      );
    }
    socket.destroy(err);
  };
}

/** A route's own error (a 4xx: E400 with its status) or an unexpected one, and a route that does not exist (E404). */
function registerErrorReplies(app: FastifyInstance, send: SendReply): void {
  app.setErrorHandler((err: { statusCode?: number; code?: string; message: string }, req, reply) => {
    const status = err.statusCode ?? 500;
    if (status < 500) return send(reply, refusal(status, err.code));
    req.log.error({ err }, 'unexpected error');
    // We cannot tell whether a call left: the honest answer is "unknown", never "not sent".
    return send(reply, req.method === 'POST' ? codeReply('E901', undefined) : codeReply('E503', undefined));
  });
  app.setNotFoundHandler((req, reply) => send(reply, codeReply('E404', undefined, { message: `no route ${req.method} ${req.url.split('?')[0]}` })));
}

/** The channel API (CONTRACT.md §2): POST /v1/transfers and GET /v1/transfers/{guid}. */
function registerChannelRoutes(app: FastifyInstance, deps: AppDeps & { readonly waiters: OutcomeWaiters }, parts: { send: SendReply; connections: ConnectionGuard; requests: RequestRecorder }): void {
  const { send, connections, requests } = parts;
  // Every E503 of a transfer is logged once, with the store error's code and cause.
  const relayDeps: RelayDeps = { ...deps, log: ledgerLog(app.log), sendLog: app.log };

  app.post('/v1/transfers', { config: { openapi: TRANSFER_DOC } }, async (req, reply) => {
    const started = performance.now();
    const arrivedAt = Date.now();
    connections.carriesChannel(req.raw, reply.raw);
    if (!isJsonMediaType(req.headers['content-type'])) return send(reply, refusal(415));
    const header = req.headers['idempotency-key'];
    if (Array.isArray(header)) return send(reply, codeReply('E400', undefined, { message: 'Idempotency-Key given more than once', field: 'Idempotency-Key' }));
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const key = requestKey(req)?.name;
    const relay = () => relayTransfer(relayDeps, body, header, key, { trace: requestSpan(req)?.context, log: ledgerLog(req.log), sendLog: req.log });
    let result = await relay();
    // Prefer: wait=N on a GUID in progress: answered once its outcome is recorded, or after N seconds.
    const wait = preferredWait(req.headers['prefer']);
    let waited = false;
    if (wait !== null && result.decision === 'in-progress' && result.request !== undefined) {
      const gone = new AbortController();
      const onClose = (): void => {
        if (!reply.raw.writableFinished) gone.abort();
      };
      reply.raw.once('close', onClose);
      try {
        ({ result, waited } = await waitForOutcome(deps.waiters, { ...result, request: result.request }, wait, relay, gone.signal));
      } finally {
        reply.raw.off('close', onClose);
      }
      if (waited) reply.header('preference-applied', `wait=${wait}`);
    }
    const { reply: r, request, known, decision } = result;
    describeRequest(req, { 'guidgate.guid': request?.guid, 'guidgate.code': r.code, 'guidgate.decision': decision });
    // Every request for a GUID the ledger has, resends and refusals included: buffered, written in batches.
    if (request !== undefined && known !== undefined) {
      requests.record({ guid: request.guid, at: arrivedAt, key: key ?? null, code: r.code, fingerprintMatch: known.fingerprintMatch });
    }
    req.log[needsAttention(r.code) ? 'warn' : 'info']({
      guid: request?.guid,
      code: r.code,
      status: r.status,
      from: request && maskAccount(request.from),
      to: request && maskAccount(request.to),
      ms: Math.round((performance.now() - started) * 10) / 10,
      ...(waited ? { waited: wait } : {}),
    }, 'transfer');
    return send(reply, r);
  });

  app.get<{ Params: { guid: string } }>('/v1/transfers/:guid', { config: { openapi: ROW_DOC } }, async (req, reply) => {
    const { guid } = req.params;
    connections.carriesChannel(req.raw, reply.raw);
    if (!GUID_PATTERN.test(guid)) return send(reply, codeReply('E400', undefined, { message: 'guid does not match the GUID pattern', field: 'guid' }));
    const read = await deps.store.getLedger(guid);
    if (E.isLeft(read)) return send(reply, ledgerUnavailableReply(guid, read.left, ledgerLog(req.log)));
    const row = read.right;
    if (row === null) return send(reply, codeReply('E404', guid));
    reply.code(200).header('content-type', 'application/json; charset=utf-8');
    return reply.send(JSON.stringify(transferView(row)));
  });
}

/** /healthz's reason for a caller without a `read` or `admin` key when keys are on: no connection details. */
export const PUBLIC_UNREADY_REASON = 'the ledger cannot take new transfers now (the log says why; so does /healthz asked with a key with the read or admin scope)';

/** What a load balancer and a scraper ask: /healthz (readiness) and /metrics. */
function registerProbes(app: FastifyInstance, deps: AppDeps, send: SendReply): void {
  const readiness = deps.readiness ?? storeReadiness(deps.store);
  // Readiness: 200 only when a new transfer would not get E503 now, so a load balancer can route around us.
  app.get('/healthz', { config: { openapi: HEALTH_DOC } }, async (req, reply) => {
    const reason = await readiness().catch(reasonOf);
    if (reason !== null) {
      // The reason may name the database's hosts, ports and user: only for a caller who may see them (seesDetails).
      const shown = seesDetails(deps.keys, req.headers.authorization) ? reason : PUBLIC_UNREADY_REASON;
      return send(reply, codeReply('E503', undefined, { reason: shown }));
    }
    reply.code(200).header('content-type', 'application/json; charset=utf-8');
    return reply.send(JSON.stringify({ status: 'ok' }));
  });

  app.get('/metrics', { config: { openapi: METRICS_DOC } }, async (req, reply) => {
    try {
      const text = await deps.metrics.registry.metrics();
      return reply.code(200).header('content-type', deps.metrics.registry.contentType).send(text);
    } catch (err) {
      // The ledger gauges read the store at scrape time; its Left is thrown there (orThrow) and lands here.
      if (isStoreError(err)) return send(reply, ledgerUnavailableReply(undefined, err, ledgerLog(req.log)));
      req.log.error({ err }, 'metrics failed');
      return send(reply, codeReply('E503', undefined));
    }
  });
}

const TRANSFER_DOC: RouteDoc = {
  summary: 'A transfer: relayed to the account system at most once per GUID; every resend gets the first answer back',
  body: { schema: S.transferBody, required: true },
  headers: {
    'Idempotency-Key': { description: 'the GUID, when not in the body (both given: they must be equal)', schema: { type: 'string', pattern: GUID_PATTERN.source } },
    Prefer: {
      description:
        'wait=N (RFC 7240; N whole seconds, 1–30; another value is ignored): a resend of a GUID in progress waits until its outcome is recorded (by this relay or another on the ledger) or N seconds pass, then is answered as a resend at that moment; a reply that waited carries Preference-Applied: wait=N. Over --max-waiters: E903 at once, without it',
      schema: { type: 'string', example: 'wait=10' },
    },
  },
  example: { body: { guid: S.EXAMPLE_GUID, from: '6222021001', to: '6222021002', amount: 1500, currency: 'CNY' } },
  responses: {
    200: { description: "0000, B2xx or E500: the account system's answer, byte for byte (a resend carries Idempotent-Replayed: true; one that waited, Prefer: wait=N, Preference-Applied: wait=N)", schema: S.definiteReply },
    400: 'E400',
    408: 'E400 the request was not received in full within --body-timeout',
    409: 'E903 (in progress; with Prefer: wait=N, still in progress after N seconds, and Preference-Applied: wait=N)',
    410: 'E905',
    413: 'E400 the body is over 64 KiB',
    415: 'E400 Content-Type is not application/json',
    422: 'E904',
    431: 'E400 the request headers are over 16 KiB',
    503: { description: 'E902 (not sent; also the attempt cap and the open breaker) or E503 (ledger unavailable; not sent); each with a Retry-After (seconds)', schema: S.errorReply },
    504: 'E901',
  },
};

const ROW_DOC: RouteDoc = {
  summary: "A GUID's ledger row (never the request nor the fingerprint)",
  params: S.guidParams,
  example: { params: { guid: S.EXAMPLE_GUID } },
  responses: { 200: { description: 'the row', schema: S.transferRow }, 400: 'E400', 404: 'E404', 414: 'E400 the GUID is over 384 characters', 503: 'E503' },
};

const HEALTH_DOC: RouteDoc = {
  summary: 'Readiness: 200 only when a new transfer would not get E503 now',
  example: {},
  responses: { 200: { description: 'ready', schema: { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } } }, 503: 'E503 not ready; reason says why (with keys on, to a key with the read or admin scope; to any other caller, a reason without connection details)' },
};

const METRICS_DOC: RouteDoc = {
  summary: 'Prometheus metrics',
  example: {},
  responses: { 200: { description: 'Prometheus text format', contentType: 'text/plain', schema: { type: 'string' } }, 503: 'E503' },
};

