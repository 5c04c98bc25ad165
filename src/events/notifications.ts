import type { Actor, NewEvent } from './codecs.js';
import { evolve } from './evolve.js';
import type { LedgerState } from './state.js';
import { DEFAULTS } from '../shared/defaults.js';

/** What a channel is told (CONTRACT.md §11). */
export type NotificationType = 'transfer.settled' | 'transfer.dead_letter';
export type NotificationState = 'pending' | 'delivered' | 'given_up';

/** A notification an append makes due, as the outbox records it in the append's transaction. */
export interface DueNotification {
  readonly guid: string;
  /** The seq of the event that made it due: `webhook-id` is `guid:seq`. */
  readonly seq: number;
  readonly type: NotificationType;
  /** The event's time (ms since the epoch). */
  readonly at: number;
  /** The JSON body, as it is signed and sent on every attempt. */
  readonly body: string;
}

/** What the append that may make a notification due knows besides its events. */
export interface NotifyContext {
  /**
   * The outcome this append records is the reply to the channel's own request (a channel's send or resend
   * answered): the channel has it, so it is no `transfer.settled`.
   */
  readonly replied: boolean;
  /** Who wrote it: its `params.maxAttempts` is the attempt cap in force (else `cap`, else the default). */
  readonly actor: Actor | null;
  /** The attempt cap the writer had without recording it (serve's settler, the operator API's resolve). */
  readonly cap?: number | undefined;
}

/** The attempt cap the writer of an append had: its `maxAttempts` parameter, else the one it knew, else the default. */
function capOf(context: NotifyContext): number {
  const cap = context.actor?.params?.maxAttempts ?? context.cap;
  return typeof cap === 'number' && cap > 0 ? cap : DEFAULTS.maxAttempts;
}

/**
 * The rule of CONTRACT.md §11 for one event, as a pure function of the state before it and the state after it:
 * `transfer.settled` when the transfer became DONE other than in the reply to the channel's own request (an
 * inquiry's `Resolved`: the settler, `resolve`, `reconcile --settle`, the operator API, the inquiry before a
 * resend; a late answer; an `Answered` that no channel waits for: `reprocess`); `transfer.dead_letter` when it
 * became FAILED at the attempt cap. A `Resolved` right after `Claimed` (the continuity window's inquiry before a
 * first send) answers the channel's own first request: none.
 */
export function notificationOf(before: LedgerState | null, event: NewEvent, after: LedgerState, context: NotifyContext): NotificationType | null {
  if (before === null) return null;
  if (after.status === 'DONE' && before.status !== 'DONE') {
    if (event.type === 'Resolved') return before.status === 'RECEIVED' ? null : 'transfer.settled';
    if (event.type === 'Answered') return context.replied ? null : 'transfer.settled';
    return null;
  }
  if (after.status === 'FAILED' && before.status !== 'FAILED' && after.attempts >= capOf(context)) return 'transfer.dead_letter';
  return null;
}

/** The body of a notification (CONTRACT.md §11): the stored answer byte for byte, no request field but the GUID. */
export function notificationBody(type: NotificationType, state: LedgerState, at: number): string {
  return JSON.stringify({
    type,
    guid: state.guid,
    status: state.status,
    code: state.code,
    attempts: state.attempts,
    channel: state.channel,
    at: new Date(at).toISOString(),
    response: type === 'transfer.settled' ? state.response : null,
  });
}

/** The notifications one append makes due: each event folded from `current`, judged by `notificationOf`. */
export function notificationsDue(guid: string, current: LedgerState | null, events: readonly NewEvent[], context: NotifyContext): DueNotification[] {
  // Only an outcome can make one due (the commonest append, a channel's claim, is passed over unfolded).
  if (!events.some((e) => e.type === 'Resolved' || e.type === 'ConnectFailed' || e.type === 'Answered')) return [];
  const due: DueNotification[] = [];
  let state = current;
  for (const event of events) {
    const next = evolve(state, event, guid);
    const type = notificationOf(state, event, next, context);
    if (type !== null) due.push({ guid, seq: next.lastSeq, type, at: event.at, body: notificationBody(type, next, event.at) });
    state = next;
  }
  return due;
}

/** The first retry comes this long after a failed attempt; each later one twice as long after, up to `RETRY_MAX_MS`. */
export const RETRY_FIRST_MS = 5_000;
export const RETRY_MAX_MS = 3_600_000;

/** How long after its `attempts`-th failed attempt (1, 2, …) a notification is tried again: 5 s doubling, at most 1 h. */
export function retryDelayMs(attempts: number): number {
  const n = Math.max(1, attempts);
  return n > 20 ? RETRY_MAX_MS : Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (n - 1));
}

/** A delivery attempt's outcome, as the outbox records it. */
export interface DeliveryOutcome {
  readonly guid: string;
  readonly seq: number;
  /** When the attempt started (ms since the epoch). */
  readonly at: number;
  /** `delivered`: a 2xx. `failed`: anything else (to be tried again). `given_up`: failed, and past `--notify-for`. */
  readonly result: 'delivered' | 'failed' | 'given_up';
  /** The receiver's HTTP status; null when it gave none (refused, reset, timeout). */
  readonly httpStatus: number | null;
  /** What happened, for `history` and `notifications` (no body, no secret). */
  readonly detail: string;
  readonly latencyMs: number;
  /** When to try again (failed only). */
  readonly nextAt: number | null;
  /** The lease holder that made it: an outcome of a lease lost meanwhile is still recorded as an attempt. */
  readonly holder: string;
}

/** A notification as the outbox holds it. */
export interface StoredNotification extends DueNotification {
  readonly state: NotificationState;
  readonly createdAt: number;
  readonly nextAt: number;
  readonly attempts: number;
  readonly lastResult: string | null;
  readonly deliveredAt: number | null;
}

/** One delivery attempt, as `history` shows it. */
export interface NotificationAttempt {
  readonly guid: string;
  readonly seq: number;
  readonly at: number;
  readonly result: DeliveryOutcome['result'];
  readonly httpStatus: number | null;
  readonly detail: string;
  readonly latencyMs: number;
}

export interface NotificationCounts {
  readonly pending: number;
  /** `created_at` of the oldest pending one; null when none. */
  readonly oldestPendingAt: number | null;
  readonly delivered: number;
  readonly givenUp: number;
}
