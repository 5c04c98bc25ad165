import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import { parseStatuses, STATUSES } from '../../events/codecs.js';
import type { LedgerState } from '../../events/state.js';
import type { StoreError } from '../../events/errors.js';
import type { EventStore } from '../../events/store.js';
import { toStoreError } from '../../events/storeResult.js';
import { listLedger } from '../../commands/ledger.js';
import { actOnGuid, type GuidAction } from '../../commands/actOnGuid.js';
import { HELD_ELSEWHERE } from '../../commands/rows.js';
import type { Tracing } from '../../telemetry/tracing.js';
import { topLevelMembers } from '../../json/topLevelMembers.js';
import { DEFAULTS } from '../../shared/defaults.js';
import { formatDuration, parseDuration } from '../../shared/duration.js';
import type { AccountClient } from '../../account/accountClient.js';
import type { Breaker } from '../breaker.js';
import type { Metrics } from '../../telemetry/metrics.js';
import type { MonotonicClock } from '../../send/sendWindow.js';
import { requestKey } from '../auth/authHook.js';
import { codeReply, ledgerLog, ledgerUnavailableReply, type Reply } from '../replies.js';
import { GUID_PATTERN } from '../../contract/transferRequest.js';
import type { RouteDoc } from '../openapi.js';
import * as S from './schemas.js';
import { pageLimit, pageOf } from './paging.js';
import { readTimeline } from '../../commands/history.js';
import { readNotificationsOf } from '../../commands/notifications.js';
import { oldestRowOf, readBlackHoleDeadLetters, readLedgerCounts, unansweredSends } from '../../commands/stats.js';
import { timelineView } from './timeline.js';
import { reprocessCommand, type CommandLineSettings } from './reprocessCommand.js';
import { runHeadView, runView, viewJson } from '../../commands/reconciliations.js';
import { operatorRow } from '../../events/policy.js';
import type { ContinuityView } from '../../send/continuityGuard.js';

export interface OperatorDeps {
  readonly store: EventStore;
  readonly account: AccountClient;
  readonly metrics: Metrics;
  readonly breaker?: Breaker | undefined;
  /** The continuity guard, shown in the overview (absent: `{ state: 'off' }`). */
  readonly continuity?: { view(): ContinuityView } | undefined;
  /** The call timeout recorded in a reprocess's Sent (serve's --timeout). */
  readonly timeoutMs: number;
  readonly maxAttempts: number;
  /** Default min-age of resolve and reprocess: serve's --min-age (60s unless set), the commands' default. */
  readonly minAgeMs: number;
  /** Grace of the orphan sweep a resolve runs first (serve's --grace); a reprocess sends within half of it after its claim. */
  readonly graceMs: number;
  /** What a reprocess's send window is measured on; default `performance.now`. */
  readonly monotonicNow?: MonotonicClock | undefined;
  /** Where a resolve's or reprocess's row span goes (it continues the claim's trace, CONTRACT.md §10). */
  readonly tracing?: Tracing | undefined;
  /** Sends a reply in the contract's shape (and counts it). */
  readonly send: (reply: FastifyReply, r: Reply) => FastifyReply;
  /** serve's ledger and account system: the overview gives the command that sends a dead letter again. Absent: not given. */
  readonly commandLine?: CommandLineSettings | undefined;
}

const LEDGER_PAGE_MAX = 500;
/** A reconciliation run's breaks per page: by default, and at most (each break a few hundred bytes of JSON). */
const BREAK_PAGE_DEFAULT = 1000;
const BREAK_PAGE_MAX = 5000;

/** Marks a body that named a key twice (the parser cannot answer E400 naming the field itself). */
const DUPLICATE = Symbol('duplicate key');

const e400 = (field: string, message: string): Reply => codeReply('E400', undefined, { field, message });

/** A schema refusal (fastify's `attachValidation`) as the contract's E400 naming the field at fault. */
function validationReply(err: Error & { validation?: ReadonlyArray<{ keyword: string; instancePath: string; params: Record<string, unknown>; message?: string }>; validationContext?: string }): Reply {
  const first = err.validation?.[0];
  const context = err.validationContext ?? 'body';
  if (first === undefined) return e400(context, err.message);
  if (first.keyword === 'additionalProperties') return e400(String(first.params['additionalProperty']), `${String(first.params['additionalProperty'])} is not a ${context === 'body' ? 'field' : 'parameter'} of this route`);
  if (first.keyword === 'required') return e400(String(first.params['missingProperty']), `${String(first.params['missingProperty'])} is required`);
  const field = first.instancePath.replace(/^\//, '').split('/')[0] || context;
  if (field === 'guid') return e400('guid', 'guid does not match the GUID pattern');
  return e400(field, `${field} ${first.message ?? 'is invalid'}`);
}

const json = (reply: FastifyReply, status: number, value: unknown): FastifyReply =>
  reply.code(status).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(value));

