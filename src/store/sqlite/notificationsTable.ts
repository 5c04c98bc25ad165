import type Database from 'better-sqlite3';
import type { DeliveryOutcome, DueNotification, NotificationAttempt, NotificationCounts, StoredNotification } from '../../events/notifications.js';
import type { NotificationQuery } from '../../events/store.js';
import { ATTEMPT_COLUMNS, countsOf, NOTIFICATION_COLUMNS, outcomeColumns, rowToAttempt, rowToNotification } from '../shared/notificationRows.js';

/** The SQL of the notification outbox (`notifications`, `notification_attempts`), beside the log. */
export function notificationsTable(db: Database.Database) {
  // Prepared at first use: a write engine opened on a ledger older than the outbox (a migration's test) never needs them.
  const lazy = (sql: string) => {
    let stmt: Database.Statement | null = null;
    return () => (stmt ??= db.prepare(sql));
  };
  const insert = lazy('INSERT OR IGNORE INTO notifications (guid, seq, type, at, body, created_at, next_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
  // One statement: the due rows that no running lease holds are taken by this holder, as one writer at a time does.
  const lease = lazy(`UPDATE notifications SET holder = @holder, lease_until = @until
    WHERE (guid, seq) IN (SELECT guid, seq FROM notifications
      WHERE state = 'pending' AND next_at <= @now AND (lease_until IS NULL OR lease_until <= @now) ORDER BY next_at LIMIT @limit)
    RETURNING ${NOTIFICATION_COLUMNS}`);
  const insertAttempt = lazy('INSERT INTO notification_attempts (guid, seq, at, result, http_status, detail, latency_ms) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const update = lazy(`UPDATE notifications SET attempts = attempts + 1, state = @state, next_at = coalesce(@nextAt, next_at),
    delivered_at = coalesce(@deliveredAt, delivered_at), last_result = @lastResult, holder = NULL, lease_until = NULL
    WHERE guid = @guid AND seq = @seq AND state = 'pending'`);
  const redeliver = lazy("UPDATE notifications SET state = 'pending', next_at = @now, created_at = @now, holder = NULL, lease_until = NULL WHERE guid = @guid");
  const removeOf = lazy('DELETE FROM notifications WHERE guid = ?');
  const attemptsOf = lazy(`SELECT ${ATTEMPT_COLUMNS} FROM notification_attempts WHERE guid = ? ORDER BY position`);
  const counts = lazy("SELECT state, count(*) AS n, min(CASE WHEN state = 'pending' THEN created_at END) AS oldest FROM notifications GROUP BY state");
  return {
    /** Recorded and due at the event's time. */
    insert(due: readonly DueNotification[]): void {
      for (const d of due) insert().run(d.guid, d.seq, d.type, d.at, d.body, d.at, d.at);
    },
    lease(holder: string, now: number, limit: number, forMs: number): StoredNotification[] {
      return lease().all({ holder, now, until: now + forMs, limit }).map(rowToNotification);
    },
    record(outcomes: readonly DeliveryOutcome[]): void {
      for (const o of outcomes) {
        insertAttempt().run(o.guid, o.seq, o.at, o.result, o.httpStatus, o.detail, Math.round(o.latencyMs));
        update().run({ guid: o.guid, seq: o.seq, ...outcomeColumns(o) });
      }
    },
    redeliver(guids: readonly string[], now: number): number {
      let n = 0;
      for (const guid of guids) n += redeliver().run({ guid, now }).changes;
      return n;
    },
    /** A purged GUID's notifications leave with its response (their attempts stay, for history, until the tombstone goes). */
    removeOf(guid: string): void {
      removeOf().run(guid);
    },
    list(q: NotificationQuery): StoredNotification[] {
      const where: string[] = [];
      const params: Record<string, unknown> = { limit: Math.max(0, Math.floor(q.limit)) };
      if (q.state !== undefined) {
        where.push('state = @state');
        params['state'] = q.state;
      }
      if (q.guid !== undefined) {
        where.push('guid = @guid');
        params['guid'] = q.guid;
      }
      const sql = `SELECT ${NOTIFICATION_COLUMNS} FROM notifications ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, guid, seq LIMIT @limit`;
      return db.prepare(sql).all(params).map(rowToNotification);
    },
    attempts(guid: string): NotificationAttempt[] {
      return attemptsOf().all(guid).map(rowToAttempt);
    },
    counts(): NotificationCounts {
      return countsOf(counts().all());
    },
  };
}
export type NotificationsTable = ReturnType<typeof notificationsTable>;
