/**
 * The console's calls to the operator API. Every call carries `Authorization: Bearer` with the token kept in
 * sessionStorage (this tab only: never localStorage, never a cookie), and nothing else leaves the page.
 */

const TOKEN_KEY = 'guidgate.token';
/** Signed in without a token: the relay runs without keys (open mode, loopback only). */
const OPEN_KEY = 'guidgate.open';

/** Whom the calls are made as: a token, or none (open mode). Null: nobody has signed in, so nothing is called. */
export interface Session {
  readonly token: string | null;
}

export function savedSession(): Session | null {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token !== null) return { token };
  return sessionStorage.getItem(OPEN_KEY) === '1' ? { token: null } : null;
}

/** Signs in with a token, or with none (empty) for a relay without keys. */
export function saveSession(token: string): void {
  forgetSession();
  if (token === '') sessionStorage.setItem(OPEN_KEY, '1');
  else sessionStorage.setItem(TOKEN_KEY, token);
}

export function forgetSession(): void {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(OPEN_KEY);
}

/** A refusal or failure as the relay states it (code, message, the field at fault), or `network`. */
export interface ApiError {
  readonly status: number;
  readonly code: string;
  readonly message: string;
  readonly field?: string;
}

export type Result<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: ApiError };

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function errorOf(status: number, body: unknown): ApiError {
  if (!isRecord(body)) return { status, code: `HTTP ${status}`, message: 'the relay answered without a JSON reply' };
  const code = typeof body['code'] === 'string' ? body['code'] : `HTTP ${status}`;
  const message = typeof body['message'] === 'string' ? body['message'] : 'refused';
  return typeof body['field'] === 'string' ? { status, code, message, field: body['field'] } : { status, code, message };
}

