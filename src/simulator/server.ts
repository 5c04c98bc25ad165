import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import Fastify from 'fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  DEFAULT_FAULTS,
  decodeFaultsPatch,
  makePrng,
  mergeFaults,
  overrideFor,
  type FaultMode,
  type Faults,
} from './faults.js';
import { SimStore, type GuidStats, type JournalCursor, type Outcome, type SimulatorStats, type TransferInput } from './store.js';

export interface SimulatorOptions {
  /** 0 (the default) picks an ephemeral port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Every POST answer waits this long before applying and answering (default 0). */
  latencyMs?: number;
  /** SQLite file for accounts, applications, answers and call counts; in-memory when absent. */
  dbPath?: string;
  /** Balance of an account on first use, in minor units (default 1_000_000_000_000). */
  initialBalance?: number;
  /** Start-up faults (merged over the defaults; `refuseForMs` is ignored here). */
  faults?: Partial<Faults>;
  /** Fastify request logging (default off). */
  logger?: boolean;
}

export interface Simulator {
  /** `http://host:port`, no trailing slash. */
  url: string;
  port: number;
  stats(): SimulatorStats;
  guidStats(guid: string): GuidStats;
  /** Inquiries (`GET /transfer/{guid}`) received about this GUID since start; in process only (tests), not in /stats. */
  inquiries(guid: string): number;
  /**
   * Every inquiry received since start, and the most received within any one second (a sliding second, not a clock
   * one): what an account system sees of a relay's inquiry pacing. In process only (tests, benches).
   */
  inquiryLoad(): { total: number; peakPerSecond: number };
  /** Balance of an account (initial balance if never used); null for a non-existent (`X…`) account. */
  balance(id: string): number | null;
  faults(): Faults;
  /** Merges a partial Faults (top-level keys replace); throws a TypeError naming a bad field. */
  setFaults(f: Partial<Faults>): void;
  /** Back to the built-in defaults (normal behaviour), not to the start-up faults. */
  resetFaults(): void;
  /** Stops listening for `ms` (connections refused), then listens again on the same port; resolves then. */
  refuseConnections(ms: number): Promise<void>;
  close(): Promise<void>;
}

export const DEFAULT_INITIAL_BALANCE = 1_000_000_000_000;

const GUID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const ACCOUNT_RE = /^[A-Za-z0-9-]{1,34}$/;
const CURRENCY_RE = /^[A-Z]{3}$/;

type ParsedTransfer =
  | { ok: true; value: TransferInput }
  | { ok: false; guid: string | null; message: string };

/** Parses and checks a transfer body (the contract's rules for the fields it knows; others are ignored). */
export function parseTransfer(raw: string): ParsedTransfer {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    return { ok: false, guid: null, message: 'body is not valid JSON' };
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, guid: null, message: 'body must be a JSON object' };
  }
  const b = body as Record<string, unknown>;
  const guid = typeof b['guid'] === 'string' ? b['guid'] : null;
  const bad = (field: string): ParsedTransfer => ({ ok: false, guid, message: `invalid field: ${field}` });
  if (guid === null || !GUID_RE.test(guid)) return bad('guid');
  const { from, to, amount, currency } = b;
  if (typeof from !== 'string' || !ACCOUNT_RE.test(from)) return bad('from');
  if (typeof to !== 'string' || !ACCOUNT_RE.test(to) || to === from) return bad('to');
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < 1) return bad('amount');
  if (currency !== undefined && (typeof currency !== 'string' || !CURRENCY_RE.test(currency))) {
    return bad('currency');
  }
  return { ok: true, value: { guid, from, to, amount, currency: currency ?? null } };
}

function render(guid: string, o: Outcome): string {
  switch (o.kind) {
    case 'done':
      return JSON.stringify({ guid, code: '0000', message: 'transfer done', txId: o.txId, fromBalance: o.fromBalance });
    case 'insufficient':
      return JSON.stringify({ guid, code: 'B201', message: 'insufficient funds', fromBalance: o.fromBalance });
    case 'unknown-account':
      return JSON.stringify({ guid, code: 'B202', message: `unknown account: ${o.account}` });
  }
}

const JSON_TYPE = 'application/json; charset=utf-8';

function sendJson(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).header('content-type', JSON_TYPE).send(body);
}