type GuidRequest = FastifyRequest<{ Params: { guid: string } }>;

/**
 * The operator API : a GUID's timeline, the ledger paged, the overview, and resolve or reprocess of
 * one GUID. Scopes are the auth hook's (src/relay/auth/authHook.ts): reads need `read`, actions `admin`.
 * Registered as a plugin: its JSON body parser and strict schemas stay inside it, away from the channel API.
 */
export function operatorRoutes(deps: OperatorDeps) {
  return async function plugin(app: FastifyInstance): Promise<void> {
    acceptJsonObjects(app);
    registerTimeline(app, deps);
    registerLedgerPages(app, deps);
    registerOverview(app, deps);
    registerReconciliations(app, deps);
    registerAction(app, deps, 'resolve', S.actionBody, {
      summary: "`guidgate resolve` for one GUID: sweep it if orphaned, then, UNKNOWN and its last Sent at least minAge old, ask the account system",
      example: { params: { guid: S.EXAMPLE_GUID }, body: { dryRun: true, minAge: '5m' } },
      responses: actionResponses('the inquiry made (or, dry run, the row listed) and the row before and after'),
    });
    registerAction(app, deps, 'reprocess', S.reprocessBody, {
      summary: '`guidgate reprocess` for one GUID: FAILED under the attempt cap (serve\'s --max-attempts, or maxAttempts), sent again with the same bytes (a row FAILED by an inquiry is inquired about first)',
      example: { params: { guid: S.EXAMPLE_GUID }, body: { dryRun: true, maxAttempts: 6 } },
      responses: actionResponses('the send made (or, dry run, the row listed) and the row before and after'),
    });
  };
}

/** A store's Left: E503, logged once with its code and cause on the request's logger. */
function unavailable(deps: Pick<OperatorDeps, 'send'>, req: FastifyRequest, reply: FastifyReply, err: StoreError, guid?: string): FastifyReply {
  return deps.send(reply, ledgerUnavailableReply(guid, err, ledgerLog(req.log)));
}

/** Inside the plugin only: bodies are JSON objects (an empty body is `{}`); any other media type is 415. */
function acceptJsonObjects(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = body as string;
    let parsed: unknown;
    try {
      parsed = text === '' ? {} : JSON.parse(text);
    } catch {
      return done(Object.assign(new Error('the body is not JSON'), { statusCode: 400 }), undefined);
    }
    // JSON.parse keeps the last of two equal keys: `{"dryRun":true,"dryRun":false}` must not quietly become a real run.
    const seen = new Set<string>();
    for (const { key } of topLevelMembers(text)) {
      if (seen.has(key)) return done(null, { [DUPLICATE]: key });
      seen.add(key);
    }
    return done(null, parsed);
  });
}

/** GET /v1/transfers/{guid}/events: the row and its timeline. */
function registerTimeline(app: FastifyInstance, deps: OperatorDeps): void {
  const { store, send } = deps;
  app.get<{ Params: { guid: string } }>('/v1/transfers/:guid/events', {
    schema: { params: S.guidParams },
    attachValidation: true,
    config: {
      openapi: {
        summary: "One GUID's timeline: its events and the channel's requests, in time order, account numbers masked",
        example: { params: { guid: S.EXAMPLE_GUID } },
        responses: { 200: { description: 'the row and its timeline, oldest first', schema: S.timeline }, 400: 'E400', 404: 'E404', 414: 'E400 the GUID is over 384 characters', 503: 'E503' },
      } satisfies RouteDoc,
    },
  }, async (req: GuidRequest, reply) => {
    if (req.validationError) return send(reply, validationReply(req.validationError));
    const { guid } = req.params;
    const row = await store.getLedger(guid);
    if (E.isLeft(row)) return unavailable(deps, req, reply, row.left, guid);
    if (row.right === null) return send(reply, codeReply('E404', guid));
    const timeline = await readTimeline(store, guid);
    if (E.isLeft(timeline)) return unavailable(deps, req, reply, timeline.left, guid);
    // The black-hole pattern, said in words: "sent 5 times, every inquiry absent"; null when it is not that.
    const blackHole = unansweredSends(timeline.right.flatMap((e) => (e.kind === 'event' ? [e] : [])));
    const notifications = await readNotificationsOf(store, guid);
    if (E.isLeft(notifications)) return unavailable(deps, req, reply, notifications.left, guid);
    return json(reply, 200, { guid, row: operatorRow(row.right), blackHole, timeline: timeline.right.map(timelineView), notifications: notifications.right });
  });
}

