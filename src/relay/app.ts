import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { EventStore } from '../events/store.js';
import type { AccountClient } from './accountClient.js';
import type { Breaker } from './breaker.js';
import { REPLY_CODES } from './codes.js';
import type { Metrics } from './metrics.js';
import { relayTransfer, type RelayDeps } from './relayTransfer.js';
import { codeReply, type Reply } from './replies.js';
import { GUID_PATTERN } from './transferRequest.js';

export const BODY_LIMIT = 64 * 1024;

export interface AppDeps {
  readonly store: EventStore;
  readonly account: AccountClient;
  readonly metrics: Metrics;
  readonly timeoutMs: number;
  readonly maxAttempts: number;
  readonly minAgeMs?: number | undefined;
  readonly breaker?: Breaker | undefined;
  readonly logger?: FastifyServerOptions['logger'];
}

/** Account numbers in logs show only their last 4 characters. */
export function maskAccount(account: string): string {
  return account.length <= 4 ? account : `${'*'.repeat(account.length - 4)}${account.slice(-4)}`;
}

/** The relay's HTTP surface, separate from the process that listens (tests use it with real sockets too). */
export function buildApp(deps: AppDeps): FastifyInstance {
  const app = Fastify({
    logger: deps.logger ?? false,
    // One line per transfer is written by the route itself (guid, code, latency, masked accounts).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT,
    // Let SIGTERM finish in-flight calls, but not wait on idle keep-alive sockets.
    forceCloseConnections: 'idle',
    return503OnClosing: true,
  });

  const send = (reply: import('fastify').FastifyReply, r: Reply) => {
    deps.metrics.reply(r.code);
    reply.code(r.status).header('content-type', 'application/json; charset=utf-8');
    if (r.replayed) reply.header('idempotent-replayed', 'true');
    return reply.send(r.body);
  };

  // The body is taken as raw bytes, whatever the content type: it is forwarded byte for byte.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_req, body, done) => done(null, body));

  app.setErrorHandler((err: { statusCode?: number; code?: string; message: string }, req, reply) => {
    const status = err.statusCode ?? 500;
    if (status === 413) return send(reply, { ...codeReply('E400', undefined, { message: `body is over the limit of ${BODY_LIMIT} bytes`, field: 'body' }), status: 413 });
    if (status < 500) return send(reply, codeReply('E400', undefined, { message: err.message, field: 'body' }));
    req.log.error({ err }, 'unexpected error');
    // We cannot tell whether a call left: the honest answer is "unknown", never "not sent".
    return send(reply, req.method === 'POST' ? codeReply('E901', undefined) : codeReply('E503', undefined));
  });

  app.setNotFoundHandler((req, reply) => send(reply, codeReply('E404', undefined, { message: `no route ${req.method} ${req.url.split('?')[0]}` })));

  // Every E503 of a transfer is logged once, with the store error's code and cause.
  const relayDeps: RelayDeps = { ...deps, log: (line) => app.log.error(line, 'ledger unavailable') };

  app.post('/v1/transfers', async (req, reply) => {
    const started = performance.now();
    const header = req.headers['idempotency-key'];
    if (Array.isArray(header)) return send(reply, codeReply('E400', undefined, { message: 'Idempotency-Key given more than once', field: 'Idempotency-Key' }));
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const { reply: r, request } = await relayTransfer(relayDeps, body, header);
    req.log.info({
      guid: request?.guid,
      code: r.code,
      status: r.status,
      from: request && maskAccount(request.from),
      to: request && maskAccount(request.to),
      ms: Math.round((performance.now() - started) * 10) / 10,
    }, 'transfer');
    return send(reply, r);
  });

  app.get<{ Params: { guid: string } }>('/v1/transfers/:guid', async (req, reply) => {
    const { guid } = req.params;
    if (!GUID_PATTERN.test(guid)) return send(reply, codeReply('E400', undefined, { message: 'guid does not match the GUID pattern', field: 'guid' }));
    try {
      const row = await deps.store.getLedger(guid);
      if (row === null) return send(reply, codeReply('E404', guid));
      const { request: _request, response, ...rest } = row;
      const view = { ...rest, ...(row.status === 'DONE' ? { response } : {}) };
      reply.code(200).header('content-type', 'application/json; charset=utf-8');
      return reply.send(JSON.stringify(view));
    } catch (err) {
      req.log.error({ err }, 'ledger unavailable');
      return send(reply, codeReply('E503', guid));
    }
  });

  app.get('/healthz', async (req, reply) => {
    try {
      await deps.store.ping();
      reply.code(200).header('content-type', 'application/json; charset=utf-8');
      return reply.send(JSON.stringify({ status: 'ok' }));
    } catch (err) {
      req.log.error({ err }, 'ledger unavailable');
      return send(reply, codeReply('E503', undefined));
    }
  });

  app.get('/metrics', async (_req, reply) => {
    try {
      const text = await deps.metrics.registry.metrics();
      return reply.code(200).header('content-type', deps.metrics.registry.contentType).send(text);
    } catch {
      return send(reply, codeReply('E503', undefined));
    }
  });

  return app;
}

export { REPLY_CODES };