function formatUrl(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export async function startSimulator(opts: SimulatorOptions): Promise<Simulator> {
  const host = opts.host ?? '127.0.0.1';
  const latencyMs = opts.latencyMs ?? 0;
  const store = new SimStore(opts.dbPath, opts.initialBalance ?? DEFAULT_INITIAL_BALANCE);

  let faults: Faults = mergeFaults(DEFAULT_FAULTS, opts.faults ?? {});
  let rng = makePrng(faults.seed);
  let closed = false;

  // Pending waits, so that close() can cut them short.
  const sleepers = new Map<NodeJS.Timeout, (v: boolean) => void>();
  /** Resolves true after `ms`, or false at once if the simulator is closing. */
  const sleep = (ms: number): Promise<boolean> => {
    if (closed) return Promise.resolve(false);
    if (ms <= 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        sleepers.delete(timer);
        resolve(!closed);
      }, ms);
      sleepers.set(timer, resolve);
    });
  };

  const inquiries = new Map<string, number>();
  // The arrival times of the last second's inquiries, oldest first, for the busiest second seen.
  const lastSecond: number[] = [];
  const load = { total: 0, peakPerSecond: 0 };
  const app = Fastify({
    logger: opts.logger ?? false,
    forceCloseConnections: true,
    bodyLimit: 1024 * 1024,
    routerOptions: { maxParamLength: 1024 },
  });

  // Every socket, so that close() can end held ones.
  const sockets = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  // Bodies are taken as raw strings and parsed by the handlers, so that a bad body gets a clean answer.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));

  app.setErrorHandler((err: { statusCode?: number; message?: string }, _req, reply) => {
    const status = typeof err.statusCode === 'number' && err.statusCode >= 400 ? err.statusCode : 500;
    const code = status < 500 ? 'E400' : 'E999';
    return sendJson(reply, status, JSON.stringify({ code, message: err.message ?? 'error' }));
  });
  app.setNotFoundHandler((_req, reply) =>
    sendJson(reply, 404, JSON.stringify({ code: 'E404', message: 'no such route' })),
  );

  // While refusing, a request that still arrives on an old keep-alive connection meets a dead server.
  let refusal: { timer: NodeJS.Timeout | undefined; relistening: boolean; done: Promise<void>; resolve: () => void } | undefined;
  app.addHook('onRequest', async (request, reply) => {
    if (refusal !== undefined) {
      reply.hijack();
      request.raw.socket.destroy();
    }
  });
  // An answer that goes out during a refusal window closes its connection, so the client does not reuse it.
  app.addHook('onSend', async (_request, reply, payload) => {
    if (refusal !== undefined) reply.header('connection', 'close');
    return payload;
  });

  const rawBody = (request: FastifyRequest): string => (typeof request.body === 'string' ? request.body : '');

  const chooseMode = (guid: string): FaultMode => {
    const override = overrideFor(faults, guid);
    if (override !== undefined) return override;
    if (faults.mode === 'answer' && faults.e500Rate > 0 && rng() < faults.e500Rate) return 'e500';
    return faults.mode;
  };

  const apply = (input: TransferInput): string =>
    store.process(input, Date.now(), (o) => render(input.guid, o)).body;

  /** Gives up on answering: the socket is gone or the simulator is closing. */
  const abandon = (reply: FastifyReply): void => {
    reply.hijack();
  };

  app.post('/transfer', async (request, reply) => {
    const parsed = parseTransfer(rawBody(request));
    store.countCall(parsed.ok ? parsed.value.guid : parsed.guid);
    if (!parsed.ok) {
      const body: Record<string, string> = {};
      if (parsed.guid !== null) body['guid'] = parsed.guid;
      return sendJson(reply, 400, JSON.stringify({ ...body, code: 'E400', message: parsed.message }));
    }
    const input = parsed.value;
    const mode = chooseMode(input.guid);
    switch (mode) {
      case 'hold':
        // Never applied, never answered: the socket stays open until the client gives up or close().
        return abandon(reply);
      case 'late-answer': {
        const body = apply(input);
        if (!(await sleep(faults.lateMs)) || request.raw.socket.destroyed) return abandon(reply);
        return sendJson(reply, 200, body);
      }
      case 'answer':
      case 'reset':
      case 'garbage':
      case 'e500':
        break;
    }
    if (!(await sleep(latencyMs))) return abandon(reply);
    if (request.raw.socket.destroyed && (mode === 'garbage' || mode === 'e500')) return abandon(reply);
    switch (mode) {
      case 'answer': {
        // Applied even if the client has gone: the request arrived, the account system processes it.
        const body = apply(input);
        if (request.raw.socket.destroyed) return abandon(reply);
        return sendJson(reply, 200, body);
      }
      case 'reset': {
        apply(input);
        reply.hijack();
        request.raw.socket.resetAndDestroy();
        return;
      }
      case 'garbage':
        return reply
          .code(502)
          .header('content-type', 'text/html')
          .send('<html><body><h1>502 Bad Gateway</h1>upstream hiccup</body></html>');
      case 'e500':
        return sendJson(
          reply,
          200,
          JSON.stringify({ guid: input.guid, code: 'E500', message: 'account system error' }),
        );
    }
  });

  app.get<{ Params: { guid: string } }>('/transfer/:guid', async (request, reply) => {
    const { guid } = request.params;
    inquiries.set(guid, (inquiries.get(guid) ?? 0) + 1);
    const arrived = performance.now();
    lastSecond.push(arrived);
    while (lastSecond[0]! <= arrived - 1000) lastSecond.shift();
    load.total++;
    load.peakPerSecond = Math.max(load.peakPerSecond, lastSecond.length);
    const answer = store.answer(guid);
    if (answer === undefined || Date.now() - answer.at < faults.processingMs) {
      return sendJson(reply, 404, JSON.stringify({ guid, code: 'E404', message: 'no record of this transfer' }));
    }
    return sendJson(reply, 200, answer.body);
  });

  // The journal (CONTRACT.md §8): every posting applied in [from, to), one JSON object a line, read in pages so
  // that a long journal never sits in memory and transfers go on being applied while it is sent.
  app.get<{ Querystring: Record<string, unknown> }>('/journal', async (request, reply) => {
    const bounds: Record<'from' | 'to', number> = { from: 0, to: 0 };
    for (const field of ['from', 'to'] as const) {
      const text = request.query[field];
      const value = typeof text === 'string' && /^[0-9]+$/.test(text) ? Number(text) : NaN;
      if (!Number.isSafeInteger(value)) {
        const message = text === undefined ? `${field} is required (ms since the epoch)` : `${field} must be ms since the epoch, digits only`;
        return sendJson(reply, 400, JSON.stringify({ code: 'E400', field, message }));
      }
      bounds[field] = value;
    }
    if (bounds.to < bounds.from) return sendJson(reply, 400, JSON.stringify({ code: 'E400', field: 'to', message: 'to must not be before from' }));
    async function* pages(): AsyncGenerator<string> {
      for (let after: JournalCursor | null = null, first = true; first || after !== null; first = false) {
        const page = store.journalPage(bounds.from, bounds.to, after, 1000);
        if (page.entries.length > 0) yield page.entries.map((e) => `${JSON.stringify(e)}\n`).join('');
        after = page.next;
      }
    }
    return reply.code(200).header('content-type', 'application/x-ndjson').send(Readable.from(pages(), { objectMode: false }));
  });

  app.get('/stats', async (_request, reply) => sendJson(reply, 200, JSON.stringify(store.stats())));
  app.get<{ Params: { guid: string } }>('/stats/:guid', async (request, reply) =>
    sendJson(reply, 200, JSON.stringify(store.guidStats(request.params.guid))),
  );
  app.get<{ Params: { id: string } }>('/accounts/:id', async (request, reply) => {
    const { id } = request.params;
    const balance = store.balance(id);
    if (balance === null) {
      return sendJson(reply, 404, JSON.stringify({ id, code: 'E404', message: 'unknown account' }));
    }
    return sendJson(reply, 200, JSON.stringify({ id, balance }));
  });

  const applyPatch = (patch: Partial<Faults>): void => {
    faults = mergeFaults(faults, patch);
    if (patch.seed !== undefined) rng = makePrng(patch.seed);
  };
  const resetFaults = (): void => {
    faults = mergeFaults(DEFAULT_FAULTS, {});
    rng = makePrng(faults.seed);
  };

  app.get('/control/faults', async (_request, reply) => sendJson(reply, 200, JSON.stringify(faults)));
  app.post('/control/faults', async (request, reply) => {
    const raw = rawBody(request);
    let json: unknown;
    try {
      json = raw.trim() === '' ? {} : JSON.parse(raw);
    } catch {
      return sendJson(reply, 400, JSON.stringify({ code: 'E400', field: '(body)', message: 'body is not valid JSON' }));
    }
    const decoded = decodeFaultsPatch(json);
    if (!decoded.ok) {
      return sendJson(reply, 400, JSON.stringify({ code: 'E400', field: decoded.field, message: decoded.message }));
    }
    applyPatch(decoded.value);
    const refuseForMs = decoded.value.refuseForMs ?? 0;
    if (refuseForMs > 0) {
      // Answer first, then stop listening.
      reply.raw.once('finish', () => setImmediate(() => void refuseConnections(refuseForMs)));
    }
    return sendJson(reply, 200, JSON.stringify({ ...faults, refuseForMs }));
  });
  app.delete('/control/faults', async (_request, reply) => {
    resetFaults();
    return sendJson(reply, 200, JSON.stringify(faults));
  });

  try {
    await app.listen({ port: opts.port ?? 0, host });
  } catch (err) {
    // A port already taken (EADDRINUSE): nothing of this simulator stays open; the caller may try another port.
    await app.close();
    store.close();
    throw err;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : (opts.port ?? 0);

  /** Listens again on the raw server (after a refusal window); fastify's routes and hooks stay as they are. */
  function listen(wanted: number, on: string): Promise<void> {
    const server = app.server;
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => {
        server.off('listening', onListening);
        reject(err);
      };
      const onListening = (): void => {
        server.off('error', onError);
        resolve();
      };
      server.once('error', onError);
      server.once('listening', onListening);
      server.listen(wanted, on);
    });
  }

  async function relisten(r: NonNullable<typeof refusal>): Promise<void> {
    r.relistening = true;
    for (let attempt = 0; !closed; attempt++) {
      try {
        await listen(port, host);
        break;
      } catch (err) {
        if (attempt >= 200) {
          app.log.error({ err }, 'simulator could not listen again');
          break;
        }
        await new Promise((res) => setTimeout(res, 50));
      }
    }
    if (refusal === r) refusal = undefined;
    r.resolve();
  }

  function refuseConnections(ms: number): Promise<void> {
    if (closed) return Promise.resolve();
    if (refusal?.relistening === true) return refusal.done.then(() => refuseConnections(ms));
    if (refusal === undefined) {
      let resolve: () => void = () => {};
      const done = new Promise<void>((res) => {
        resolve = res;
      });
      refusal = { timer: undefined, relistening: false, done, resolve };
      // Stops accepting at once (the port is free until we listen again) and closes idle keep-alive sockets.
      app.server.close();
      for (const socket of sockets) {
        const pending = (socket as Socket & { _httpMessage?: unknown })._httpMessage;
        if (pending === null || pending === undefined) socket.destroy();
      }
    }
    const r = refusal;
    if (r.timer !== undefined) clearTimeout(r.timer);
    r.timer = setTimeout(() => {
      r.timer = undefined;
      void relisten(r);
    }, Math.max(0, ms));
    return r.done;
  }

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      closed = true;
      if (refusal !== undefined) {
        if (refusal.timer !== undefined) clearTimeout(refusal.timer);
        refusal.resolve();
      }
      for (const [timer, resolve] of sleepers) {
        clearTimeout(timer);
        resolve(false);
      }
      sleepers.clear();
      for (const socket of sockets) socket.destroy();
      await app.close();
      store.close();
    })();
    return closing;
  };

  return {
    url: formatUrl(host, port),
    port,
    stats: () => store.stats(),
    guidStats: (guid) => store.guidStats(guid),
    inquiries: (guid) => inquiries.get(guid) ?? 0,
    inquiryLoad: () => ({ ...load }),
    balance: (id) => store.balance(id),
    faults: () => structuredClone(faults),
    setFaults: (f) => {
      const decoded = decodeFaultsPatch(f);
      if (!decoded.ok) throw new TypeError(`setFaults: ${decoded.message}`);
      applyPatch(decoded.value);
      const ms = decoded.value.refuseForMs ?? 0;
      if (ms > 0) void refuseConnections(ms);
    },
    resetFaults,
    refuseConnections,
    close,
  };
}
