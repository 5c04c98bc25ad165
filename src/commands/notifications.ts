import * as E from 'fp-ts/lib/Either.js';
import type { NotificationAttempt, NotificationState, StoredNotification } from '../events/notifications.js';
import type { NotificationOutbox, StoreResult } from '../events/store.js';

/** A notification as `guidgate notifications` shows it (`--json`: times in ISO 8601, the body as sent). */
export interface NotificationView {
  readonly webhookId: string;
  readonly guid: string;
  readonly seq: number;
  readonly type: string;
  readonly state: NotificationState;
  readonly attempts: number;
  readonly recordedAt: string;
  /** When the next attempt is due (pending only). */
  readonly nextAttemptAt: string | null;
  readonly deliveredAt: string | null;
  readonly lastResult: string | null;
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export function viewOf(n: StoredNotification): NotificationView {
  return {
    webhookId: `${n.guid}:${n.seq}`, guid: n.guid, seq: n.seq, type: n.type, state: n.state, attempts: n.attempts,
    recordedAt: iso(n.createdAt)!, nextAttemptAt: n.state === 'pending' ? iso(n.nextAt) : null, deliveredAt: iso(n.deliveredAt), lastResult: n.lastResult,
  };
}

/** A GUID's notifications with their delivery attempts (no body: it holds the unmasked answer), for the operator API. */
export async function readNotificationsOf(store: NotificationOutbox, guid: string): StoreResult<Array<NotificationView & { tries: NotificationAttempt[] }>> {
  const [rows, attempts] = await Promise.all([store.listNotifications({ guid, limit: 100 }), store.notificationAttempts(guid)]);
  if (E.isLeft(rows)) return rows;
  if (E.isLeft(attempts)) return attempts;
  return E.right(rows.right.map((n) => ({ ...viewOf(n), tries: attempts.right.filter((a) => a.seq === n.seq) })));
}

/** `guidgate notifications [--pending | --given-up]`: the outbox, oldest first. */
export async function listNotifications(store: NotificationOutbox, opts: { readonly state?: NotificationState; readonly limit: number }): StoreResult<NotificationView[]> {
  return E.map((rows: StoredNotification[]) => rows.map(viewOf))(await store.listNotifications({ ...(opts.state === undefined ? {} : { state: opts.state }), limit: opts.limit }));
}

/**
 * `guidgate notifications redeliver GUID…`: each GUID's notifications queued again, due now, with the same
 * `webhook-id` (a receiver that has it already drops it). `unknown`: GUIDs with no notification.
 */
export async function redeliver(store: NotificationOutbox, guids: readonly string[]): StoreResult<{ queued: number; unknown: string[] }> {
  const unknown: string[] = [];
  for (const guid of guids) {
    const found = await store.listNotifications({ guid, limit: 1 });
    if (E.isLeft(found)) return found;
    if (found.right.length === 0) unknown.push(guid);
  }
  const known = guids.filter((g) => !unknown.includes(g));
  if (known.length === 0) return E.right({ queued: 0, unknown });
  return E.map((queued: number) => ({ queued, unknown }))(await store.redeliverNotifications(known));
}