async function call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<Result<T>> {
  // Before sign-in nothing is asked: a call without the token would only be refused (E401), logged and counted.
  const session = savedSession();
  if (session === null) return { ok: false, error: { status: 0, code: 'signed-out', message: 'sign in first' } };
  const headers: Record<string, string> = { accept: 'application/json' };
  if (session.token !== null) headers['authorization'] = `Bearer ${session.token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, { method, headers, credentials: 'omit', cache: 'no-store', ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  } catch {
    return { ok: false, error: { status: 0, code: 'network', message: 'the relay could not be reached' } };
  }
  let parsed: unknown = null;
  try {
    parsed = await res.json();
  } catch {
    parsed = null;
  }
  if (!res.ok) return { ok: false, error: errorOf(res.status, parsed) };
  return { ok: true, value: parsed as T };
}

// ---- the operator API's shapes (docs/operating.md, "Operator API") ----

export type Status = 'RECEIVED' | 'SENT' | 'DONE' | 'UNKNOWN' | 'FAILED' | 'PURGED';
export const STATUSES: readonly Status[] = ['RECEIVED', 'SENT', 'DONE', 'UNKNOWN', 'FAILED', 'PURGED'];

/** A time as the API gives it: milliseconds since the epoch. */
export type Instant = number;

export interface Row {
  readonly guid: string;
  readonly status: Status;
  readonly code: string | null;
  readonly attempts: number;
  readonly createdAt: Instant;
  readonly updatedAt: Instant;
  /** FAILED, and one of its attempts left (an inquiry said absent, or an older attempt answered): a resend inquires first. */
  readonly failedByInquiry?: boolean;
  readonly [other: string]: unknown;
}

export interface Stats {
  readonly statuses: Partial<Record<Status, { readonly count: number; readonly oldestUpdatedAt: Instant | null }>>;
  readonly oldest: { readonly UNKNOWN?: Row | null; readonly FAILED?: Row | null };
  /** `command`: the command line that sends dead letters again with one attempt more, less the GUIDs (absent from a relay before it). */
  readonly deadLetters?: { readonly maxAttempts: number; readonly count: number; readonly command?: string };
  readonly breaker: unknown;
  /** The continuity guard (CONTRACT.md §9); absent from a relay older than it. */
  readonly continuity?: unknown;
  /** The notification outbox (CONTRACT.md §11); absent from a relay older than it. */
  readonly notifications?: { readonly pending: number; readonly oldestPendingAt: Instant | null; readonly delivered: number; readonly givenUp: number };
  readonly replies: {
    readonly windowSeconds: number;
    readonly perCode: Readonly<Record<string, number>>;
    /** Per code in each of the last 60 minutes, oldest first (absent from a relay before it). */
    readonly perMinute?: ReadonlyArray<Readonly<Record<string, number>>>;
  };
}

export interface LedgerPage {
  readonly rows: readonly Row[];
  readonly nextCursor: string | null;
}

export type TimelineEntry =
  | { readonly kind: 'event'; readonly seq: number; readonly type: string; readonly at: Instant; readonly data: unknown; readonly actor: unknown }
  | { readonly kind: 'request'; readonly at: Instant; readonly key: string | null; readonly code: string; readonly fingerprintMatch: boolean; readonly replayed: boolean };

/** A notification to channels and its delivery attempts, as the timeline route shows it. */
export interface NotificationShown {
  readonly webhookId: string;
  readonly type: string;
  readonly state: string;
  readonly recordedAt: string;
  readonly tries: ReadonlyArray<{ readonly at: Instant; readonly result: string; readonly httpStatus: number | null; readonly detail: string }>;
}

export interface Timeline {
  readonly guid: string;
  readonly row: Row | null;
  readonly timeline: readonly TimelineEntry[];
  /** Absent from a relay older than notifications. */
  readonly notifications?: readonly NotificationShown[];
}

export type Action = 'resolve' | 'reprocess';

export interface ActionResult {
  readonly guid: string;
  readonly dryRun: boolean;
  readonly outcome: string;
  readonly detail?: string;
  readonly before: Row | null;
  readonly after: Row | null;
}

/** A recorded reconciliation run in the list (`GET /v1/reconciliations`). */
export interface ReconciliationRun {
  readonly id: string;
  readonly recordedAt: Instant;
  readonly window: { readonly from: Instant; readonly to: Instant; readonly pendingMs: number };
  readonly source: string;
  readonly sha256: string;
  readonly counts: Readonly<Record<string, number>>;
  readonly severities: { readonly P1: number; readonly P2: number };
  readonly breakCount: number;
}

export interface ReconciliationBreak {
  readonly guid: string;
  readonly category: string;
  readonly severity: 'P1' | 'P2';
  readonly differs: readonly string[];
  readonly ledger: { readonly status: string; readonly code: string | null; readonly firstSentAt: Instant; readonly amount: number | null; readonly currency: string | null } | null;
  readonly journal: ReadonlyArray<{ readonly ref: string; readonly amount: number; readonly currency: string | null; readonly appliedAt: Instant }>;
  readonly firstSeen: string;
}

/** One run with a page of its breaks (`GET /v1/reconciliations/{id}?after=&limit=`). */
export interface Reconciliation extends ReconciliationRun {
  readonly breaks: readonly ReconciliationBreak[];
  /** The GUID to ask the next page after; null on the last page. */
  readonly nextAfter: string | null;
}

/** A page of recorded runs, newest first; `cursor`: the page before's nextCursor. */
export const getReconciliations = (limit: number, cursor: string | null = null) =>
  call<{ readonly runs: readonly ReconciliationRun[]; readonly nextCursor: string | null }>('GET', `/v1/reconciliations?limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
export const getReconciliation = (id: string, limit: number, after: string | null = null) =>
  call<Reconciliation>('GET', `/v1/reconciliations/${encodeURIComponent(id)}?limit=${limit}${after === null ? '' : `&after=${encodeURIComponent(after)}`}`);

const guidPath = (guid: string) => `/v1/transfers/${encodeURIComponent(guid)}`;

export const getStats = () => call<Stats>('GET', '/v1/stats');

export function getLedger(q: { statuses: readonly Status[]; olderThan: string; cursor: string | null; limit: number }): Promise<Result<LedgerPage>> {
  const params = new URLSearchParams();
  if (q.statuses.length > 0) params.set('status', q.statuses.join(','));
  if (q.olderThan !== '') params.set('olderThan', q.olderThan);
  params.set('limit', String(q.limit));
  if (q.cursor !== null) params.set('cursor', q.cursor);
  return call<LedgerPage>('GET', `/v1/ledger?${params.toString()}`);
}

export const getTimeline = (guid: string) => call<Timeline>('GET', `${guidPath(guid)}/events`);

export function runAction(action: Action, guid: string, opts: { dryRun: boolean; minAge: string }): Promise<Result<ActionResult>> {
  return call<ActionResult>('POST', `${guidPath(guid)}/${action}`, { dryRun: opts.dryRun, ...(opts.minAge === '' ? {} : { minAge: opts.minAge }) });
}
