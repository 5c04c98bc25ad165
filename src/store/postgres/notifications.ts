import type pg from 'pg';
import type { DeliveryOutcome, NotificationAttempt, NotificationCounts, StoredNotification } from '../../events/notifications.js';
import type { NotificationQuery } from '../../events/store.js';
import { ATTEMPT_COLUMNS, countsOf, NOTIFICATION_COLUMNS, outcomeColumns, rowToAttempt, rowToNotification } from '../shared/notificationRows.js';
import { SERVER_NOW_MS } from './serverClock.js';

type Db = pg.Pool | pg.ClientBase;

/**
 * Leases up to `limit` due pending notifications to `holder` in one statement: the rows are picked FOR UPDATE SKIP
 * LOCKED, so relays leasing at once take different rows and never wait on each other, and one whose lease is
 * running is not due. `now`: the store's clock when one was given, else the server's.
 */
export async function leaseNotifications(db: Db, holder: string, limit: number, forMs: number, now: number | null): Promise<StoredNotification[]> {
  const { rows } = await db.query({
    name: 'guidgate_lease_notifications',
    text: `WITH t AS (SELECT coalesce($4::bigint, ${SERVER_NOW_MS}) AS now),
           due AS (
             SELECT guid, seq FROM notifications, t
             WHERE state = 'pending' AND next_at <= t.now AND (lease_until IS NULL OR lease_until <= t.now)
             ORDER BY next_at LIMIT $2 FOR UPDATE SKIP LOCKED
           )
           UPDATE notifications n SET holder = $1, lease_until = (SELECT now FROM t) + $3
           FROM due WHERE n.guid = due.guid AND n.seq = due.seq
           RETURNING ${NOTIFICATION_COLUMNS.split(', ').map((c) => `n.${c}`).join(', ')}`,
    values: [holder, Math.max(0, Math.floor(limit)), Math.max(0, Math.floor(forMs)), now],
  });
  return rows.map(rowToNotification);
}

/** The attempts and their outcomes, in one transaction (one statement). */
export async function recordDeliveries(db: Db, outcomes: readonly DeliveryOutcome[]): Promise<void> {
  if (outcomes.length === 0) return;
  const cols = outcomes.map(outcomeColumns);
  await db.query({
    name: 'guidgate_record_deliveries',
    text: `WITH o AS (
             SELECT * FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::text[], $5::integer[], $6::text[], $7::integer[],
               $8::text[], $9::bigint[], $10::bigint[], $11::text[]) AS o(guid, seq, at, result, http_status, detail, latency_ms, state, next_at, delivered_at, last_result)
           ),
           attempts AS (
             INSERT INTO notification_attempts (guid, seq, at, result, http_status, detail, latency_ms)
             SELECT guid, seq, at, result, http_status, detail, latency_ms FROM o
           )
           UPDATE notifications n SET attempts = n.attempts + 1, state = o.state, next_at = coalesce(o.next_at, n.next_at),
             delivered_at = coalesce(o.delivered_at, n.delivered_at), last_result = o.last_result, holder = NULL, lease_until = NULL
           FROM o WHERE n.guid = o.guid AND n.seq = o.seq AND n.state = 'pending'`,
    values: [
      outcomes.map((o) => o.guid), outcomes.map((o) => o.seq), outcomes.map((o) => o.at), outcomes.map((o) => o.result),
      outcomes.map((o) => o.httpStatus), outcomes.map((o) => o.detail), outcomes.map((o) => Math.round(o.latencyMs)),
      cols.map((c) => c.state), cols.map((c) => c.nextAt), cols.map((c) => c.deliveredAt), cols.map((c) => c.lastResult),
    ],
  });
}

export async function redeliverNotifications(db: Db, guids: readonly string[], now: number | null): Promise<number> {
  const { rowCount } = await db.query({
    name: 'guidgate_redeliver_notifications',
    text: `UPDATE notifications SET state = 'pending', next_at = coalesce($2::bigint, ${SERVER_NOW_MS}), created_at = coalesce($2::bigint, ${SERVER_NOW_MS}),
             holder = NULL, lease_until = NULL WHERE guid = ANY($1::text[])`,
    values: [[...guids], now],
  });
  return rowCount ?? 0;
}

export async function listNotifications(db: Db, q: NotificationQuery): Promise<StoredNotification[]> {
  const { rows } = await db.query({
    text: `SELECT ${NOTIFICATION_COLUMNS} FROM notifications WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR guid = $2)
           ORDER BY created_at, guid, seq LIMIT $3`,
    values: [q.state ?? null, q.guid ?? null, Math.max(0, Math.floor(q.limit))],
  });
  return rows.map(rowToNotification);
}

export async function notificationAttempts(db: Db, guid: string): Promise<NotificationAttempt[]> {
  const { rows } = await db.query({ text: `SELECT ${ATTEMPT_COLUMNS} FROM notification_attempts WHERE guid = $1 ORDER BY position`, values: [guid] });
  return rows.map(rowToAttempt);
}

export async function notificationCounts(db: Db): Promise<NotificationCounts> {
  const { rows } = await db.query("SELECT state, count(*) AS n, min(CASE WHEN state = 'pending' THEN created_at END) AS oldest FROM notifications GROUP BY state");
  return countsOf(rows);
}