/** GET /v1/ledger: the rows, filtered, a page at a time. */
function registerLedgerPages(app: FastifyInstance, deps: OperatorDeps): void {
  const { store, send } = deps;
  app.get<{ Querystring: { status?: string; olderThan?: string; limit?: string; cursor?: string } }>('/v1/ledger', {
    schema: { querystring: S.ledgerQuery },
    attachValidation: true,
    config: {
      openapi: {
        summary: 'Ledger rows in GUID order, filtered by status and age, a page at a time (keyset on the GUID)',
        example: { query: { status: 'UNKNOWN,FAILED,DONE', olderThan: '0ms', limit: '50' } },
        responses: { 200: { description: 'one page; nextCursor is null on the last', schema: S.ledgerPage }, 400: 'E400', 503: 'E503' },
      } satisfies RouteDoc,
    },
  }, async (req, reply) => {
    if (req.validationError) return send(reply, validationReply(req.validationError));
    const q = req.query;
    const statuses = q.status === undefined ? undefined : parseStatuses(q.status);
    if (statuses === null) return send(reply, e400('status', `status must be one or more of ${STATUSES.join(', ')}, comma-separated`));
    const olderThanMs = q.olderThan === undefined ? undefined : parseDuration(q.olderThan);
    if (olderThanMs === null) return send(reply, e400('olderThan', 'olderThan must be a duration: 500ms, 30s, 5m, 2h, 7d'));
    const limit = pageLimit(q.limit, DEFAULTS.ledgerPageRows, LEDGER_PAGE_MAX);
    if (E.isLeft(limit)) return send(reply, limit.left);
    // The cursor is the last GUID of the page before: rows after it, in GUID order.
    if (q.cursor !== undefined && !GUID_PATTERN.test(q.cursor)) return send(reply, e400('cursor', 'cursor must be a nextCursor this route gave'));
    try {
      const rows: LedgerState[] = [];
      for await (const row of listLedger(store, { statuses, olderThanMs, limit: limit.right + 1, afterGuid: q.cursor })) rows.push(row);
      const { page, next } = pageOf(rows, limit.right, (row) => row.guid);
      return json(reply, 200, { rows: page.map(operatorRow), nextCursor: next });
    } catch (err) {
      // The ledger's clock or a page that could not be read: the paged iteration throws its StoreError.
      return unavailable(deps, req, reply, toStoreError(err, 'read'));
    }
  });
}

/** GET /v1/stats: the console's overview, made from the counts `guidgate stats` is made from. */
function registerOverview(app: FastifyInstance, deps: OperatorDeps): void {
  const { store } = deps;
  app.get('/v1/stats', {
    config: {
      openapi: {
        summary: 'The overview: rows per status, the oldest UNKNOWN and FAILED, dead letters, the breaker, the continuity window (CONTRACT.md §9), replies per code over the last minutes',
        example: {},
        responses: { 200: { description: 'now', schema: S.stats }, 503: 'E503' },
      } satisfies RouteDoc,
    },
  }, async (req, reply) => {
    const counted = await readLedgerCounts(store, { maxAttempts: deps.maxAttempts });
    if (E.isLeft(counted)) return unavailable(deps, req, reply, counted.left);
    const counts = counted.right;
    const oldestUnknown = await oldestRowOf(store, counts, 'UNKNOWN');
    if (E.isLeft(oldestUnknown)) return unavailable(deps, req, reply, oldestUnknown.left);
    const oldestFailed = await oldestRowOf(store, counts, 'FAILED');
    if (E.isLeft(oldestFailed)) return unavailable(deps, req, reply, oldestFailed.left);
    const blackHoles = await readBlackHoleDeadLetters(store, { maxAttempts: deps.maxAttempts });
    if (E.isLeft(blackHoles)) return unavailable(deps, req, reply, blackHoles.left);
    const notifications = await store.notificationCounts();
    if (E.isLeft(notifications)) return unavailable(deps, req, reply, notifications.left);
    const shown = (row: LedgerState | null) => (row === null ? null : operatorRow(row));
    return json(reply, 200, {
      statuses: counts.byStatus,
      oldest: { UNKNOWN: shown(oldestUnknown.right), FAILED: shown(oldestFailed.right) },
      deadLetters: deps.commandLine === undefined
        ? counts.deadLetters
        : { ...counts.deadLetters, command: reprocessCommand(deps.commandLine, { maxAttempts: counts.deadLetters.maxAttempts, timeoutMs: deps.timeoutMs, graceMs: deps.graceMs, minAgeMs: deps.minAgeMs }) },
      blackHoles: blackHoles.right,
      breaker: deps.breaker?.view() ?? { state: 'off' },
      continuity: deps.continuity?.view() ?? { state: 'off', breaks: 0, lastBreak: null },
      replies: deps.metrics.recentReplies(),
      notifications: notifications.right,
    });
  });
}

