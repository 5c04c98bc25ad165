import { LedgerCorruptError } from '../../events/errors.js';
import type { DeliveryOutcome, NotificationAttempt, NotificationCounts, NotificationState, NotificationType, StoredNotification } from '../../events/notifications.js';

/** The outbox's columns, as both stores select them. */
export const NOTIFICATION_COLUMNS = 'guid, seq, type, at, body, state, created_at, next_at, attempts, last_result, delivered_at';
export const ATTEMPT_COLUMNS = 'guid, seq, at, result, http_status, detail, latency_ms';

const TYPES: readonly string[] = ['transfer.settled', 'transfer.dead_letter'];
const STATES: readonly string[] = ['pending', 'delivered', 'given_up'];
const RESULTS: readonly string[] = ['delivered', 'failed', 'given_up'];

/** An integer column (PostgreSQL's bigint arrives as a string). */
function int(v: unknown, what: string): number {
  const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) throw new LedgerCorruptError(`notification row: ${what} is not an integer`);
  return n;
}
const intOrNull = (v: unknown, what: string): number | null => (v === null || v === undefined ? null : int(v, what));
function str(v: unknown, what: string): string {
  if (typeof v !== 'string') throw new LedgerCorruptError(`notification row: ${what} is not text`);
  return v;
}
function oneOf<T extends string>(v: unknown, allowed: readonly string[], what: string): T {
  const s = str(v, what);
  if (!allowed.includes(s)) throw new LedgerCorruptError(`notification row: ${what} ${JSON.stringify(s)} is unknown`);
  return s as T;
}

/** A `notifications` row read back, decoded, never cast. */
export function rowToNotification(raw: unknown): StoredNotification {
  const r = raw as Record<string, unknown>;
  return {
    guid: str(r['guid'], 'guid'),
    seq: int(r['seq'], 'seq'),
    type: oneOf<NotificationType>(r['type'], TYPES, 'type'),
    at: int(r['at'], 'at'),
    body: str(r['body'], 'body'),
    state: oneOf<NotificationState>(r['state'], STATES, 'state'),
    createdAt: int(r['created_at'], 'created_at'),
    nextAt: int(r['next_at'], 'next_at'),
    attempts: int(r['attempts'], 'attempts'),
    lastResult: r['last_result'] === null ? null : str(r['last_result'], 'last_result'),
    deliveredAt: intOrNull(r['delivered_at'], 'delivered_at'),
  };
}

export function rowToAttempt(raw: unknown): NotificationAttempt {
  const r = raw as Record<string, unknown>;
  return {
    guid: str(r['guid'], 'guid'),
    seq: int(r['seq'], 'seq'),
    at: int(r['at'], 'at'),
    result: oneOf<DeliveryOutcome['result']>(r['result'], RESULTS, 'result'),
    httpStatus: intOrNull(r['http_status'], 'http_status'),
    detail: str(r['detail'], 'detail'),
    latencyMs: int(r['latency_ms'], 'latency_ms'),
  };
}

/** `state, n, oldest` rows (oldest: the earliest created_at) as counts. */
export function countsOf(rows: readonly unknown[]): NotificationCounts {
  let pending = 0;
  let delivered = 0;
  let givenUp = 0;
  let oldestPendingAt: number | null = null;
  for (const raw of rows) {
    const r = raw as Record<string, unknown>;
    const n = int(r['n'], 'count');
    const state = oneOf<NotificationState>(r['state'], STATES, 'state');
    if (state === 'pending') {
      pending = n;
      oldestPendingAt = intOrNull(r['oldest'], 'oldest');
    } else if (state === 'delivered') delivered = n;
    else givenUp = n;
  }
  return { pending, oldestPendingAt, delivered, givenUp };
}

/** The outcome's effect on its notification: the state, when it is due next, when it was delivered. */
export function outcomeColumns(o: DeliveryOutcome): { state: NotificationState; nextAt: number | null; deliveredAt: number | null; lastResult: string } {
  const lastResult = o.httpStatus === null ? o.detail : `${o.httpStatus} ${o.detail}`.trim();
  if (o.result === 'delivered') return { state: 'delivered', nextAt: null, deliveredAt: o.at, lastResult };
  if (o.result === 'given_up') return { state: 'given_up', nextAt: null, deliveredAt: null, lastResult };
  return { state: 'pending', nextAt: o.nextAt, deliveredAt: null, lastResult };
}
