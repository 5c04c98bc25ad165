import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import { parseStatuses, STATUSES } from '../../events/codecs.js';
import type { LedgerState } from '../../events/state.js';
import type { StoreError } from '../../events/errors.js';
import type { EventStore } from '../../events/store.js';
import { toStoreError } from '../../events/storeResult.js';
import { listLedger } from '../../settle/ledger.js';
import { reprocessFailed, whyReprocessLeavesOut } from '../../settle/reprocess.js';
import { resolveUnknown, whyResolveLeavesOut } from '../../settle/resolve.js';
import type { Tracing } from '../../telemetry/tracing.js';
import { topLevelMembers } from '../../json/topLevelMembers.js';
import { DEFAULTS } from '../../shared/defaults.js';
import { formatDuration, parseDuration } from '../../shared/duration.js';
import type { AccountClient } from '../../account/accountClient.js';
import type { Breaker } from '../breaker.js';
import type { Metrics } from '../../telemetry/metrics.js';
import type { MonotonicClock } from '../../settle/sendWindow.js';
import { requestKey } from '../auth/authHook.js';
import { codeReply, ledgerLog, ledgerUnavailableReply, type Reply } from '../replies.js';
import { GUID_PATTERN } from '../../contract/transferRequest.js';
import type { RouteDoc } from '../openapi.js';
import * as S from './schemas.js';
import { readTimeline } from '../../settle/history.js';
import { oldestRowOf, readBlackHoleDeadLetters, readLedgerCounts, unansweredSends } from '../../settle/stats.js';
import { timelineView } from './timeline.js';
import { runHeadView, runView, viewJson } from '../../settle/reconciliations.js';
import { operatorRow } from '../../events/policy.js';
import type { ContinuityView } from '../../settle/continuityGuard.js';

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
}