/** GET /v1/reconciliations and /v1/reconciliations/{id}: the recorded reconciliation runs (CONTRACT.md §8), for auditors. */
function registerReconciliations(app: FastifyInstance, deps: OperatorDeps): void {
  const { store, send } = deps;
  const exact = (reply: FastifyReply, value: unknown): FastifyReply => reply.code(200).header('content-type', 'application/json; charset=utf-8').send(viewJson(value));
  app.get<{ Querystring: { limit?: string; cursor?: string } }>('/v1/reconciliations', {
    schema: { querystring: S.reconciliationQuery },
    attachValidation: true,
    config: {
      openapi: {
        summary: 'The recorded reconciliation runs, newest first, a page at a time: window, journal source and SHA-256, counts per category and severity',
        example: { query: { limit: '20' } },
        responses: { 200: { description: 'one page; nextCursor is null on the last', schema: S.reconciliationPage }, 400: 'E400', 503: 'E503' },
      } satisfies RouteDoc,
    },
  }, async (req, reply) => {
    if (req.validationError) return send(reply, validationReply(req.validationError));
    const limit = pageLimit(req.query.limit, DEFAULTS.ledgerPageRows, LEDGER_PAGE_MAX);
    if (E.isLeft(limit)) return send(reply, limit.left);
    const runs = await store.reconciliations({ limit: limit.right + 1, ...(req.query.cursor === undefined ? {} : { beforeId: req.query.cursor }) });
    if (E.isLeft(runs)) return unavailable(deps, req, reply, runs.left);
    const { page, next } = pageOf(runs.right, limit.right, (run) => run.id);
    return exact(reply, { runs: page.map(runHeadView), nextCursor: next });
  });
  app.get<{ Params: { id: string }; Querystring: { limit?: string; after?: string } }>('/v1/reconciliations/:id', {
    schema: { params: S.reconciliationParams, querystring: S.reconciliationBreaksQuery },
    attachValidation: true,
    config: {
      openapi: {
        summary: 'One reconciliation run: its summary (money per category and side) and its breaks a page at a time, each with the run that first saw it; account numbers masked',
        example: { params: { id: '1' }, query: { limit: '1000' } },
        responses: { 200: { description: 'the run and one page of its breaks in GUID order; nextAfter is null on the last', schema: S.reconciliationDetail }, 400: 'E400', 404: 'E404 no such reconciliation run', 503: 'E503' },
      } satisfies RouteDoc,
    },
  }, async (req, reply) => {
    if (req.validationError) return send(reply, validationReply(req.validationError));
    const limit = pageLimit(req.query.limit, BREAK_PAGE_DEFAULT, BREAK_PAGE_MAX);
    if (E.isLeft(limit)) return send(reply, limit.left);
    // A page of breaks, never the whole run: a run may hold millions.
    const run = await store.reconciliation(req.params.id, { limit: limit.right + 1, ...(req.query.after === undefined ? {} : { after: req.query.after }) });
    if (E.isLeft(run)) return unavailable(deps, req, reply, run.left);
    if (run.right === null) return send(reply, codeReply('E404', undefined, { message: 'no such reconciliation run' }));
    const { page: breaks, next: nextAfter } = pageOf(run.right.breaks, limit.right, (b) => b.guid);
    return exact(reply, { ...runView({ ...run.right, breaks }), nextAfter });
  });
}