const LEDGER_PAGE_MAX = 500;

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
 * The operator API (issue #15): a GUID's timeline, the ledger paged, the overview, and resolve or reprocess of
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
    // The black-hole pattern (#28), said in words: "sent 5 times, every inquiry absent"; null when it is not that.
    const blackHole = unansweredSends(timeline.right.flatMap((e) => (e.kind === 'event' ? [e] : [])));
    return json(reply, 200, { guid, row: operatorRow(row.right), blackHole, timeline: timeline.right.map(timelineView) });
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
    const limit = q.limit === undefined ? DEFAULTS.ledgerPageRows : Number(q.limit);
    if (limit < 1 || limit > LEDGER_PAGE_MAX) return send(reply, e400('limit', `limit must be from 1 to ${LEDGER_PAGE_MAX}`));
    // The cursor is the last GUID of the page before: rows after it, in GUID order.
    if (q.cursor !== undefined && !GUID_PATTERN.test(q.cursor)) return send(reply, e400('cursor', 'cursor must be a nextCursor this route gave'));
    try {
      const rows: LedgerState[] = [];
      // One row more than asked: whether there is a next page, without an empty last page.
      for await (const row of listLedger(store, { statuses, olderThanMs, limit: limit + 1, afterGuid: q.cursor })) rows.push(row);
      const page = rows.slice(0, limit);
      return json(reply, 200, { rows: page.map(operatorRow), nextCursor: rows.length > limit ? page[page.length - 1]!.guid : null });
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
    const shown = (row: LedgerState | null) => (row === null ? null : operatorRow(row));
    return json(reply, 200, {
      statuses: counts.byStatus,
      oldest: { UNKNOWN: shown(oldestUnknown.right), FAILED: shown(oldestFailed.right) },
      deadLetters: counts.deadLetters,
      blackHoles: blackHoles.right,
      breaker: deps.breaker?.view() ?? { state: 'off' },
      continuity: deps.continuity?.view() ?? { state: 'off', breaks: 0, lastBreak: null },
      replies: deps.metrics.recentReplies(),
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
    const limit = req.query.limit === undefined ? DEFAULTS.ledgerPageRows : Number(req.query.limit);
    if (limit < 1 || limit > LEDGER_PAGE_MAX) return send(reply, e400('limit', `limit must be from 1 to ${LEDGER_PAGE_MAX}`));
    // One run more than asked: whether there is a next page, without an empty last page.
    const runs = await store.reconciliations({ limit: limit + 1, ...(req.query.cursor === undefined ? {} : { beforeId: req.query.cursor }) });
    if (E.isLeft(runs)) return unavailable(deps, req, reply, runs.left);
    const page = runs.right.slice(0, limit);
    return exact(reply, { runs: page.map(runHeadView), nextCursor: runs.right.length > limit ? page[page.length - 1]!.id : null });
  });
  app.get<{ Params: { id: string } }>('/v1/reconciliations/:id', {
    schema: { params: S.reconciliationParams },
    attachValidation: true,
    config: {
      openapi: {
        summary: 'One reconciliation run: its summary (money per category and side) and every break, with the run that first saw it; account numbers masked',
        example: { params: { id: '1' } },
        responses: { 200: { description: 'the run and its breaks in GUID order', schema: S.reconciliationDetail }, 400: 'E400', 404: 'E404 no such reconciliation run', 503: 'E503' },
      } satisfies RouteDoc,
    },
  }, async (req, reply) => {
    if (req.validationError) return send(reply, validationReply(req.validationError));
    const run = await store.reconciliation(req.params.id);
    if (E.isLeft(run)) return unavailable(deps, req, reply, run.left);
    if (run.right === null) return send(reply, codeReply('E404', undefined, { message: 'no such reconciliation run' }));
    return exact(reply, runView(run.right));
  });
}

type ActionName = 'resolve' | 'reprocess';
type ActionBody = { dryRun?: boolean; minAge?: string; maxAttempts?: number };
type ActionRequest = FastifyRequest<{ Params: { guid: string }; Body: ActionBody | undefined }>;

/** What the command reported of the GUID through onRow; nothing when its selection left the row out. */
interface ActionRun {
  readonly ledgerErrors: number;
  readonly outcome?: string;
  readonly detail?: string | undefined;
  /** The row as the command read it. */
  readonly row?: LedgerState;
}

/** POST /v1/transfers/{guid}/resolve or /reprocess: the command, restricted to the GUID; the row before and after. */
function registerAction(app: FastifyInstance, deps: OperatorDeps, name: ActionName, body: typeof S.actionBody | typeof S.reprocessBody, doc: RouteDoc): void {
  const { store, send } = deps;
  app.post<{ Params: { guid: string }; Body: ActionBody | undefined }>(`/v1/transfers/:guid/${name}`, {
    schema: { params: S.guidParams, body },
    attachValidation: true,
    config: { openapi: doc },
  }, async (req, reply) => {
    const asked = actionInput(req, deps.minAgeMs);
    if (E.isLeft(asked)) return send(reply, asked.left);
    const { dryRun, minAgeMs } = asked.right;
    const maxAttempts = asked.right.maxAttempts ?? deps.maxAttempts;
    const { guid } = req.params;
    const read = await store.getLedger(guid);
    if (E.isLeft(read)) return unavailable(deps, req, reply, read.left, guid);
    const before = read.right;
    if (before === null) return send(reply, codeReply('E404', guid));
    // The ledger's time before the run: resolve selects by a time at or after it, so a row too young for the run
    // was too young at it (what the E409 says, even when the row comes of age while the run ends). A clock that
    // fails here fails the run too, which reports it as its own failure.
    const askedAt = await store.now();
    const ran = await runOnGuid(deps, name, req, { dryRun, minAgeMs, maxAttempts });
    if (ran.outcome === 'ledger-error' || ran.ledgerErrors > 0) {
      // Logged once, with what the command reports: the row's failure, or only that its run stopped on one.
      const cause = ran.outcome === 'ledger-error' ? (ran.detail ?? 'a read or write failed') : undefined;
      ledgerLog(req.log)({ guid, reply: 'E503', action: name, cause: cause ?? `${name} stopped: a ledger read or write failed` });
      // A reprocess whose send left but whose outcome could not be recorded says so: not "the account system was not called".
      return send(reply, cause === undefined ? codeReply('E503', guid) : codeReply('E503', guid, { message: `ledger unavailable: ${cause}` }));
    }
    const reread = await store.getLedger(guid);
    if (E.isLeft(reread)) return unavailable(deps, req, reply, reread.left, guid);
    const after = reread.right ?? before;
    if (ran.outcome === undefined || ran.outcome === 'not-leased') {
      // Not leased and not moved since the command read it: another run (the settler, another process) holds it.
      const notEligible = (message: string) => send(reply, codeReply('E409', guid, { message, status: after.status, before: operatorRow(before), after: operatorRow(after) }));
      if (ran.outcome === 'not-leased' && after.lastSeq === ran.row?.lastSeq) return notEligible(HELD_ELSEWHERE);
      const now = E.isRight(askedAt) ? askedAt : await store.now();
      if (E.isLeft(now)) return unavailable(deps, req, reply, now.left, guid);
      return notEligible(whyNotTaken(name, after, { minAgeMs, maxAttempts, now: now.right }));
    }
    return json(reply, 200, { guid, dryRun, outcome: ran.outcome, ...(ran.detail === undefined ? {} : { detail: ran.detail }), before: operatorRow(before), after: operatorRow(after) });
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

/** The command's own code, restricted to this GUID: the same eligibility, sweep, min-age, cap and inquiry. */
async function runOnGuid(deps: OperatorDeps, name: ActionName, req: ActionRequest, opts: { dryRun: boolean; minAgeMs: number; maxAttempts: number }): Promise<ActionRun> {
  const { store, account, metrics, tracing } = deps;
  const { guid } = req.params;
  const key = requestKey(req)?.name;
  // The command reports the row through onRow (`not-leased`: selected, but another run held it or it moved).
  let reported: Omit<ActionRun, 'ledgerErrors'> = {};
  const onRow = (row: LedgerState, outcome: string, detail?: string) => void (reported = { row, outcome, detail });
  const { ledgerErrors } =
    name === 'resolve'
      ? await resolveUnknown({ store, account, metrics, tracing }, { guid, key, minAgeMs: opts.minAgeMs, graceMs: deps.graceMs, dryRun: opts.dryRun, limit: 1, onRow })
      : await reprocessFailed(
          { store, account, metrics, monotonicNow: deps.monotonicNow, sendLog: req.log, tracing },
          { guid, key, maxAttempts: opts.maxAttempts, timeoutMs: deps.timeoutMs, graceMs: deps.graceMs, minAgeMs: opts.minAgeMs, dryRun: opts.dryRun, limit: 1, onRow },
        );
  return { ...reported, ledgerErrors };
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

/** The message of an E409 for a row another run has leased (it is inquiring about or sending it right now). */
const HELD_ELSEWHERE = 'held by another run (the background settler or another process); try again shortly';

/** The message of an E409: which condition of the command's own selection leaves the row out (resolve's age at `now`). */
function whyNotTaken(name: ActionName, row: LedgerState, rules: { minAgeMs: number; maxAttempts: number; now: number }): string {
  const why = name === 'resolve' ? whyResolveLeavesOut(row, rules.now, rules.minAgeMs) : whyReprocessLeavesOut(row, rules.maxAttempts);
  return why ?? `${name} did not take it: the row changed while the action ran; try again`;
}