type ActionBody = { dryRun?: boolean; minAge?: string; maxAttempts?: number };
type ActionRequest = FastifyRequest<{ Params: { guid: string }; Body: ActionBody | undefined }>;

/** POST /v1/transfers/{guid}/resolve or /reprocess: the command, restricted to the GUID; the row before and after. */
function registerAction(app: FastifyInstance, deps: OperatorDeps, name: GuidAction, body: typeof S.actionBody | typeof S.reprocessBody, doc: RouteDoc): void {
  const { send } = deps;
  app.post<{ Params: { guid: string }; Body: ActionBody | undefined }>(`/v1/transfers/:guid/${name}`, {
    schema: { params: S.guidParams, body },
    attachValidation: true,
    config: { openapi: doc },
  }, async (req, reply) => {
    const asked = actionInput(req, deps.minAgeMs);
    if (E.isLeft(asked)) return send(reply, asked.left);
    const { dryRun, minAgeMs } = asked.right;
    const { guid } = req.params;
    const acted = await actOnGuid(
      { store: deps.store, account: deps.account, metrics: deps.metrics, tracing: deps.tracing, monotonicNow: deps.monotonicNow, sendLog: req.log },
      name,
      { guid, key: requestKey(req)?.name, dryRun, minAgeMs, maxAttempts: asked.right.maxAttempts ?? deps.maxAttempts, timeoutMs: deps.timeoutMs, graceMs: deps.graceMs },
    );
    switch (acted.kind) {
      case 'not-found':
        return send(reply, codeReply('E404', guid));
      case 'unavailable':
        return unavailable(deps, req, reply, acted.error, guid);
      case 'failed':
        // Logged once, with what the command reports: the row's failure, or only that its run stopped on one.
        ledgerLog(req.log)({ guid, reply: 'E503', action: name, cause: acted.cause ?? `${name} stopped: a ledger read or write failed` });
        // A reprocess whose send left but whose outcome could not be recorded says so: not "the account system was not called".
        return send(reply, acted.cause === undefined ? codeReply('E503', guid) : codeReply('E503', guid, { message: `ledger unavailable: ${acted.cause}` }));
      case 'not-taken':
        return send(reply, codeReply('E409', guid, { message: acted.why, status: acted.after.status, before: operatorRow(acted.before), after: operatorRow(acted.after) }));
      case 'done':
        return json(reply, 200, { guid, dryRun, outcome: acted.outcome, ...(acted.detail === undefined ? {} : { detail: acted.detail }), before: operatorRow(acted.before), after: operatorRow(acted.after) });
    }
  });
}

/** An action's body: `dryRun`, and `minAge` (serve's --min-age unless given, and never below it), or the E400. */
function actionInput(req: ActionRequest, floorMs: number): E.Either<Reply, { dryRun: boolean; minAgeMs: number; maxAttempts?: number }> {
  const duplicate = (req.body as Record<symbol, unknown> | undefined)?.[DUPLICATE];
  if (typeof duplicate === 'string') return E.left(e400(duplicate, `${duplicate} is given more than once`));
  if (req.validationError) return E.left(validationReply(req.validationError));
  const body = req.body ?? {};
  const minAgeMs = body.minAge === undefined ? floorMs : parseDuration(body.minAge);
  if (minAgeMs === null) return E.left(e400('minAge', 'minAge must be a duration: 500ms, 30s, 5m, 2h, 7d'));
  // serve's --min-age is a floor, not a default a caller may lower: a 404 asked for too early is believed, and
  // the row is sent a second time (the min-age trap). More caution is allowed; less is refused before any read.
  if (minAgeMs < floorMs) return E.left(e400('minAge', `minAge must be at least serve's --min-age (${formatDuration(floorMs)})`));
  return E.right({ dryRun: body.dryRun === true, minAgeMs, ...(body.maxAttempts === undefined ? {} : { maxAttempts: body.maxAttempts }) });
}

function actionResponses(what: string): RouteDoc['responses'] {
  return {
    200: { description: what, schema: S.actionResult },
    400: 'E400',
    404: 'E404',
    409: { description: `E409: the row is not one this action applies to (its state, its age, the attempt cap), or another run holds it ("${HELD_ELSEWHERE}"); nothing was done`, schema: S.notEligible },
    413: 'E400 the body is over 64 KiB',
    414: 'E400 the GUID is over 384 characters',
    415: 'E400 Content-Type is not application/json',
    503: 'E503',
  };
}
